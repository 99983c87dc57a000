use super::*;

#[test]
fn long_output_is_cut_on_a_character_boundary_and_says_so() {
    assert_eq!(cut("short".into(), 10), "short");
    let cut_text = cut("ab\u{e9}cd".into(), 3); // é is 2 bytes: 3 falls inside it
    assert_eq!(cut_text, "ab\n[cut: 4 more bytes]\n");
}

#[test]
fn a_deep_path_in_a_warning_keeps_its_first_names_and_its_last() {
    assert_eq!(shortened("a/b/.gitignore"), "a/b/.gitignore");
    let deep = ["d"; 257].join("/") + "/.gitignore";
    assert_eq!(shortened(&deep), "d/d/d/…/.gitignore (258 levels)");
}

#[cfg(unix)]
fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[cfg(unix)]
fn repo_with_commit(dir: &Path, subject: &str) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", subject]);
}

/// A plugin that swaps its checked repository for a link to another
/// one (outside its roots) changes nothing: git and the host work on
/// the folder opened at the check (issue 34, class 3).
#[tokio::test]
#[cfg(unix)] // Unix links
async fn a_repository_swapped_for_a_link_after_the_check_is_not_what_git_works_on() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (root, outside) = (base.join("root"), base.join("outside"));
    repo_with_commit(&root.join("a"), "inside");
    repo_with_commit(&outside, "outside");
    let g = crate::policy::test_grants(&root, &["git"]);

    let repo = repository(&g, &root.join("a").to_string_lossy()).unwrap();
    std::fs::rename(root.join("a"), root.join("moved")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("a")).unwrap();

    let subjects = repo.run(&["log", "--format=%s"]).await.unwrap();
    assert_eq!(subjects.trim(), "inside");
    git::exclude(&repo, "/x/").await.unwrap();
    assert!(
        std::fs::read_to_string(root.join("moved/.git/info/exclude"))
            .unwrap()
            .contains("/x/")
    );
    let outside_exclude = std::fs::read_to_string(outside.join(".git/info/exclude"));
    assert!(!outside_exclude.unwrap_or_default().contains("/x/"));

    // Asked again now, the link is refused.
    let e = repository(&g, &root.join("a").to_string_lossy()).unwrap_err();
    assert!(matches!(e, GitError::Denied(_)), "{e:?}");
}

/// A remote swapped for a link after the check gets no push: the push
/// goes to the folder that was checked.
#[tokio::test]
#[cfg(unix)] // Unix links
async fn a_push_goes_to_the_remote_that_was_checked() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (root, outside) = (base.join("root"), base.join("outside.git"));
    repo_with_commit(&root.join("a"), "inside");
    for bare in [root.join("remote.git"), outside.clone()] {
        git(&base, &["init", "-q", "--bare", &bare.to_string_lossy()]);
    }
    git(&root.join("a"), &["remote", "add", "r", "../remote.git"]);
    let g = crate::policy::test_grants(&root, &["git"]);
    let repo = repository(&g, &root.join("a").to_string_lossy()).unwrap();
    let to = local_remote(&g, &repo, "r").await.unwrap();
    std::fs::rename(root.join("remote.git"), root.join("moved.git")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("remote.git")).unwrap();

    let url = hostgit::proc_path(&to);
    git::push(&repo, &url.to_string_lossy(), &["HEAD:refs/heads/x"])
        .await
        .unwrap();
    assert!(root.join("moved.git/refs/heads/x").exists());
    assert!(!outside.join("refs/heads/x").exists());
}

#[test]
fn branch_names_that_look_like_options_are_refused() {
    assert!(check_ref_name("cofer/bold-otter").is_ok());
    for bad in ["-D", "a..b", "a b", "x:y", ""] {
        assert!(check_ref_name(bad).is_err(), "{bad}");
    }
}
