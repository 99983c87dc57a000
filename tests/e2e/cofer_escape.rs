//! The container escapes of issue 21, tried for real: what a container can
//! write in its worktree must never make the host's git run a program, read
//! a host file or write another branch. Each test plants the attack the way
//! a container without the read-only `.git` mount could (the file written
//! from the host side), and also checks that the container itself can no
//! longer replace `.git`.

use std::path::Path;

use serde_json::Value;

use crate::cofer::{Fixture, error_of};
use crate::harness::*;

/// Lay out a git directory `.evil` in the worktree from inside the
/// container, with `config` as its config, and point the worktree's `.git`
/// at it.
async fn plant_gitdir(f: &Fixture, client: &Client, id: &str, config: &str) {
    let command = format!(
        "mkdir -p .evil/objects .evil/refs/heads && echo 'ref: refs/heads/main' > .evil/HEAD && \
         printf '{config}' > .evil/config && echo '* filter=pwn' > .gitattributes"
    );
    let r = client
        .call("environment_run_cmd", f.run_args(id, &command))
        .await;
    assert!(!is_error(&r), "{r:?}");
    let evil = f.worktree(id).join(".evil");
    redirect_gitfile(f, id, &evil);
}

/// Point environment `id`'s `.git` file at `target`, as a container
/// without the read-only mount could.
fn redirect_gitfile(f: &Fixture, id: &str, target: &Path) {
    let gitfile = f.worktree(id).join(".git");
    std::fs::write(&gitfile, format!("gitdir: {}\n", target.display())).unwrap();
}

/// The run's answer, checked for the warning that `.git` was restored.
fn assert_restored(f: &Fixture, id: &str, r: &rmcp::model::CallToolResult) -> Value {
    assert!(!is_error(r), "{r:?}");
    let out = structured(r).clone();
    let warnings = out["warnings"].as_array().expect("warnings");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("restored")),
        "a replaced .git is reported: {out}"
    );
    assert!(text(r).contains("warning:"), "{}", text(r));
    let gitfile = std::fs::read_to_string(f.worktree(id).join(".git")).unwrap();
    assert_eq!(
        gitfile,
        format!(
            "gitdir: {}\n",
            f.repo.join(".git/worktrees").join(id).display()
        ),
        "the .git file is git's again"
    );
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planted_filter_never_runs_on_the_host() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "filter").await;
    let marker = f.env.dir.path().join("pwned-by-filter");
    let config = format!(
        "[core]\\n\\trepositoryformatversion = 0\\n[filter \"pwn\"]\\n\\tclean = \"touch {}; cat\"\\n",
        marker.display()
    );
    plant_gitdir(&f, &client, "filter", &config).await;

    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("filter", "echo x > f.txt"),
        )
        .await;
    assert!(!marker.exists(), "the container's filter ran on the host");
    f.assert_no_filter_ran();
    let out = assert_restored(&f, "filter", &r);
    let commit = out["commit"].as_str().expect("the change was committed");
    let files = git(&f.repo, &["ls-tree", "-r", "--name-only", commit]);
    assert!(files.lines().any(|l| l == "f.txt"), "{files}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planted_core_worktree_reads_no_host_file() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let secret_dir = f.env.dir.path().join("host-only");
    std::fs::create_dir_all(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("secret.txt"), "HOST-ONLY-SECRET\n").unwrap();
    let client = f.env.start().await;
    f.create(&client, "reader").await;
    let config = format!(
        "[core]\\n\\trepositoryformatversion = 0\\n\\tworktree = {}\\n",
        secret_dir.display()
    );
    plant_gitdir(&f, &client, "reader", &config).await;

    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("reader", "echo y > g.txt"),
        )
        .await;
    let objects = walk(&f.worktree("reader").join(".evil/objects"));
    assert!(
        objects.is_empty(),
        "git wrote objects for the container: {objects:?}"
    );
    let out = assert_restored(&f, "reader", &r);
    let commit = out["commit"].as_str().expect("the change was committed");
    let files = git(&f.repo, &["ls-tree", "-r", "--name-only", commit]);
    assert!(!files.contains("secret.txt"), "{files}");
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("reader", "grep -r HOST-ONLY-SECRET /workdir; true"),
        )
        .await;
    assert!(!text(&r).contains("HOST-ONLY-SECRET"), "{}", text(&r));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gitfile_to_the_users_repository_leaves_main_alone() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let main = git(&f.repo, &["rev-parse", "main"]);
    let client = f.env.start().await;
    f.create(&client, "inject").await;
    redirect_gitfile(&f, "inject", &f.repo.join(".git"));

    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("inject", "echo injected > injected.txt"),
        )
        .await;
    assert_eq!(
        git(&f.repo, &["rev-parse", "main"]),
        main,
        "main is unchanged"
    );
    let out = assert_restored(&f, "inject", &r);
    assert_eq!(
        git(&f.repo, &["rev-parse", "cofer/inject"]).trim(),
        out["commit"].as_str().unwrap(),
        "the change went onto the environment's branch"
    );
    let status = git(&f.repo, &["status", "--porcelain"]);
    assert!(status.is_empty(), "the user's index is untouched: {status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_container_cannot_replace_git_and_a_worktree_is_no_source() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "walls").await;
    let gitfile = f.worktree("walls").join(".git");
    let before = std::fs::read_to_string(&gitfile).unwrap();
    for attempt in [
        "echo 'gitdir: /workdir/x' > /workdir/.git",
        "rm -f /workdir/.git",
        "mv /workdir/.git /workdir/moved",
        "touch /workdir/other && mv /workdir/other /workdir/.git",
    ] {
        let r = client
            .call("environment_run_cmd", f.run_args("walls", attempt))
            .await;
        assert!(!is_error(&r), "{r:?}");
        assert_ne!(structured(&r)["exit_code"], 0, "`{attempt}` succeeded");
        assert_eq!(
            std::fs::read_to_string(&gitfile).unwrap(),
            before,
            "{attempt}"
        );
    }

    // A worktree (with a .git directory the container could plant) is not a
    // repository an environment can be created from.
    std::fs::remove_file(&gitfile).unwrap();
    std::fs::create_dir_all(gitfile.join("objects")).unwrap();
    let mut args = f.create_args("nested");
    args["environment_source"] = f.worktree("walls").to_string_lossy().into();
    let e = error_of(&client.call("environment_create", args).await).clone();
    assert!(
        e["message"].as_str().unwrap().contains("linked worktree"),
        "{e}"
    );
}

