//! Issue 70 (security round five), items 3, 4 and 7, and issue 72 item 21:
//! a Cofer secret is masked from the first answer of any host process, in
//! the forms programs write it (JSON, shell, URL, base64 at any offset,
//! line by line, word by word); a `file://` reference does not follow a
//! link a plugin or container planted; an unresolvable reference is the
//! person's to fix, not the agent's.

use crate::cofer::{Fixture, error_of};
use crate::harness::*;

/// A value with what JSON and shells escape.
const QUOTED: &str = "pa\"ss\\w0rd-Zq81";
/// A multi-line value, as a PEM key is.
const PEM: &str = "-----BEGIN TEST KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9q3s7\nZ2VuZXJhdGVkLWZvci10ZXN0cw8\n-----END TEST KEY-----";
/// A value with a space, used unquoted by a careless command.
const SPACED: &str = "/x/p@ss w/rd+=%ü";
/// A plain token, base64-encoded after a prefix that shifts its offset.
const PLAIN: &str = "plain-t0ken-77Qx";

/// Everything that must not appear in what the agent or a log sees: each
/// value, each line and word, each escaped form tested here.
fn telling() -> Vec<String> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    vec![
        QUOTED.to_string(),
        r#"pa\"ss\\w0rd-Zq81"#.to_string(),
        "MIIBOgIBAAJBAKj34GkxFhD9q3s7".to_string(),
        "Z2VuZXJhdGVkLWZvci10ZXN0cw8".to_string(),
        "/x/p@ss".to_string(),
        "w/rd+=%ü".to_string(),
        PLAIN.to_string(),
        // The middle of `ab<PLAIN>`'s base64: only the value's own bits.
        b64.encode(format!("ab{PLAIN}"))[3..20].to_string(),
    ]
}

/// `cofer config secret ARGS` in the fixture's repository, with the test's
/// references file.
fn secret(f: &Fixture, secrets: &std::path::Path, args: &[&str]) {
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/cofer");
    let out = std::process::Command::new(bin)
        .args(["config", "secret"])
        .args(args)
        .current_dir(&f.repo)
        .env("COFER_SECRETS", secrets)
        .output()
        .unwrap();
    succeeded(&out);
}

