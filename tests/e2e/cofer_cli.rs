//! The `cofer` command a person runs beside the agent, on real Podman and
//! git: it shows and takes an environment's work without ever moving a
//! branch of the user's.

use crate::cofer::Fixture;
use crate::harness::*;

/// Issue 54, items 1, 2 and 5: an environment whose id is a branch of the
/// user's (`main`) is checked out on a branch of its own, the user's
/// `main` untouched; a branch of the user's with that name is refused,
/// not moved; `cofer diff` shows what the environment changed since the
/// commit it was made from, whichever branch the user is on; no tracking
/// ref stays behind once the environment is destroyed.
#[tokio::test(flavor = "multi_thread")]
async fn checkout_diff_and_destroy_never_touch_the_users_branches() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    // A second branch of the user's, with a file of its own.
    git(&f.repo, &["checkout", "--quiet", "-b", "other"]);
    std::fs::write(f.repo.join("other.txt"), "the user's\n").unwrap();
    git(&f.repo, &["add", "other.txt"]);
    git(&f.repo, &["commit", "--quiet", "-m", "other work"]);
    git(&f.repo, &["checkout", "--quiet", "main"]);
    let main_before = git(&f.repo, &["rev-parse", "main"]);

    let client = f.env.start().await;
    let mut args = f.create_args("main");
    args["from_git_ref"] = serde_json::json!("other");
    let r = client.call("environment_create", args).await;
    assert!(!is_error(&r), "{r:?}");
    f.run_ok(&client, "main", "echo agent > agent.txt").await;

    // diff: only what the agent did, though the user is on `main`, which
    // lacks other.txt.
    let diff = succeeded(&cofer(&f.repo, &["diff", "main"]));
    assert!(diff.contains("+agent"), "{diff}");
    assert!(!diff.contains("other.txt"), "{diff}");

    // checkout: its own branch; `main` stays where the user left it.
    succeeded(&cofer(&f.repo, &["checkout", "main"]));
    assert_eq!(git(&f.repo, &["rev-parse", "main"]), main_before);
    assert_eq!(
        git(&f.repo, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "cofer-main"
    );
    assert!(f.repo.join("agent.txt").exists());
    // diff after the checkout still shows the work.
    let diff = succeeded(&cofer(&f.repo, &["diff", "main"]));
    assert!(diff.contains("+agent"), "{diff}");
    // Again after more work: moved forward, still not `main`.
    git(&f.repo, &["checkout", "--quiet", "main"]);
    f.run_ok(&client, "main", "echo more >> agent.txt").await;
    succeeded(&cofer(&f.repo, &["checkout", "main"]));
    assert_eq!(git(&f.repo, &["rev-parse", "main"]), main_before);
    git(&f.repo, &["checkout", "--quiet", "main"]);

    // A branch of the user's that has the checkout's name: refused, kept.
    let r = client
        .call("environment_create", f.create_args("feature"))
        .await;
    assert!(!is_error(&r), "{r:?}");
    git(&f.repo, &["branch", "cofer-feature", "other"]);
    let theirs = git(&f.repo, &["rev-parse", "cofer-feature"]);
    let out = cofer(&f.repo, &["checkout", "feature"]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("did not make"), "{said}");
    assert_eq!(git(&f.repo, &["rev-parse", "cofer-feature"]), theirs);
    assert_eq!(git(&f.repo, &["rev-parse", "main"]), main_before);

    // Destroyed: nothing of it stays among the user's refs.
    let r = client.call("environment_destroy", f.scoped("main")).await;
    assert!(!is_error(&r), "{r:?}");
    let refs = git(&f.repo, &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs.contains("refs/remotes/cofer/"), "{refs}");
}

/// The `cofer` binary.
fn cofer_bin() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/cofer")
}

/// `program` in the fixture's repository with the variables that point
/// `cofer` at the fixture's own host (plugins, policy, cache, variables),
/// as a person would run it beside the agent.
fn beside_the_agent(f: &Fixture, program: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command
        .current_dir(&f.repo)
        .env("COFER_HOST", env!("CARGO_BIN_EXE_host"))
        .env("MCP_HOST_PLUGINS", &f.env.plugins)
        .env("MCP_HOST_CONFIG", &f.env.config)
        .env("MCP_HOST_CACHE", &f.env.cache)
        .env("GIT_PAGER", "cat")
        .env("COFER_TEST_USER_GIT", "1")
        .env("TMPDIR", one_shot_tmp(f))
        .envs(f.env.host_vars.iter().map(|(k, v)| (k, v)));
    command
}