/// Issue 34, class 1: a repository the container unpacks in /workdir, whose
/// own config defines a clean filter its attributes apply. git add would
/// check the gitlink's work tree and run the filter on the host.
#[tokio::test(flavor = "multi_thread")]
async fn a_nested_repositorys_filter_never_runs_on_the_host() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "nested").await;
    let marker = f.env.dir.path().join("pwned-by-nested-filter");
    let plant = format!(
        "mkdir -p sub/.git/objects sub/.git/refs/heads && echo 'ref: refs/heads/main' > sub/.git/HEAD && \
         printf '[core]\\n\\trepositoryformatversion = 0\\n[filter \"x\"]\\n\\tclean = \"touch {m}; cat\"\\n\\tprocess = \"touch {m}\"\\n' > sub/.git/config && \
         echo '* filter=x' > sub/.gitattributes && echo data > sub/file",
        m = marker.display()
    );
    f.run_ok(&client, "nested", &plant).await;
    let out = f
        .run_ok(
            &client,
            "nested",
            "echo more >> sub/file && echo top > top.txt",
        )
        .await;
    assert!(
        !marker.exists(),
        "the nested repository's filter ran on the host"
    );
    let commit = out["commit"].as_str().expect("the change was committed");
    let tree = git(&f.repo, &["ls-tree", "-r", commit]);
    assert!(
        tree.contains("\tsub/file") && tree.contains("\tsub/.gitattributes"),
        "{tree}"
    );
    assert!(
        !tree.contains("sub/.git/") && !tree.contains("160000"),
        "no nested .git, no gitlink: {tree}"
    );
    assert_eq!(
        git(&f.repo, &["show", &format!("{commit}:sub/file")]),
        "data\nmore\n"
    );
}

