//! The safe git command against what a repository's config names.

use super::*;

/// A filter driver written into the repository's config (by a program
/// that may write it) never runs for a checkout or a status; run
/// plainly, the same command does run it, so the test can fail.
#[tokio::test]
async fn filters_in_the_repository_config_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mark = root.join("ran");
    let git = |args: &[&str]| {
        crate::snapshot::tests::git(&root, args);
    };
    git(&["init", "-q", "repo"]);
    let repo_dir = root.join("repo");
    std::fs::write(repo_dir.join("a.txt"), "a\n").unwrap();
    git(&["-C", "repo", "add", "a.txt"]);
    git(&["-C", "repo", "commit", "-q", "-m", "base"]);
    std::fs::write(repo_dir.join(".git/info/attributes"), "* filter=evil\n").unwrap();
    let program = format!("sh -c 'touch {}; cat'", mark.display());
    for key in ["clean", "smudge"] {
        git(&[
            "-C",
            "repo",
            "config",
            &format!("filter.evil.{key}"),
            &program,
        ]);
    }
    // Same size, so status must read the file through the filter.
    std::fs::write(repo_dir.join("a.txt"), "b\n").unwrap();
    let repo = Repo::open(&repo_dir).unwrap();

    repo.run(&["status", "--porcelain"]).await.unwrap();
    let tree = root.join("wt");
    let tree = tree.to_string_lossy();
    repo.run(&["worktree", "add", "-q", "-b", "w", "--", &tree, "HEAD"])
        .await
        .unwrap();
    assert!(!mark.exists(), "a filter ran");

    let again = root.join("wt2");
    let again = again.to_string_lossy();
    git(&[
        "-C", "repo", "worktree", "add", "-q", "-b", "w2", "--", &again, "HEAD",
    ]);
    assert!(mark.exists(), "plain git should run the filter");
}

/// A program named by `gpg.program` with `push.gpgSign`, by a merge
/// driver, or by `core.alternateRefsCommand` never runs in the host's
/// push or merge; the same keys do run it for plain git.
#[cfg(unix)]
#[tokio::test]
async fn programs_the_config_names_never_run() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let git = |args: &[&str]| crate::snapshot::tests::git(&root, args);
    let mark = root.join("ran");
    let evil = root.join("evil.sh");
    std::fs::write(
        &evil,
        format!("#!/bin/sh\necho \"$0 $*\" >> {}\nexit 1\n", mark.display()),
    )
    .unwrap();
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    let evil = evil.to_string_lossy().to_string();
    git(&["init", "-q", "--bare", "remote.git"]);
    // The remote takes signed pushes, so a signing client signs.
    git(&[
        "-C",
        "remote.git",
        "config",
        "receive.certNonceSeed",
        "seed",
    ]);
    git(&["init", "-q", "repo"]);
    std::fs::write(root.join("repo/a.txt"), "a\n").unwrap();
    git(&["-C", "repo", "add", "a.txt"]);
    git(&["-C", "repo", "commit", "-q", "-m", "base"]);
    for (key, value) in [
        ("push.gpgSign", "true"),
        ("gpg.program", evil.as_str()),
        ("core.alternateRefsCommand", evil.as_str()),
        ("merge.evil.driver", evil.as_str()),
        ("pager.log", evil.as_str()),
    ] {
        git(&["-C", "repo", "config", key, value]);
    }
    std::fs::write(root.join("repo/.git/info/attributes"), "* merge=evil\n").unwrap();
    let repo = Repo::open(&root.join("repo")).unwrap();
    let remote = root.join("remote.git");
    let remote = remote.to_string_lossy();

    crate::push(&repo, &remote, &["HEAD:refs/heads/main"])
        .await
        .unwrap();
    // A merge that needs the driver: both sides change a.txt.
    git(&["-C", "repo", "checkout", "-q", "-b", "side"]);
    std::fs::write(root.join("repo/a.txt"), "side\n").unwrap();
    git(&["-C", "repo", "commit", "-q", "-am", "side"]);
    git(&["-C", "repo", "checkout", "-q", "-"]);
    std::fs::write(root.join("repo/a.txt"), "main\n").unwrap();
    git(&["-C", "repo", "commit", "-q", "-am", "main"]);
    let merge_side = [
        "-c",
        "user.name=u",
        "-c",
        "user.email=u@x",
        "merge",
        "--no-edit",
        "side",
    ];
    let merged = repo.run(&merge_side).await;
    assert!(merged.is_err(), "a conflict, by git's own merge");
    repo.run(&["merge", "--abort"]).await.unwrap();
    assert!(
        !mark.exists(),
        "{}",
        std::fs::read_to_string(&mark).unwrap_or_default()
    );

    // Plain git runs the signing program and the merge driver: the
    // keys above do something.
    let plain = |args: &[&str]| {
        std::process::Command::new("git")
            .args(["-C", "repo"])
            .args(args)
            .current_dir(&root)
            .output()
            .unwrap()
    };
    plain(&["push", "-q", "--force", &remote, "HEAD:refs/heads/other"]);
    let said = std::fs::read_to_string(&mark).unwrap_or_default();
    assert!(
        said.contains("evil.sh"),
        "plain git push should run gpg.program"
    );
    std::fs::remove_file(&mark).unwrap();
    plain(&merge_side);
    assert!(mark.exists(), "plain git merge should run the merge driver");
}

/// A repository whose objects come from elsewhere is refused.
#[tokio::test]
async fn alternates_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    crate::snapshot::tests::git(&root, &["init", "-q", "repo"]);
    std::fs::write(
        root.join("repo/.git/objects/info/alternates"),
        "/elsewhere/objects\n",
    )
    .unwrap();
    let repo = Repo::open(&root.join("repo")).unwrap();
    let e = repo.run(&["status"]).await.unwrap_err();
    assert!(e.to_string().contains("objects/info/alternates"), "{e}");
}