/// The temporary folder of every host `cofer` starts in a test: where a
/// Podman service the host started keeps its socket.
fn one_shot_tmp(f: &Fixture) -> std::path::PathBuf {
    let dir = f.env.dir.path().join("cofer-tmp");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Issue 72: every `cofer` command left the `podman system service` its
/// host started running, and its folder behind. Nothing started by the
/// hosts `cofer` ran may be left: no process names their temporary
/// folder, no folder is left in it.
pub(crate) fn nothing_left_running(f: &Fixture) {
    let tmp = one_shot_tmp(f);
    let needle = tmp.display().to_string();
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&needle) {
                left.push(cmdline);
            }
        }
    }
    assert!(left.is_empty(), "left running after cofer: {left:?}");
    let folders: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(folders.is_empty(), "left in {needle}: {folders:?}");
}

/// `cofer ARGS` beside the agent, `extra` variables on top.
pub(crate) fn by_hand(f: &Fixture, args: &[&str], extra: &[(&str, &str)]) -> std::process::Output {
    beside_the_agent(f, &cofer_bin())
        .args(args)
        .envs(extra.iter().copied())
        .output()
        .unwrap()
}

/// `cofer watch`'s output until it shows `needle` twice (two refreshes),
/// then it is stopped as a person would (it runs until interrupted).
fn watch_until(f: &Fixture, needle: &str) -> String {
    use std::io::Read;
    let mut child = beside_the_agent(f, &cofer_bin())
        .args(["watch", "--interval", "1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    while seen.matches(needle).count() < 2 {
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(bytes) => seen.push_str(&String::from_utf8_lossy(&bytes)),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        seen.matches(needle).count() >= 2,
        "watch never showed `{needle}` twice: {seen}"
    );
    seen
}

pub(crate) fn failed_saying(out: &std::process::Output, words: &str) {
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected a failure: {said}");
    assert!(said.contains(words), "{said}");
}

/// Issue 55: a person prepares an environment with the repository's
/// defaults, hands it to an agent, runs in it, merges and applies its work
/// (refused over uncommitted work, no filter of the user's chosen by the
/// environment's attributes), prunes and deletes it, all from `cofer`.
#[tokio::test(flavor = "multi_thread")]
async fn a_person_drives_environments_from_the_terminal() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    // A filter of the user's, which an environment's .gitattributes must
    // not be able to choose when its work comes in.
    let mark = f.env.dir.path().join("user-filter-ran");
    let smudge = format!("sh -c 'touch {}; cat'", mark.display());
    git(&f.repo, &["config", "filter.usermerge.smudge", &smudge]);
    git(&f.repo, &["config", "filter.usermerge.clean", &smudge]);
    // The user's identity only in their global config, as most people
    // have it (issue 72: the merge failed with "Committer identity
    // unknown"): the repository has none of its own.
    let global = f.env.dir.path().join("global-gitconfig");
    std::fs::write(
        &global,
        "[user]\n\tname = The User\n\temail = user@example.com\n",
    )
    .unwrap();
    let global = global.display().to_string();

    let image = cofer_image();
    succeeded(&by_hand(&f, &["config", "base-image", "set", &image], &[]));
    succeeded(&by_hand(
        &f,
        &["config", "env", "set", "GREETING", "hello"],
        &[],
    ));
    succeeded(&by_hand(
        &f,
        &[
            "config",
            "setup-command",
            "add",
            "echo set-up > /tmp/setup-ran",
        ],
        &[],
    ));
    let shown = succeeded(&by_hand(&f, &["config", "show", "--json"], &[]));
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["base_image"], image.as_str());
    assert_eq!(shown["envs"][0], "GREETING=hello");

    // Made by hand with the defaults; the agent finds it.
    let made = succeeded(&by_hand(
        &f,
        &["create", "--title", "by hand", "--id", "hand"],
        &[],
    ));
    assert!(made.contains("GREETING=hello"), "{made}");
    let client = f.env.start().await;
    let r = client.call("environment_open", f.scoped("hand")).await;
    assert!(!is_error(&r), "{r:?}");
    let listed = succeeded(&by_hand(&f, &["list"], &[]));
    assert!(
        listed.contains("hand") && listed.contains("by hand") && listed.contains("cofer/hand"),
        "{listed}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&succeeded(&by_hand(&f, &["list", "--json"], &[]))).unwrap();
    assert_eq!(json[0]["id"], "hand");
    // Still running once the host `cofer create` ran has ended its
    // Podman service: the container is not the service's.
    assert_eq!(json[0]["container_state"], "running");
    nothing_left_running(&f);

    // One command: its output and exit code are cofer's; its work committed.
    let out = by_hand(
        &f,
        &[
            "run",
            "hand",
            "--",
            "sh",
            "-c",
            "cat /tmp/setup-ran; echo \"$GREETING\" > greeting.txt; printf '* filter=usermerge\\n' > .gitattributes; exit 3",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("set-up"),
        "{out:?}"
    );
    let log = git(&f.repo, &["log", "--format=%s", "cofer/hand"]);
    assert!(log.contains("cofer run"), "{log}");

    // Watch: the list and the environment's last command, again and again.
    let watched = watch_until(&f, "cofer run");
    assert!(
        watched.contains("hand") && watched.contains("running"),
        "{watched}"
    );

    // Over uncommitted work of the user's: refused, nothing touched.
    std::fs::write(f.repo.join("README.md"), "the user's edit\n").unwrap();
    let head = git(&f.repo, &["rev-parse", "HEAD"]);
    failed_saying(&by_hand(&f, &["merge", "hand"], &[]), "uncommitted changes");
    failed_saying(&by_hand(&f, &["apply", "hand"], &[]), "uncommitted changes");
    assert_eq!(git(&f.repo, &["rev-parse", "HEAD"]), head);
    assert_eq!(
        std::fs::read_to_string(f.repo.join("README.md")).unwrap(),
        "the user's edit\n"
    );
    git(&f.repo, &["checkout", "--", "README.md"]);

    // Merged: a merge commit with the work; the user's filter never ran.
    succeeded(&by_hand(
        &f,
        &["merge", "hand"],
        &[("GIT_CONFIG_GLOBAL", &global)],
    ));
    let who = git(&f.repo, &["log", "-1", "--format=%an <%ae> / %cn <%ce>"]);
    assert_eq!(
        who.trim(),
        "The User <user@example.com> / The User <user@example.com>"
    );
    assert_eq!(
        std::fs::read_to_string(f.repo.join("greeting.txt")).unwrap(),
        "hello\n"
    );
    let parents = git(&f.repo, &["rev-list", "--parents", "-n1", "HEAD"]);
    assert_eq!(parents.split_whitespace().count(), 3, "{parents}");
    assert!(
        !mark.exists(),
        "an environment's .gitattributes ran the user's filter on merge"
    );

    // Applied: staged, not committed.
    succeeded(&by_hand(
        &f,
        &["create", "--title", "second", "--id", "second"],
        &[],
    ));
    succeeded(&by_hand(
        &f,
        &["run", "second", "--", "echo applied > applied.txt"],
        &[],
    ));
    let head = git(&f.repo, &["rev-parse", "HEAD"]);
    succeeded(&by_hand(&f, &["apply", "second"], &[]));
    assert_eq!(git(&f.repo, &["rev-parse", "HEAD"]), head);
    assert!(git(&f.repo, &["diff", "--cached", "--name-only"]).contains("applied.txt"));
    assert!(!mark.exists());
    git(&f.repo, &["reset", "--quiet", "--hard"]);

    // Prune: the merged one goes, the other (not in HEAD) stays.
    let would = succeeded(&by_hand(&f, &["prune", "--dry-run"], &[]));
    assert!(
        would.contains("would delete hand") && !would.contains("second"),
        "{would}"
    );
    succeeded(&by_hand(&f, &["prune"], &[]));
    let ids = succeeded(&by_hand(&f, &["list", "--quiet"], &[]));
    assert_eq!(ids.trim(), "second");

    // Delete --all: nothing left, the user's branch where it was.
    let main = git(&f.repo, &["rev-parse", "main"]);
    succeeded(&by_hand(&f, &["delete", "--all"], &[]));
    assert!(
        succeeded(&by_hand(&f, &["list", "--quiet"], &[]))
            .trim()
            .is_empty()
    );
    assert_eq!(git(&f.repo, &["rev-parse", "main"]), main);
    assert!(f.containers().is_empty(), "{}", f.describe_containers());
    failed_saying(&by_hand(&f, &["delete"], &[]), "--all");
    nothing_left_running(&f);
}

/// Issue 55: `cofer terminal` is a real shell on a real terminal (driven
/// here through `script`'s pseudo-terminal), in /workdir; what the person
/// changed is committed when it exits. Without a terminal it says what to
/// use instead.
#[tokio::test(flavor = "multi_thread")]
async fn cofer_terminal_is_a_shell_whose_work_is_committed() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "shell").await;
    failed_saying(
        &by_hand(&f, &["terminal", "shell"], &[]),
        "needs a terminal",
    );

    let mut script = beside_the_agent(&f, std::path::Path::new("script"));
    script
        .args(["-q", "-e", "-c"])
        .arg(format!("{} terminal shell", cofer_bin().display()))
        .arg("/dev/null")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = script.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(
        &mut stdin,
        b"pwd > where.txt; tty > tty.txt; echo typed > by-hand.txt; exit\n",
    )
    .unwrap();
    // Held open until the shell is done: EOF would end `script` early.
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed().as_secs() < 120,
            "cofer terminal did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    // Issue 72: it said "nothing changed" after committing what was typed.
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("your changes are commit") && !said.contains("nothing changed"),
        "{said}"
    );
    nothing_left_running(&f);
    let files = git(
        &f.repo,
        &["show", "--format=%s", "--name-only", "cofer/shell"],
    );
    assert!(files.contains("cofer terminal"), "{files}");
    assert!(files.contains("by-hand.txt"), "{files}");
    let at = |name: &str| git(&f.repo, &["show", &format!("cofer/shell:{name}")]);
    assert_eq!(at("where.txt").trim(), "/workdir");
    assert!(at("tty.txt").starts_with("/dev/pts/"), "{}", at("tty.txt"));
}

