//! Issue 72, items 3 to 5: what `cofer` says after merge, apply, delete and
//! with a broken config is what happened, on real Podman and git.

use crate::cofer::Fixture;
use crate::cofer_cli::{by_hand, failed_saying};
use crate::harness::*;

/// A conflicting merge prints git's CONFLICT line; an apply with nothing
/// to take says nothing was staged; the branch `cofer checkout` made goes
/// with its environment unless the person added to it.
#[tokio::test(flavor = "multi_thread")]
async fn merge_apply_and_delete_say_what_happened() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let global = f.env.dir.path().join("global-gitconfig");
    std::fs::write(&global, "[user]\n\tname = U\n\temail = u@example.com\n").unwrap();
    let global = global.display().to_string();
    let client = f.env.start().await;
    f.create(&client, "clash").await;
    f.run_ok(&client, "clash", "echo theirs > README.md").await;
    std::fs::write(f.repo.join("README.md"), "mine\n").unwrap();
    git(&f.repo, &["commit", "--quiet", "-am", "mine"]);
    let out = by_hand(&f, &["merge", "clash"], &[("GIT_CONFIG_GLOBAL", &global)]);
    failed_saying(&out, "CONFLICT (content): Merge conflict in README.md");
    git(&f.repo, &["merge", "--abort"]);

    // Nothing to apply: an environment that changed nothing.
    f.create(&client, "idle").await;
    let out = by_hand(&f, &["apply", "idle"], &[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(
        said.contains("nothing was staged") && !said.contains("are staged"),
        "{said}"
    );

    // Checked out, then deleted: its local branch goes with it.
    succeeded(&by_hand(&f, &["checkout", "clash"], &[]));
    git(&f.repo, &["checkout", "--quiet", "main"]);
    let said = succeeded(&by_hand(&f, &["delete", "clash"], &[]));
    assert!(said.contains("removed branch cofer-clash"), "{said}");
    let branches = git(&f.repo, &["branch", "--list", "cofer-*"]);
    assert!(branches.trim().is_empty(), "{branches}");
    // One the person committed to stays, and the answer says why.
    succeeded(&by_hand(&f, &["checkout", "idle"], &[]));
    git(
        &f.repo,
        &["commit", "--quiet", "--allow-empty", "-m", "my own work"],
    );
    git(&f.repo, &["checkout", "--quiet", "main"]);
    let said = succeeded(&by_hand(&f, &["prune"], &[]));
    let said = format!(
        "{said}{}",
        succeeded(&by_hand(&f, &["delete", "idle"], &[]))
    );
    assert!(said.contains("kept branch cofer-idle"), "{said}");
    assert!(
        !git(&f.repo, &["branch", "--list", "cofer-idle"])
            .trim()
            .is_empty()
    );
}

/// A broken `.git/cofer/config.json`: the tools point at `cofer config
/// show`, which shows it and the way out; `cofer config reset` moves it
/// aside and the repository works again.
#[tokio::test(flavor = "multi_thread")]
async fn a_broken_config_is_shown_and_reset() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let file = f.repo.join(".git/cofer/config.json");
    std::fs::write(&file, "{\"base_image\": 42, oops").unwrap();
    let client = f.env.start().await;
    let r = client
        .call("environment_create", f.create_args("broken"))
        .await;
    let said = format!("{r:?}");
    assert!(
        is_error(&r) && said.contains("cofer config show") && said.contains("cofer config reset"),
        "{said}"
    );
    let out = by_hand(&f, &["config", "show"], &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("oops"),
        "{out:?}"
    );
    failed_saying(&out, "cofer config reset");
    let said = succeeded(&by_hand(&f, &["config", "reset"], &[]));
    assert!(said.contains("config.json.bak"), "{said}");
    assert!(
        std::fs::read_to_string(file.with_extension("json.bak"))
            .unwrap()
            .contains("oops")
    );
    succeeded(&by_hand(&f, &["config", "show"], &[]));
    let r = client
        .call("environment_create", f.create_args("fixed"))
        .await;
    assert!(!is_error(&r), "{r:?}");
}

/// Issue 70, item 1 end to end: programs the repository's config names
/// (the user's `.git/config` and Cofer's own remote's, as an attacker of
/// round five left them) never run in Cofer's push (the git capability's
/// push), nor in the person's own `cofer merge`, `diff` and `log`; the same
/// keys do run them for plain git, so the check is not empty.
#[tokio::test(flavor = "multi_thread")]
async fn programs_named_in_gits_config_never_run_in_cofer() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let mark = f.env.dir.path().join("program-ran");
    let evil = f.env.dir.path().join("evil.sh");
    std::fs::write(
        &evil,
        format!("#!/bin/sh\necho \"$0 $*\" >> {}\nexit 1\n", mark.display()),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let evil = evil.display().to_string();
    let remote = f.repo.join(".git/cofer/remote.git");
    git(&remote, &["config", "receive.certNonceSeed", "seed"]);
    for dir in [f.repo.clone(), remote.clone()] {
        for (key, value) in [
            ("core.alternateRefsCommand", evil.as_str()),
            ("push.gpgSign", "true"),
            ("gpg.program", evil.as_str()),
            ("credential.helper", evil.as_str()),
            ("core.sshCommand", evil.as_str()),
            ("core.pager", evil.as_str()),
            ("diff.external", evil.as_str()),
        ] {
            git(&dir, &["config", key, value]);
        }
    }
    let global = f.env.dir.path().join("global-gitconfig");
    std::fs::write(&global, "[user]\n\tname = U\n\temail = u@example.com\n").unwrap();
    let global = global.display().to_string();

    let client = f.env.start().await;
    f.create(&client, "cfg").await;
    f.run_ok(&client, "cfg", "echo work > work.txt").await;
    for args in [&["diff", "cfg"][..], &["log", "cfg"], &["merge", "cfg"]] {
        succeeded(&by_hand(&f, args, &[("GIT_CONFIG_GLOBAL", &global)]));
    }
    assert!(f.repo.join("work.txt").exists(), "the merge took the work");
    assert!(
        !mark.exists(),
        "a program the config names ran: {}",
        std::fs::read_to_string(&mark).unwrap_or_default()
    );
    // Plain git runs it: the keys are live.
    let out = std::process::Command::new("git")
        .args(["push", "-q", "--force"])
        .arg(&remote)
        .arg("HEAD:refs/heads/plain")
        .current_dir(&f.repo)
        .output()
        .unwrap();
    let _ = out;
    assert!(mark.exists(), "plain git push should run gpg.program");
}

/// Issue 70, item 9: a warning both commits of a command make (the
/// changes found before it, then its own) is said once.
#[tokio::test(flavor = "multi_thread")]
async fn a_warning_of_both_commits_is_said_once() {
    let Some(f) = Fixture::with_podman(&[("COFER_MAX_FILE_MB", "1")], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "big").await;
    f.run_ok(&client, "big", "head -c 2000000 /dev/zero > big.bin")
        .await;
    let out = f.run_ok(&client, "big", "true").await;
    let warnings: Vec<&serde_json::Value> = out["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w.as_str().unwrap().contains("big.bin"))
        .collect();
    assert_eq!(warnings.len(), 1, "{out}");
}
