//! An environment's commit built as data (hostgit::snapshot) against what
//! it replaced, `git add --all && git commit` on the worktree, in one run
//! on the same 10,000-file repository, alternating:
//!
//! ```sh
//! cargo bench -p hostgit --bench snapshot
//! SNAPSHOT_FILES=1000000 SNAPSHOT_ROUNDS=3 cargo bench -p hostgit --bench snapshot
//! ```

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hostgit::Repo;
use hostgit::snapshot::{Identity, commit_worktree};

/// How many files and rounds, unless `SNAPSHOT_FILES`/`SNAPSHOT_ROUNDS` say.
fn setting(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let files = setting("SNAPSHOT_FILES", 10_000);
    let rounds = setting("SNAPSHOT_ROUNDS", 15);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    for i in 0..files {
        let path = root.join(format!("src/m{}/f{i}.txt", i % 100));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("file {i}\n").repeat(20)).unwrap();
    }
    git(&root, &["init", "-q"]);
    git(&root, &["add", "--all"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    git(
        &root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "cofer/data",
            ".cofer/worktrees/data",
        ],
    );
    git(
        &root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "cofer/git",
            ".cofer/worktrees/git",
        ],
    );
    let repo = Repo::open(&root).unwrap();
    let path = root.join(".cofer/worktrees/data");
    let dir = cap_std::fs::Dir::open_ambient_dir(&path, cap_std::ambient_authority()).unwrap();
    let data = repo.linked(&path, dir).unwrap();
    let by_git = root.join(".cofer/worktrees/git");
    let who = Identity {
        name: "b".into(),
        email: "b@b".into(),
    };
    // The first commit of each fills its stat cache (the index).
    commit_worktree(&repo, &data, "warm", &who, 10 << 20).unwrap();
    std::thread::sleep(Duration::from_millis(1100));

    let (mut ours_same, mut git_same, mut ours_one, mut git_one) = (vec![], vec![], vec![], vec![]);
    for round in 0..rounds {
        let started = Instant::now();
        commit_worktree(&repo, &data, "nothing", &who, 10 << 20).unwrap();
        ours_same.push(started.elapsed());
        let started = Instant::now();
        git(&by_git, &["add", "--all"]);
        let _ = Command::new("git")
            .args([
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@b",
                "commit",
                "-q",
                "-m",
                "nothing",
            ])
            .current_dir(&by_git)
            .output();
        git_same.push(started.elapsed());

        let file = format!("src/m7/f{}.txt", 7 + 100 * round);
        std::fs::write(data.work_tree().join(&file), format!("changed {round}\n")).unwrap();
        std::fs::write(by_git.join(&file), format!("changed {round}\n")).unwrap();
        let started = Instant::now();
        let made = commit_worktree(&repo, &data, "one", &who, 10 << 20).unwrap();
        ours_one.push(started.elapsed());
        assert!(made.commit.is_some());
        let started = Instant::now();
        git(&by_git, &["add", "--all"]);
        git(&by_git, &["commit", "-q", "-m", "one"]);
        git_one.push(started.elapsed());
    }
    let row = |what: &str, ours: Vec<Duration>, theirs: Vec<Duration>| {
        let (ours, theirs) = (median(ours), median(theirs));
        println!(
            "{what:<34} built as data {:>7.1} ms   git add+commit {:>7.1} ms   ratio {:.2}",
            ours.as_secs_f64() * 1e3,
            theirs.as_secs_f64() * 1e3,
            ours.as_secs_f64() / theirs.as_secs_f64()
        );
    };
    println!("{files} files, medians of {rounds} rounds, alternating");
    row("nothing changed", ours_same, git_same);
    row("one file changed", ours_one, git_one);

    // 1,000 names of one 9 MB file (hard links), touched before each
    // commit: each name's stat changed, the inode is read once (issue 61).
    let big = data.work_tree().join("big.bin");
    std::fs::write(&big, vec![7u8; 9 << 20]).unwrap();
    std::fs::create_dir_all(data.work_tree().join("links")).unwrap();
    for i in 0..1000 {
        std::fs::hard_link(&big, data.work_tree().join(format!("links/l{i}"))).unwrap();
    }
    commit_worktree(&repo, &data, "links", &who, 10 << 20).unwrap();
    let mut touched = Vec::new();
    for round in 0..5 {
        std::fs::write(
            data.work_tree().join("links/l0"),
            vec![round as u8; 9 << 20],
        )
        .unwrap();
        let started = Instant::now();
        commit_worktree(&repo, &data, "touched", &who, 10 << 20).unwrap();
        touched.push(started.elapsed());
    }
    println!(
        "1,000 hard links to a 9 MB file, rewritten: {:.1} ms a commit (median of 5)",
        median(touched).as_secs_f64() * 1e3
    );
}
