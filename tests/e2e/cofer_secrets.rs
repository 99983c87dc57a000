//! Cofer's secrets (issue 55): references stored by the person, resolved by
//! the host into each command's environment, and never seen by the agent:
//! not in an answer, a log line, a commit, a record or a checkpoint image.
//! `op` and `vault` are stand-ins that follow their CLIs' contracts.

use std::os::unix::fs::PermissionsExt;

use crate::cofer::{Fixture, error_of};
use crate::harness::*;

const DB_PASSWORD: &str = "s3cret-pa55word-from-env";
const TOKEN: &str = "t0ken-from-a-file-8812";
const OP_VALUE: &str = "0p-value-from-1password";
const VAULT_VALUE: &str = "vau1t-value-from-hashicorp";

/// A stand-in CLI: prints `value` when called with exactly `args`.
fn stand_in(dir: &std::path::Path, name: &str, args: &str, value: &str) {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nif [ \"$*\" = \"{args}\" ]; then printf '%s' '{value}'; exit 0; fi\necho \"{name}: unexpected arguments: $*\" >&2\nexit 1\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_reaches_the_command_and_nothing_the_agent_reads() {
    let outside = tempfile::tempdir().unwrap();
    let secrets = outside.path().join("secrets.toml");
    let token = outside.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let bin = outside.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    stand_in(
        &bin,
        "op",
        "read --no-newline op://dev/db/password",
        OP_VALUE,
    );
    stand_in(&bin, "vault", "kv get -field=key secret/app", VAULT_VALUE);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let secrets_var = secrets.to_string_lossy().into_owned();
    let Some(f) = Fixture::with_podman(
        &[
            ("COFER_SECRETS", &secrets_var),
            ("COFER_TEST_DB_PW", DB_PASSWORD),
            ("PATH", &path),
        ],
        true,
    )
    .await
    else {
        return;
    };
    let cofer = |args: &[&str]| {
        let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/cofer");
        let out = std::process::Command::new(bin)
            .args(args)
            .current_dir(&f.repo)
            .env("COFER_SECRETS", &secrets)
            .output()
            .unwrap();
        succeeded(&out)
    };
    cofer(&[
        "config",
        "secret",
        "set",
        "DB_PASSWORD",
        "env://COFER_TEST_DB_PW",
    ]);
    cofer(&[
        "config",
        "secret",
        "set",
        "TOKEN",
        &format!("file://{}", token.display()),
    ]);
    cofer(&["config", "secret", "set", "OP_KEY", "op://dev/db/password"]);
    cofer(&[
        "config",
        "secret",
        "set",
        "VAULT_KEY",
        "vault://secret/app#key",
    ]);
    let listed = cofer(&["config", "secret", "list"]);
    assert!(
        listed.contains("DB_PASSWORD = env://COFER_TEST_DB_PW"),
        "{listed}"
    );
    let stored = std::fs::read_to_string(&secrets).unwrap();
    let mode = std::fs::metadata(&secrets).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the secrets file is readable by others");

    let client = f.env.start().await;
    f.create(&client, "sec").await;
    // The command compares digests: the agent never writes a value, not
    // even into a command (which becomes a commit message).
    let digest = |value: &str| {
        use sha2::Digest;
        sha2::Sha256::digest(value.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let same = |var: &str, value: &str| {
        format!(
            "test \"$(printf %s \"${var}\" | sha256sum | cut -c1-64)\" = {}",
            digest(value)
        )
    };
    let check = format!(
        "{} && {} && {} && {} && echo all-four-arrived; \
         echo \"plain: $DB_PASSWORD $TOKEN $OP_KEY $VAULT_KEY\"; printf %s \"$DB_PASSWORD\" | base64; \
         echo \"$TOKEN\" >&2; printf %s \"$OP_KEY\" > /tmp/written-by-command",
        same("DB_PASSWORD", DB_PASSWORD),
        same("TOKEN", TOKEN),
        same("OP_KEY", OP_VALUE),
        same("VAULT_KEY", VAULT_VALUE)
    );
    let ran = f.run_ok(&client, "sec", &check).await;
    let said = ran.to_string();
    assert!(said.contains("all-four-arrived"), "{said}");
    assert!(
        said.contains("***DB_PASSWORD") && said.contains("***TOKEN"),
        "{said}"
    );
    let read = f
        .run_ok(&client, "sec", "cat /tmp/written-by-command")
        .await;
    assert!(read.to_string().contains("***OP_KEY"), "{read}");
    let env_seen = f.run_ok(&client, "sec", "env").await;

    // Everything an agent can read, and everything kept.
    let mut seen = vec![said, read.to_string(), env_seen.to_string()];
    for tool in [
        "environment_open",
        "environment_log",
        "environment_diff",
        "environment_list",
    ] {
        seen.push(format!("{:?}", client.call(tool, f.scoped("sec")).await));
    }
    let checkpoint = client
        .call(
            "environment_checkpoint",
            serde_json::json!({"environment_source": f.source(), "environment_id": "sec", "destination": "localhost/cofer-secret-check:latest"}),
        )
        .await;
    seen.push(format!("{checkpoint:?}"));
    seen.push(podman(&[
        "image",
        "inspect",
        "localhost/cofer-secret-check:latest",
    ]));
    podman(&["rmi", "-f", "localhost/cofer-secret-check:latest"]);
    seen.push(git(&f.repo, &["log", "--all", "-p"]));
    seen.push(std::fs::read_to_string(f.env.stderr_log()).unwrap_or_default());
    for record in walk(&f.repo.join(".git/cofer")) {
        seen.push(String::from_utf8_lossy(&std::fs::read(record).unwrap_or_default()).into_owned());
    }
    seen.push(stored);
    let base64_pw = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(DB_PASSWORD)
    };
    for text in &seen {
        for value in [
            DB_PASSWORD,
            TOKEN,
            OP_VALUE,
            VAULT_VALUE,
            base64_pw.trim_end_matches('='),
        ] {
            assert!(
                !text.contains(value),
                "a secret value got out: {value} in {text}"
            );
        }
    }

    // A file a command wrote, read by the agent, and the diff showing it:
    // masked. (The file itself is committed as the command wrote it: the
    // host masks what it shows, not what a command chooses to write.)
    f.run_ok(&client, "sec", "printf 'token=%s\\n' \"$TOKEN\" > leak.txt")
        .await;
    let mut read = f.scoped("sec");
    read["target_file"] = serde_json::json!("leak.txt");
    read["should_read_entire_file"] = serde_json::json!(true);
    let shown = format!(
        "{:?}{:?}",
        client.call("environment_file_read", read).await,
        client.call("environment_diff", f.scoped("sec")).await
    );
    assert!(shown.contains("***TOKEN"), "{shown}");
    assert!(!shown.contains(TOKEN), "{shown}");

    // A reference that resolves to nothing is an error naming it.
    cofer(&[
        "config",
        "secret",
        "set",
        "MISSING",
        "env://COFER_TEST_NOT_SET",
    ]);
    let r = client
        .call("environment_run_cmd", f.run_args("sec", "true"))
        .await;
    let error = error_of(&r).to_string();
    assert!(
        error.contains("MISSING") && error.contains("COFER_TEST_NOT_SET"),
        "{error}"
    );
    cofer(&["config", "secret", "unset", "MISSING"]);
    // Without the CLI a reference needs, the error names the CLI.
    std::fs::remove_file(bin.join("vault")).unwrap();
    let r = client
        .call("environment_run_cmd", f.run_args("sec", "true"))
        .await;
    let error = error_of(&r).to_string();
    assert!(
        error.contains("VAULT_KEY") && error.contains("vault"),
        "{error}"
    );
}

/// The references file where a plugin could write it would let a plugin
/// choose what the host reads: refused, naming the fix.
#[tokio::test(flavor = "multi_thread")]
async fn a_secrets_file_plugins_can_write_is_refused() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let inside = f.env.workspace.join("secrets.toml");
    std::fs::write(
        &inside,
        format!("[\"{}\"]\nX = \"env://HOME\"\n", f.source()),
    )
    .unwrap();
    let mut config = std::fs::read_to_string(&f.env.config).unwrap();
    config.push_str(&format!(
        "\n[plugins.cofer]\ncontainers.secrets = \"{}\"\n",
        inside.display()
    ));
    std::fs::write(&f.env.config, config).unwrap();
    let client = f.env.start().await;
    f.create(&client, "w").await;
    let r = client
        .call("environment_run_cmd", f.run_args("w", "true"))
        .await;
    let error = error_of(&r).to_string();
    assert!(error.contains("plugins or containers may write"), "{error}");
}
