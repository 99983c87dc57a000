//! container-use's file tools (`environment_file_*`) on real environments:
//! what they write is what the container sees and is committed under the
//! caller's explanation; no path, `..` or planted symlink reaches outside
//! the environment's /workdir. Also the history (`environment_log`,
//! `environment_diff`) and `environment_update_metadata`.

use serde_json::{Value, json};

use crate::cofer::{Fixture, error_of, files_by_message};
use crate::harness::*;

/// `args` for a file tool on environment `id`, with its explanation.
fn on(f: &Fixture, id: &str, explanation: &str, args: Value) -> Value {
    let mut all = f.scoped(id);
    all["explanation"] = json!(explanation);
    for (k, v) in args.as_object().unwrap() {
        all[k] = v.clone();
    }
    all
}

#[tokio::test(flavor = "multi_thread")]
async fn file_tools_read_write_edit_list_delete_and_commit() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "files").await;

    // Write into a directory that does not exist yet, by absolute path.
    let app = "def add(a, b):\n    return a + b\n\nx = 1\ny = 2\nx = 1\n";
    let r = client
        .call(
            "environment_file_write",
            on(
                &f,
                "files",
                "add app.py",
                json!({"target_file": "/workdir/src/app.py", "contents": app}),
            ),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert!(
        text(&r).contains("written successfully and committed to cofer/files"),
        "{}",
        text(&r)
    );
    assert_eq!(
        std::fs::read_to_string(f.worktree("files").join("src/app.py")).unwrap(),
        app
    );

    // The container sees it.
    let r = client
        .call("environment_run_cmd", f.run_args("files", "cat src/app.py"))
        .await;
    assert!(
        structured(&r)["stdout"]
            .as_str()
            .unwrap()
            .contains("return a + b\n\nx = 1"),
        "{r:?}"
    );

    // Read it whole and by lines (1-indexed, inclusive).
    let read = |args: Value| client.call("environment_file_read", on(&f, "files", "look", args));
    let r = read(json!({"target_file": "src/app.py", "should_read_entire_file": true})).await;
    assert_eq!(text(&r), app);
    let r = read(json!({"target_file": "src/app.py", "start_line_one_indexed_inclusive": 2, "end_line_one_indexed_inclusive": 4})).await;
    assert_eq!(text(&r), "    return a + b\n\nx = 1");
    let e = error_of(&read(json!({"target_file": "src/app.py", "start_line_one_indexed_inclusive": 40, "end_line_one_indexed_inclusive": 41})).await);
    assert_eq!(e["code"], "invalid_request", "{e}");
    let e = error_of(&read(json!({"target_file": "src/nope.py"})).await);
    assert_eq!(e["code"], "not_found", "{e}");

    // A file a command wrote is there to read; listing marks directories.
    client
        .call(
            "environment_run_cmd",
            f.run_args("files", "mkdir -p docs && echo made > docs/by-cmd.txt"),
        )
        .await;
    let r = read(json!({"target_file": "docs/by-cmd.txt"})).await;
    assert_eq!(text(&r), "made\n");
    let r = client
        .call(
            "environment_file_list",
            on(&f, "files", "look", json!({"path": "/workdir"})),
        )
        .await;
    let listing = text(&r);
    let names: Vec<&str> = listing.lines().collect();
    for want in ["README.md", "docs/", "src/"] {
        assert!(names.contains(&want), "{want} not in {names:?}");
    }
    // The .git file is Cofer's (the test plant's .gitattributes may be there).
    assert!(
        !names.iter().any(|n| *n == ".git" || *n == ".git/"),
        "{names:?}"
    );

    // Edit: one match is replaced; two ask which, by ID.
    let edit = |search: &str, replace: &str, which: Option<&str>, why: &str| {
        let mut args =
            json!({"target_file": "src/app.py", "search_text": search, "replace_text": replace});
        if let Some(w) = which {
            args["which_match"] = json!(w);
        }
        client.call("environment_file_edit", on(&f, "files", why, args))
    };
    let r = edit("a + b", "b + a", None, "swap operands").await;
    assert!(text(&r).contains("edited successfully"), "{r:?}");
    let e = error_of(&edit("x = 1", "x = 3", None, "set x").await);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("occurs 2 times") && message.contains("> x = 1"),
        "{message}"
    );
    let second = message.split("(ID: ").nth(2).unwrap()[..8].to_string();
    let r = edit("x = 1", "x = 3", Some(&second), "set the last x").await;
    assert!(!is_error(&r), "{r:?}");
    let now = std::fs::read_to_string(f.worktree("files").join("src/app.py")).unwrap();
    assert_eq!(
        now,
        "def add(a, b):\n    return b + a\n\nx = 1\ny = 2\nx = 3\n"
    );

    // Delete.
    let r = client
        .call(
            "environment_file_delete",
            on(
                &f,
                "files",
                "drop the doc",
                json!({"target_file": "docs/by-cmd.txt"}),
            ),
        )
        .await;
    assert!(text(&r).contains("deleted successfully"), "{r:?}");
    assert!(!f.worktree("files").join("docs/by-cmd.txt").exists());

    // Each change is one commit under its explanation, holding its file.
    let commits = files_by_message(&f.repo, "cofer/files");
    for (subject, file) in [
        ("add app.py", "src/app.py"),
        ("swap operands", "src/app.py"),
        ("set the last x", "src/app.py"),
        ("drop the doc", "docs/by-cmd.txt"),
    ] {
        let (_, files) = commits
            .iter()
            .find(|(s, _)| s == subject)
            .unwrap_or_else(|| panic!("no commit `{subject}`: {commits:?}"));
        assert_eq!(files, &[file.to_string()], "{subject}: {commits:?}");
    }

    // The history, as `cofer log` / `cofer diff` show it.
    let r = client.call("environment_log", f.scoped("files")).await;
    let log = text(&r);
    assert!(
        log.contains("add app.py") && log.contains("swap operands"),
        "{log}"
    );
    assert!(
        !log.contains("first"),
        "the repository's own history is not the environment's: {log}"
    );
    assert!(!log.contains("+x = 3"), "{log}");
    let mut with_patch = f.scoped("files");
    with_patch["patch"] = json!(true);
    let log = text(&client.call("environment_log", with_patch).await);
    assert!(log.contains("+x = 3"), "{log}");
    let diff = text(&client.call("environment_diff", f.scoped("files")).await);
    assert!(
        diff.contains("+++ b/src/app.py") && diff.contains("+    return b + a"),
        "{diff}"
    );
    assert!(
        !diff.contains("by-cmd.txt"),
        "made and deleted: not in the net diff: {diff}"
    );

    // The title can be changed.
    let mut retitle = f.scoped("files");
    retitle["title"] = json!("adder work");
    let r = client.call("environment_update_metadata", retitle).await;
    assert!(text(&r).contains("\"title\":\"adder work\""), "{r:?}");
    let listed = text(
        &client
            .call(
                "environment_list",
                json!({"environment_source": f.source()}),
            )
            .await,
    );
    assert!(listed.contains("adder work"), "{listed}");

    // A long file, read without a range, comes as its first lines within
    // what clients show whole, saying how to read on; asked for whole, it
    // is; its diff is cut likewise, saying how to get more (issue 39).
    let long: String = (1..=5000)
        .map(|n| format!("line {n} of a long file\n"))
        .collect();
    let r = client
        .call(
            "environment_file_write",
            on(
                &f,
                "files",
                "add a long file",
                json!({"target_file": "long.txt", "contents": long}),
            ),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let read = |args: Value| {
        let client = &client;
        let args = on(&f, "files", "read", args);
        async move { text(&client.call("environment_file_read", args).await) }
    };
    let first = read(json!({"target_file": "long.txt"})).await;
    assert!(first.len() <= 20_000, "{} bytes", first.len());
    assert!(first.starts_with("line 1 of"), "{first}");
    assert!(first.contains("5000 lines") && first.contains("start_line_one_indexed_inclusive="));
    let whole = read(json!({"target_file": "long.txt", "should_read_entire_file": true})).await;
    assert_eq!(whole, long);
    let diff = text(&client.call("environment_diff", f.scoped("files")).await);
    assert!(diff.len() <= 20_000, "{} bytes", diff.len());
    assert!(
        diff.contains("more bytes]") && diff.contains("max_bytes"),
        "{diff}"
    );
    let mut more = f.scoped("files");
    more["max_bytes"] = json!(262_144);
    let diff = text(&client.call("environment_diff", more).await);
    assert!(diff.contains("+line 5000 of a long file"), "{}", diff.len());

    // A large directory is listed by its first names, saying how many.
    let many = f.run_args(
        "files",
        "mkdir many && cd many && for i in $(seq 2000); do : > file-with-a-longer-name-$i.txt; done",
    );
    let r = client.call("environment_run_cmd", many).await;
    assert!(!is_error(&r), "{r:?}");
    let listed = text(
        &client
            .call(
                "environment_file_list",
                on(&f, "files", "list", json!({"path": "many"})),
            )
            .await,
    );
    assert!(listed.len() <= 20_000, "{} bytes", listed.len());
    assert!(listed.contains("2000 entries"), "{listed:.300}");

    // A missing environment is not_found.
    let e = error_of(
        &client
            .call(
                "environment_file_read",
                on(&f, "ghost", "look", json!({"target_file": "a"})),
            )
            .await,
    );
    assert_eq!(e["code"], "not_found", "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn file_tools_stay_inside_the_workdir() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "jail").await;
    // Symlinks a command plants: to the host's /etc (absolute) and up to
    // the repository (relative: from the worktree on the host, three levels
    // up is the source repository and its .git).
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args(
                "jail",
                "ln -s /etc etc-link && ln -s ../../.. up && ln -s README.md inside && mkfifo pipe",
            ),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");

    let call = |tool: &'static str, args: Value| client.call(tool, on(&f, "jail", "try", args));
    for (tool, args) in [
        (
            "environment_file_read",
            json!({"target_file": "../../../.git/config"}),
        ),
        (
            "environment_file_read",
            json!({"target_file": "/etc/passwd"}),
        ),
        ("environment_file_read", json!({"target_file": ".git"})),
        (
            "environment_file_write",
            json!({"target_file": "/workdir/.git", "contents": "gitdir: /tmp"}),
        ),
        ("environment_file_list", json!({"path": ".."})),
    ] {
        let e = error_of(&call(tool, args.clone()).await);
        assert_eq!(e["code"], "invalid_request", "{tool} {args}: {e}");
    }
    // A named pipe would hold the open until its other end came.
    for (tool, args) in [
        ("environment_file_read", json!({"target_file": "pipe"})),
        (
            "environment_file_write",
            json!({"target_file": "pipe", "contents": "x"}),
        ),
    ] {
        let e = error_of(&call(tool, args.clone()).await);
        assert_eq!(e["code"], "invalid_request", "{tool} {args}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains("named pipe"),
            "{tool} {args}: {e}"
        );
    }
    for (tool, args) in [
        (
            "environment_file_read",
            json!({"target_file": "etc-link/passwd"}),
        ),
        (
            "environment_file_read",
            json!({"target_file": "up/.git/config"}),
        ),
        (
            "environment_file_write",
            json!({"target_file": "up/pwned.txt", "contents": "x"}),
        ),
        (
            "environment_file_write",
            json!({"target_file": "etc-link/pwned", "contents": "x"}),
        ),
        (
            "environment_file_delete",
            json!({"target_file": "up/README.md"}),
        ),
        ("environment_file_list", json!({"path": "up"})),
    ] {
        let e = error_of(&call(tool, args.clone()).await);
        assert_eq!(e["code"], "invalid_request", "{tool} {args}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains("leads outside"),
            "{tool} {args}: {e}"
        );
    }
    assert!(!f.repo.join("pwned.txt").exists());
    assert!(f.repo.join("README.md").exists());
    // A symlink that stays inside is followed.
    let r = call("environment_file_read", json!({"target_file": "inside"})).await;
    assert_eq!(text(&r), "hello\n", "{r:?}");
}
