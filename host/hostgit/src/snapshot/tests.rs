use super::*;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;
use std::process::Command;

/// `git` as a user runs it in tests (no global or system config).
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with one commit and a worktree on `cofer/t`.
pub(crate) fn setup(files: &[(&str, &str)]) -> (tempfile::TempDir, Repo, Worktree) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "-q"]);
    for (name, text) in files {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(&root, &["add", "--all", "--force"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    git(
        &root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "cofer/t",
            ".cofer/worktrees/t",
        ],
    );
    let repo = Repo::open(&root).unwrap();
    let path = root.join(".cofer/worktrees/t");
    let open = Dir::open_ambient_dir(&path, cap_std::ambient_authority()).unwrap();
    let tree = repo.linked(&path, open).unwrap();
    (dir, repo, tree)
}

pub(crate) fn who() -> Identity {
    Identity {
        name: "cofer".into(),
        email: "cofer@localhost".into(),
    }
}

/// Commit the worktree with a 1 MiB limit; the new commit, if any.
fn commit(repo: &Repo, tree: &Worktree) -> Option<String> {
    commit_worktree(repo, tree, "m", &who(), 1 << 20)
        .unwrap()
        .commit
}

fn files_of(repo: &Repo, commit: &str) -> Vec<String> {
    git(repo.work_tree(), &["ls-tree", "-r", "--name-only", commit])
        .lines()
        .map(str::to_string)
        .collect()
}

fn wt(tree: &Worktree, name: &str) -> PathBuf {
    tree.work_tree.join(name)
}

#[test]
fn a_commit_holds_what_git_add_all_would_and_nothing_of_gits_or_cofers() {
    let (_dir, repo, tree) = setup(&[
        ("README", "hi\n"),
        ("keep/x.log", "tracked\n"),
        (".gitignore", "*.log\n"),
    ]);
    std::fs::write(wt(&tree, "new.txt"), "new\n").unwrap();
    std::fs::write(wt(&tree, "ignored.log"), "no\n").unwrap();
    std::fs::write(wt(&tree, "keep/x.log"), "tracked, changed\n").unwrap();
    std::fs::write(wt(&tree, "run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(wt(&tree, "run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    symlink("/etc/passwd", wt(&tree, "link")).unwrap();
    // A nested repository whose config defines a filter its attributes apply.
    std::fs::create_dir_all(wt(&tree, "sub/.git")).unwrap();
    std::fs::write(
        wt(&tree, "sub/.git/config"),
        "[filter \"x\"]\n\tclean = touch /tmp/pwned\n",
    )
    .unwrap();
    std::fs::write(wt(&tree, "sub/.gitattributes"), "* filter=x\n").unwrap();
    std::fs::write(wt(&tree, "sub/file"), "in sub\n").unwrap();
    // Cofer's state and git's own names, in any case.
    for planted in [
        ".cofer/remote.git/hooks/post-receive",
        ".COFER/x",
        "a/.GIT/hooks/x",
        "a/b",
    ] {
        std::fs::create_dir_all(wt(&tree, planted).parent().unwrap()).unwrap();
        std::fs::write(wt(&tree, planted), "planted\n").unwrap();
    }
    std::fs::write(wt(&tree, ".gitignore"), "*.log\n!/.cofer/\n").unwrap();

    let done = commit_worktree(&repo, &tree, "work", &who(), 1 << 20).unwrap();
    let commit = done.commit.expect("a commit");
    assert_eq!(
        git(repo.work_tree(), &["rev-parse", "cofer/t"]).trim(),
        commit
    );
    let mut files = files_of(&repo, &commit);
    files.sort();
    assert_eq!(
        files,
        [
            ".gitignore",
            "README",
            "a/b",
            "keep/x.log",
            "link",
            "new.txt",
            "run.sh",
            "sub/.gitattributes",
            "sub/file"
        ]
    );
    let modes = git(repo.work_tree(), &["ls-tree", "-r", &commit]);
    assert!(
        modes.contains("100755 blob") && modes.contains("120000 blob"),
        "{modes}"
    );
    assert_eq!(
        git(repo.work_tree(), &["show", &format!("{commit}:link")]),
        "/etc/passwd"
    );
    assert_eq!(
        git(repo.work_tree(), &["show", &format!("{commit}:keep/x.log")]),
        "tracked, changed\n"
    );
    let parent = git(repo.work_tree(), &["rev-parse", &format!("{commit}^")]);
    assert_eq!(
        parent.trim(),
        git(repo.work_tree(), &["rev-parse", "main"]).trim()
    );
    // git agrees with the index the host wrote: nothing to commit.
    let status = git(&tree.work_tree, &["status", "--porcelain", "--ignored=no"]);
    assert!(
        !status.contains("new.txt") && !status.contains("README"),
        "{status}"
    );
    assert!(!Path::new("/tmp/pwned").exists());
}

#[test]
fn an_unchanged_tree_makes_no_commit_and_a_change_of_the_same_size_is_seen() {
    let (_dir, repo, tree) = setup(&[("a.txt", "one\n")]);
    assert_eq!(commit(&repo, &tree), None);
    std::fs::write(wt(&tree, "a.txt"), "two\n").unwrap();
    let first = commit(&repo, &tree).unwrap();
    assert_eq!(commit(&repo, &tree), None);
    std::fs::write(wt(&tree, "a.txt"), "six\n").unwrap();
    let second = commit(&repo, &tree).unwrap();
    assert_ne!(first, second);
    assert_eq!(
        git(repo.work_tree(), &["show", &format!("{second}:a.txt")]),
        "six\n"
    );
    std::fs::remove_file(wt(&tree, "a.txt")).unwrap();
    let third = commit(&repo, &tree).unwrap();
    assert!(files_of(&repo, &third).is_empty());
}

#[test]
fn a_file_over_the_limit_is_left_out_or_keeps_its_committed_version() {
    let (_dir, repo, tree) = setup(&[("big.bin", "small\n")]);
    std::fs::write(wt(&tree, "big.bin"), vec![b'x'; 100]).unwrap();
    std::fs::write(wt(&tree, "new.bin"), vec![b'y'; 100]).unwrap();
    std::fs::write(wt(&tree, "ok.txt"), "fine\n").unwrap();
    let done = commit_worktree(&repo, &tree, "m", &who(), 50).unwrap();
    let commit = done.commit.unwrap();
    let mut large: Vec<_> = done
        .too_large
        .first
        .iter()
        .map(|(p, _)| p.as_str())
        .collect();
    large.sort();
    assert_eq!(large, ["big.bin", "new.bin"]);
    assert_eq!(files_of(&repo, &commit), ["big.bin", "ok.txt"]);
    assert_eq!(
        git(repo.work_tree(), &["show", &format!("{commit}:big.bin")]),
        "small\n"
    );
}

#[test]
fn a_symlinked_directory_is_committed_as_a_link_and_not_followed() {
    let (_dir, repo, tree) = setup(&[("a", "a\n")]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "host secret\n").unwrap();
    symlink(outside.path(), wt(&tree, "out")).unwrap();
    let commit = commit(&repo, &tree).unwrap();
    assert_eq!(files_of(&repo, &commit), ["a", "out"]);
    let all = git(repo.work_tree(), &["log", "--all", "-p"]);
    assert!(!all.contains("host secret"), "{all}");
}

/// Nest `levels` folders named `d` in `top`, each with a file `f`, one
/// handle at a time (as a container's `cd` would: the whole path is
/// past PATH_MAX).
pub(crate) fn nest(top: &Dir, levels: usize) {
    let mut dir = top.try_clone().unwrap();
    for _ in 0..levels {
        dir.create_dir("d").unwrap();
        dir.write("d/f", "x").unwrap();
        dir = dir.open_dir("d").unwrap();
    }
}

/// Run `f` on a thread with the stack of tokio's blocking pool, where
/// the host commits.
pub(crate) fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn folders_nested_past_the_limit_are_left_out_not_a_crash() {
    let (_dir, repo, tree) = setup(&[("a", "1")]);
    nest(&tree.tree, 5_000);
    let tree = on_small_stack(move || {
        let snapshot = commit_worktree(&repo, &tree, "m", &who(), 1 << 20).unwrap();
        let commit = snapshot.commit.expect("the levels within the limit");
        let deep = snapshot.too_deep;
        assert_eq!(deep.count, 1);
        assert_eq!(deep.first, [vec!["d"; MAX_DEPTH + 1].join("/")]);
        let files = git(
            repo.work_tree(),
            &["ls-tree", "-r", "-t", "--name-only", &commit],
        );
        let deepest = files.lines().map(|l| l.split('/').count()).max();
        // d/…/d/f, the last d at the limit.
        assert_eq!(deepest, Some(MAX_DEPTH + 1));
        tree
    });
    crate::remove_worktree(&tree, true).unwrap();
    assert!(!tree.work_tree.exists());
}

#[test]
fn a_fifo_put_where_a_file_was_is_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let open = Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(open_nofollow(&open, "fifo".as_ref()).map(|_| ()));
    });
    let opened = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the open waited for a writer");
    assert_eq!(opened.unwrap_err().kind(), ErrorKind::InvalidInput);
}

