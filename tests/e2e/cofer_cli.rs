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