/// Issue 70, item 8: what an agent wrote (a commit message, a file, a
/// title) reaches the person's terminal without an ESC or C1 sequence or
/// a bidi override, in `cofer log`, `cofer diff`, `cofer list` and
/// `cofer list --json` (which keeps the value, escaped).
#[tokio::test(flavor = "multi_thread")]
async fn an_agents_text_carries_no_terminal_sequence_to_cofer() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    let mut args = f.create_args("esc");
    args["title"] = serde_json::json!("ti\u{202e}tle\u{9b}2J");
    let r = client.call("environment_create", args).await;
    assert!(!is_error(&r), "{r:?}");
    // A file and a commit message holding ESC (OSC retitle, CSI clear),
    // a C1 CSI and a bidi override.
    let mut run = f.run_args(
        "esc",
        "printf 'safe\\033]0;pwned\\007\\033[2J\\302\\233\\342\\200\\256x\\n' > shown.txt",
    );
    run["explanation"] = serde_json::json!("message \u{1b}[2J\u{9b}31m\u{2066}evil");
    let r = client.call("environment_run_cmd", run).await;
    assert!(!is_error(&r), "{r:?}");
    let raw_seen = |text: &str| {
        text.contains('\u{1b}')
            || text.contains('\u{9b}')
            || text.contains('\u{202e}')
            || text.contains('\u{2066}')
            || text.contains('\u{7}')
    };
    for args in [&["log", "esc"][..], &["diff", "esc"], &["list"]] {
        let out = by_hand(&f, args, &[]);
        let said = succeeded(&out);
        assert!(!raw_seen(&said), "cofer {args:?}: {said:?}");
        assert!(
            said.contains("safe") || said.contains("ti"),
            "cofer {args:?}: {said:?}"
        );
    }
    let json = succeeded(&by_hand(&f, &["list", "--json"], &[]));
    assert!(!raw_seen(&json), "{json:?}");
    let listed: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(listed[0]["title"], "ti\u{202e}tle\u{9b}2J");
}