fn assert_masked(text: &str, what: &str) {
    for form in telling() {
        assert!(
            !text.contains(&form),
            "{what}: a secret's form got out: {form} in {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_are_masked_in_a_fresh_host_in_every_form_programs_write() {
    let outside = tempfile::tempdir().unwrap();
    let secrets = outside.path().join("secrets.toml");
    let pem = outside.path().join("key.pem");
    std::fs::write(&pem, format!("{PEM}\n")).unwrap();
    let secrets_var = secrets.to_string_lossy().into_owned();
    let Some(f) = Fixture::with_podman(
        &[
            ("COFER_SECRETS", &secrets_var),
            ("COFER_TEST_QUOTED", QUOTED),
            ("COFER_TEST_SPACED", SPACED),
            ("COFER_TEST_PLAIN", PLAIN),
        ],
        true,
    )
    .await
    else {
        return;
    };
    let set = |name: &str, reference: &str| secret(&f, &secrets, &["set", name, reference]);
    set("QUOTED", "env://COFER_TEST_QUOTED");
    set("SPACED", "env://COFER_TEST_SPACED");
    set("PLAIN", "env://COFER_TEST_PLAIN");
    set("PEM", &format!("file://{}", pem.display()));

    // The first host: a command writes each value as programs do.
    let first = f.env.start().await;
    f.create(&first, "forms").await;
    let wrote = f
        .run_ok(
            &first,
            "forms",
            "printf '{\"pw\": \"%s\"}\\n' \"$(printf %s \"$QUOTED\" | sed 's/\\\\/\\\\\\\\/g; s/\"/\\\\\"/g')\" > config.json; \
             printf '%s\\n' \"$PEM\" > key.pem; \
             printf 'ab%s' \"$PLAIN\" | base64 > token.b64; \
             printf '%s\\n' \"$PLAIN\" > plain.txt; \
             cat $SPACED",
        )
        .await
        .to_string();
    // The words of a value split by the shell, in this process's answer.
    assert!(wrote.contains("***SPACED"), "{wrote}");
    assert_masked(&wrote, "the writing command's answer");
    first.service.cancel().await.unwrap();

    // A second host process: it has resolved nothing yet when the agent
    // reads what the first one's command wrote.
    let second = f.env.start().await;
    let mut seen = Vec::new();
    for file in ["config.json", "key.pem", "token.b64", "plain.txt"] {
        let mut read = f.scoped("forms");
        read["target_file"] = serde_json::json!(file);
        read["should_read_entire_file"] = serde_json::json!(true);
        let r = second.call("environment_file_read", read).await;
        assert!(!is_error(&r), "{r:?}");
        seen.push(format!("{r:?}"));
    }
    assert!(seen[0].contains("***QUOTED"), "{}", seen[0]);
    assert!(seen[1].contains("***PEM"), "{}", seen[1]);
    assert!(seen[2].contains("***PLAIN"), "{}", seen[2]);
    assert!(seen[3].contains("***PLAIN"), "{}", seen[3]);
    seen.push(format!(
        "{:?}",
        second.call("environment_diff", f.scoped("forms")).await
    ));
    let mut log = f.scoped("forms");
    log["patch"] = serde_json::json!(true);
    seen.push(format!("{:?}", second.call("environment_log", log).await));
    assert!(seen[4].contains("***PEM"), "{}", seen[4]);
    seen.push(std::fs::read_to_string(f.env.stderr_log()).unwrap_or_default());
    for text in &seen {
        assert_masked(text, "the second host");
    }
}

/// Item 4: a `file://` reference at a link a plugin or container could
/// plant (in the workspace) is not followed to the file it names; a
/// reference that cannot be resolved is a precondition the person fixes
/// (issue 72, item 6), not a bad argument.
#[tokio::test(flavor = "multi_thread")]
async fn a_planted_link_is_no_secret_file_and_an_unresolved_one_is_the_persons() {
    let outside = tempfile::tempdir().unwrap();
    let secrets = outside.path().join("secrets.toml");
    let private = outside.path().join("private-key");
    std::fs::write(&private, "never-to-reach-the-container-41\n").unwrap();
    let secrets_var = secrets.to_string_lossy().into_owned();
    let Some(f) = Fixture::with_podman(&[("COFER_SECRETS", &secrets_var)], true).await else {
        return;
    };
    // What a plugin whose reads are refused outside its roots could do.
    let link = f.repo.join("innocent.txt");
    std::os::unix::fs::symlink(&private, &link).unwrap();
    let set = |name: &str, reference: &str| secret(&f, &secrets, &["set", name, reference]);
    set("LINKED", &format!("file://{}", link.display()));
    let client = f.env.start().await;
    f.create(&client, "link").await;
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("link", "echo \"got:$LINKED\""),
        )
        .await;
    let said = format!("{r:?}");
    assert!(!said.contains("never-to-reach"), "{said}");
    let error = error_of(&r);
    assert_eq!(error["code"], "secret_unresolved", "{error}");
    assert!(
        error
            .to_string()
            .contains("plugins or containers may write"),
        "{error}"
    );

    // A variable the host lacks: the person's to set, said as such.
    secret(&f, &secrets, &["unset", "LINKED"]);
    set("ABSENT", "env://COFER_TEST_NEVER_SET");
    let r = client
        .call("environment_run_cmd", f.run_args("link", "true"))
        .await;
    let error = error_of(&r);
    assert_eq!(error["code"], "secret_unresolved", "{error}");
    let text = error.to_string();
    assert!(
        text.contains("where the host starts") && text.contains("cofer config secret unset ABSENT"),
        "{text}"
    );
}