#[test]
fn gitignore_files_past_the_line_budget_of_their_path_are_not_applied() {
    // `lines` lines, the last of which ignores `name`.
    let list = |lines: usize, name: &str| format!("{}{name}\n", "#\n".repeat(lines - 2));
    let (_dir, repo, tree) = setup(&[("base", "1")]);
    let files: [(&str, String); 9] = [
        (".gitignore", list(15_000, "top-ignored")),
        ("top-ignored", "x".into()),
        ("a/.gitignore", list(4_000, "gone")),
        ("a/gone", "x".into()),
        // b's list fits only once a's lines are given back.
        ("b/.gitignore", list(4_000, "gone")),
        ("b/gone", "x".into()),
        ("c/.gitignore", list(6_000, "kept")),
        ("c/kept", "x".into()),
        ("c/also", "x".into()),
    ];
    for (name, text) in &files {
        let path = wt(&tree, name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let snapshot = commit_worktree(&repo, &tree, "m", &who(), 1 << 20).unwrap();
    assert_eq!(snapshot.unapplied_ignores.first, ["c/.gitignore"]);
    assert_eq!(snapshot.unapplied_ignores.count, 1);
    let committed = files_of(&repo, &snapshot.commit.unwrap());
    for name in ["top-ignored", "a/gone", "b/gone"] {
        assert!(
            !committed.contains(&name.to_string()),
            "{name}: {committed:?}"
        );
    }
    for name in ["c/kept", "c/also", "c/.gitignore", "a/.gitignore"] {
        assert!(
            committed.contains(&name.to_string()),
            "{name}: {committed:?}"
        );
    }
}

/// Issue 70, item 9: a second commit over an unchanged tree costs a walk:
/// the index (the stat cache) is not written again, nothing is committed;
/// a change is still seen and the index written.
#[test]
fn an_unchanged_tree_writes_no_index_again() {
    let (_dir, repo, tree) = setup(&[("a.txt", "a\n"), ("src/b.txt", "b\n")]);
    let index = repo.git_dir().join("worktrees/t/index");
    let first = commit_worktree(&repo, &tree, "m", &who(), 1 << 20).unwrap();
    assert!(first.commit.is_none(), "the worktree is the base");
    // Past the racy second: the entries' stats can be trusted.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    commit_worktree(&repo, &tree, "m", &who(), 1 << 20).unwrap();
    let written = std::fs::metadata(&index).unwrap().modified().unwrap();
    let again = commit_worktree(&repo, &tree, "m", &who(), 1 << 20).unwrap();
    assert!(again.commit.is_none());
    assert_eq!(
        std::fs::metadata(&index).unwrap().modified().unwrap(),
        written
    );
    std::fs::write(tree.work_tree().join("a.txt"), "changed\n").unwrap();
    let changed = commit_worktree(&repo, &tree, "m", &who(), 1 << 20).unwrap();
    assert!(changed.commit.is_some());
    assert_ne!(
        std::fs::metadata(&index).unwrap().modified().unwrap(),
        written
    );
}

/// The commit and the branch's move are what git itself would write:
/// objects `git fsck` accepts, a reflog line as `git commit` words it, and
/// a second commit on top of the first.
#[test]
fn commits_and_reflog_lines_are_as_git_writes_them() {
    let (_dir, repo, tree) = setup(&[("a.txt", "a\n")]);
    std::fs::write(wt(&tree, "a.txt"), "one\n").unwrap();
    let first = commit_worktree(&repo, &tree, "first change\n\nbody", &who(), 1 << 20)
        .unwrap()
        .commit
        .unwrap();
    std::fs::write(wt(&tree, "b.txt"), "two\n").unwrap();
    let second = commit_worktree(&repo, &tree, "second", &who(), 1 << 20)
        .unwrap()
        .commit
        .unwrap();
    git(repo.work_tree(), &["fsck", "--strict", "--no-progress"]);
    assert_eq!(
        git(repo.work_tree(), &["rev-parse", "cofer/t^"]).trim(),
        first
    );
    let log = git(
        repo.work_tree(),
        &["reflog", "show", "--format=%H %gs", "cofer/t"],
    );
    let lines: Vec<&str> = log.lines().take(2).collect();
    assert_eq!(
        lines,
        [
            format!("{second} commit: second"),
            format!("{first} commit: first change")
        ],
        "{log}"
    );
}

/// A SHA-256 repository is refused, not filled with SHA-1 objects.
#[test]
fn a_repository_of_another_object_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "-q", "--object-format=sha256"]);
    std::fs::write(root.join("a"), "a\n").unwrap();
    git(&root, &["add", "a"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    git(&root, &["worktree", "add", "-q", "-b", "cofer/t", "wt"]);
    let repo = Repo::open(&root).unwrap();
    let path = root.join("wt");
    let open = Dir::open_ambient_dir(&path, cap_std::ambient_authority()).unwrap();
    let tree = repo.linked(&path, open).unwrap();
    std::fs::write(path.join("b"), "b\n").unwrap();
    let refused = commit_worktree(&repo, &tree, "m", &who(), 1 << 20).unwrap_err();
    assert!(refused.to_string().contains("SHA-1"), "{refused}");
    assert_eq!(
        git(&root, &["rev-parse", "cofer/t"]).trim(),
        git(&root, &["rev-parse", "main"]).trim()
    );
}