/// Issue 34, class 2: a branch carrying Cofer's own state. The container
/// un-ignores `.cofer/` and writes a hook where the cofer remote was; the
/// user checks the branch out as the answer tells them; the next push must
/// run nothing, and no record of the user's may change.
#[tokio::test(flavor = "multi_thread")]
async fn cofer_state_in_a_branch_never_reaches_the_host() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "hooked").await;
    f.create(&client, "victim").await;
    let marker = f.env.dir.path().join("pwned-by-hook");
    let hook = format!("#!/bin/sh\\ntouch {}\\n", marker.display());
    let plant = format!(
        "printf '!/.cofer/\\n' >> .gitignore && \
         mkdir -p .cofer/remote.git/hooks .cofer/environments .COFER && \
         printf '{hook}' > .cofer/remote.git/hooks/post-receive && \
         printf '{hook}' > .cofer/remote.git/hooks/reference-transaction && \
         chmod +x .cofer/remote.git/hooks/* && echo '{{}}' > .cofer/environments/victim.json && \
         echo x > .COFER/y && echo work > work.txt"
    );
    let out = f.run_ok(&client, "hooked", &plant).await;
    let commit = out["commit"].as_str().expect("committed");
    let files = git(&f.repo, &["ls-tree", "-r", "--name-only", commit]);
    assert!(files.lines().any(|l| l == "work.txt"), "{files}");
    assert!(
        !files.to_lowercase().contains(".cofer"),
        "Cofer's state is never committed: {files}"
    );

    let out = cofer(&f.repo, &["checkout", "hooked"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!f.repo.join(".cofer/remote.git").exists());
    let record = f.repo.join(".git/cofer/environments/victim.json");
    let before = std::fs::read_to_string(&record).unwrap();
    git(&f.repo, &["checkout", "--quiet", "main"]);

    // Even a hook that got into the real remote some other way runs not.
    let real_hooks = f.repo.join(".git/cofer/remote.git/hooks");
    std::fs::create_dir_all(&real_hooks).unwrap();
    for name in [
        "pre-receive",
        "post-receive",
        "reference-transaction",
        "update",
    ] {
        let path = real_hooks.join(name);
        std::fs::write(&path, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    f.run_ok(&client, "hooked", "echo again >> work.txt").await;
    f.run_ok(&client, "victim", "echo mine > mine.txt").await;
    assert!(!marker.exists(), "a hook ran on the host");
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        before,
        "the record is the host's"
    );
    let open = client.call("environment_open", f.scoped("victim")).await;
    assert!(!is_error(&open), "{open:?}");
}

/// Issue 34, class 4: a relative PATH entry (and one inside the workspace)
/// never gives the host a program the container wrote.
#[tokio::test(flavor = "multi_thread")]
async fn programs_planted_on_path_never_run_on_the_host() {
    let Some(mut f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let marker = f.env.dir.path().join("pwned-by-path");
    let planted_bin = f.worktree("pathy").join("node_modules/.bin");
    let path = format!(
        "node_modules/.bin:.:{}:{}",
        planted_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    f.env.host_vars.push(("PATH".into(), path));
    let client = f.env.start().await;
    f.create(&client, "pathy").await;
    let plant = format!(
        "mkdir -p node_modules/.bin && for p in git tar podman; do \
         printf '#!/bin/sh\\ntouch {}\\n' > node_modules/.bin/$p; chmod +x node_modules/.bin/$p; cp node_modules/.bin/$p $p; done",
        marker.display()
    );
    f.run_ok(&client, "pathy", &plant).await;
    let out = f.run_ok(&client, "pathy", "echo after > after.txt").await;
    assert!(out["commit"].is_string(), "{out}");
    let destroyed = client.call("environment_destroy", f.scoped("pathy")).await;
    assert!(!is_error(&destroyed), "{destroyed:?}");
    assert!(!marker.exists(), "a planted program ran on the host");
    assert_eq!(
        f.env.logged("git=/"),
        1,
        "the first log line names the git found"
    );
}

/// Folders nested without end: the commit after the command and the
/// destroy walk them on the host, where a recursive walk would run out of
/// stack and take the host down. 2,000 levels are past what the old walk
/// took in a debug build (~1,000) and, unlike deeper ones, quick for the
/// container's shell (past PATH_MAX its `cd` crawls; the unit tests of
/// `hostgit` go 5,000 levels down). And files over the size limit, which
/// cost the container nothing (sparse), are named up to 20 and counted
/// past that: each would be a line of the answer.
#[tokio::test(flavor = "multi_thread")]
async fn folders_nested_without_end_neither_crash_the_host_nor_stay() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "deep").await;
    let out = f.run_ok(
        &client,
        "deep",
        "for i in $(seq 25); do truncate -s 11M big$i; done; \
         i=0; while [ $i -lt 2000 ]; do mkdir d && cd -P d && echo $i > f || exit 1; i=$((i+1)); done",
    )
    .await;
    let large = out["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w.as_str().unwrap().contains("(11 MB) was not committed"))
        .count();
    assert_eq!(large, 20, "{out}");
    let warnings = out["warnings"].to_string();
    assert!(
        warnings.contains("5 more files over the size limit were not committed"),
        "{out}"
    );
    assert!(
        warnings.contains("1 folders were not committed")
            && warnings.contains("nest deeper than 256"),
        "{out}"
    );
    let commit = out["commit"].as_str().expect("the levels within the limit");
    let deepest = git(&f.repo, &["ls-tree", "-r", "--name-only", commit])
        .lines()
        .map(|l| l.split('/').count())
        .max();
    assert_eq!(deepest, Some(257), "d/…/d/f, the last d at the limit");
    // The host is still there, and the worktree goes with the environment.
    f.run_ok(&client, "deep", "true").await;
    let destroyed = client.call("environment_destroy", f.scoped("deep")).await;
    assert!(!is_error(&destroyed), "{destroyed:?}");
    assert!(!f.worktree("deep").exists());
}

/// Issue 61, item 3: a filter driver in a submodule's own config
/// (`.git/modules/<name>/config`, which a plugin with the workspace
/// writable can write) never runs on the host: not for the status
/// environment_create reads, nor for its checkout, even with the top
/// config asking for submodules to be recursed into.
#[tokio::test(flavor = "multi_thread")]
async fn a_submodules_filter_never_runs_on_the_host() {
    for embedded in [false, true] {
        submodule_filter(embedded).await;
    }
}

async fn submodule_filter(embedded: bool) {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let library = f.env.dir.path().join("library");
    std::fs::create_dir_all(&library).unwrap();
    git(&library, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(library.join("lib.txt"), "aaaa\n").unwrap();
    std::fs::write(library.join(".gitattributes"), "* filter=subpwn\n").unwrap();
    git(&library, &["add", "."]);
    git(&library, &["commit", "--quiet", "-m", "library"]);
    let source = library.to_string_lossy();
    git(
        &f.repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "--quiet",
            &source,
            "sub",
        ],
    );
    git(&f.repo, &["commit", "--quiet", "-m", "a submodule"]);
    let marker = f.env.dir.path().join("pwned-by-submodule-filter");
    let program = format!("sh -c 'touch {}; cat'", marker.display());
    // Both places a submodule's git directory may be: absorbed into the
    // top one's `.git/modules/`, or in the submodule's own folder (as
    // older git left it, and as a plugin may lay it out).
    let sub = if embedded {
        std::fs::remove_file(f.repo.join("sub/.git")).unwrap();
        std::fs::rename(f.repo.join(".git/modules/sub"), f.repo.join("sub/.git")).unwrap();
        let config = f.repo.join("sub/.git/config");
        git(
            &f.repo,
            &[
                "config",
                "--file",
                &config.to_string_lossy(),
                "--unset",
                "core.worktree",
            ],
        );
        f.repo.join("sub/.git")
    } else {
        f.repo.join(".git/modules/sub")
    };
    for key in ["clean", "smudge", "process"] {
        let config = sub.join("config");
        git(
            &f.repo,
            &[
                "config",
                "--file",
                &config.to_string_lossy(),
                &format!("filter.subpwn.{key}"),
                &program,
            ],
        );
    }
    git(&f.repo, &["config", "submodule.recurse", "true"]);
    // The same size, a new mtime: status must read it through the filter.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(f.repo.join("sub/lib.txt"), "bbbb\n").unwrap();

    let client = f.env.start().await;
    let r = client
        .call("environment_create", f.create_args("subfilter"))
        .await;
    assert!(
        !marker.exists(),
        "a submodule's filter ran on the host (embedded: {embedded}): {r:?}"
    );
    f.assert_no_filter_ran();
}

/// Issue 61, item 12: names git refuses to check out on some system
/// (`.git` written with a trailing dot or space, its 8.3 short name, an
/// invisible character) are never committed, and the answer names them.
#[tokio::test(flavor = "multi_thread")]
async fn names_git_refuses_are_left_out_and_named() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "names").await;
    let command = "touch '.git.' 'git~1' 'GIT~1' \"$(printf '.g\\342\\200\\213it')\" kept.txt && \
                   mkdir '.git ' && touch '.git /config'";
    let r = client
        .call("environment_run_cmd", f.run_args("names", command))
        .await;
    assert!(!is_error(&r), "{r:?}");
    let out = structured(&r).clone();
    let warnings = out["warnings"].to_string();
    assert!(
        warnings.contains("5 files or folders were not committed"),
        "{warnings}"
    );
    let commit = out["commit"].as_str().expect("kept.txt was committed");
    let files = git(&f.repo, &["ls-tree", "-r", "--name-only", "-z", commit]);
    let files: Vec<&str> = files.split('\0').filter(|n| !n.is_empty()).collect();
    assert!(files.contains(&"kept.txt"), "{files:?}");
    for refused in [".git.", "git~1", "GIT~1", ".g\u{200b}it", ".git /config"] {
        assert!(!files.contains(&refused), "{refused:?} in {files:?}");
    }
}
