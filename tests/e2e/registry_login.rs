//! Registries that need a login (issue 59): the logins people already
//! have, read from Podman's and Docker's files in Podman's order, `host
//! login` / `host logout` writing the file `podman login` writes, a
//! credential helper, and the password nowhere else.

use std::path::{Path, PathBuf};
use std::process::Output;

use base64::Engine;

use crate::harness::*;
use crate::registry::Registry;

const USER: &str = "tester";
const PASSWORD: &str = "pw-Zq81-never-shown";

/// A registry that takes `USER` / `PASSWORD` only (htpasswd, bcrypt), or
/// a skip.
fn private_registry() -> Option<Registry> {
    if !require_program("htpasswd", "apt-get install apache2-utils (.ci/run does)") {
        return None;
    }
    Registry::start_with(|dir| {
        let out = std::process::Command::new("htpasswd")
            .args(["-Bbn", USER, PASSWORD])
            .output()
            .unwrap();
        assert!(out.status.success(), "htpasswd failed");
        let file = dir.join("htpasswd");
        std::fs::write(&file, out.stdout).unwrap();
        format!(
            "auth:\n  htpasswd:\n    realm: test-realm\n    path: {}\n",
            file.display()
        )
    })
}

/// A user's home of its own: Podman's runtime folder, its config folder,
/// Docker's, and a folder on PATH for credential helpers.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let home = Home {
            dir: tempfile::tempdir().unwrap(),
        };
        for sub in ["run", "config", "bin", ".docker"] {
            std::fs::create_dir_all(home.dir.path().join(sub)).unwrap();
        }
        home
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// Where `podman login` writes with this home.
    fn podman_auth(&self) -> PathBuf {
        self.path("run/containers/auth.json")
    }

    fn apply(&self, command: &mut tokio::process::Command) {
        let path = format!(
            "{}:{}",
            self.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .env("HOME", self.dir.path())
            .env("XDG_RUNTIME_DIR", self.path("run"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("PATH", path)
            .env_remove("REGISTRY_AUTH_FILE")
            .env_remove("DOCKER_CONFIG");
    }
}

async fn host(env: &Env, home: &Home, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = env.host(args);
    home.apply(&mut command);
    run(command, stdin).await
}

/// `host publish`, `login`, `logout` (they take no config or folder).
async fn bare(home: &Home, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_host"));
    command.args(args);
    home.apply(&mut command);
    run(command, stdin).await
}

async fn publish(home: &Home, file: &Path, target: &str) -> Output {
    bare(
        home,
        &["publish", &file.display().to_string(), target],
        None,
    )
    .await
}

async fn run(mut command: tokio::process::Command, stdin: Option<&str>) -> Output {
    use tokio::io::AsyncWriteExt;
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or("").as_bytes())
        .await
        .unwrap();
    drop(input);
    child.wait_with_output().await.unwrap()
}

fn refused(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "expected a refusal: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if std::fs::read(&path)
                .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
            {
                found.push(path);
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_registry_takes_the_login_podman_keeps() {
    let Some(registry) = private_registry() else {
        return;
    };
    let env = Env::new(&[], "");
    let home = Home::new();
    let address = registry.address.clone();
    let tag = registry.url("tools/hello:1");
    let hello = built_plugin("hello");
    let mut outputs: Vec<Output> = Vec::new();

    // No login anywhere: the error names the command and the files read.
    let out = host(&env, &home, &["install", &tag], None).await;
    let err = refused(&out);
    assert!(
        err.contains(&format!("host login {address}"))
            && err.contains(&home.podman_auth().display().to_string())
            && err.contains(".docker/config.json"),
        "{err}"
    );
    let out = publish(&home, &hello, &tag).await;
    let err = refused(&out);
    assert!(err.contains(&format!("host login {address}")), "{err}");

    // A wrong password is refused and nothing is saved.
    let login = ["login", "-u", USER, "--password-stdin", address.as_str()];
    let out = bare(&home, &login, Some("not-it\n")).await;
    let err = refused(&out);
    assert!(err.contains("nothing was saved"), "{err}");
    assert!(!home.podman_auth().exists());
    outputs.push(out);

    // The right one goes where `podman login` puts it, in its format.
    let out = bare(&home, &login, Some(&format!("{PASSWORD}\n"))).await;
    succeeded(&out);
    outputs.push(out);
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.podman_auth()).unwrap()).unwrap();
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    assert_eq!(saved["auths"][&address]["auth"], encoded.as_str());
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.podman_auth())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // Publish and install with it.
    let out = publish(&home, &hello, &tag).await;
    succeeded(&out);
    outputs.push(out);
    let out = host(&env, &home, &["install", &tag], None).await;
    let listed = succeeded(&out);
    assert!(listed.starts_with("hello\t"), "{listed}");
    outputs.push(out);
    assert!(env.plugins.join("hello.wasm").exists());

    // The password (and its base64 form) is in the auth file only: not in
    // any answer, the lock, the plugins folder, the cache or the config.
    for out in &outputs {
        for text in [&out.stdout, &out.stderr] {
            let text = String::from_utf8_lossy(text);
            assert!(
                !text.contains(PASSWORD) && !text.contains(&encoded),
                "{text}"
            );
        }
    }
    for dir in [&env.plugins, &env.cache, &env.workspace] {
        for needle in [PASSWORD, encoded.as_str()] {
            let found = files_holding(dir, needle.as_bytes());
            assert!(found.is_empty(), "{needle} is in {found:?}");
        }
    }

    // Logged out, the registry is closed again.
    succeeded(&bare(&home, &["logout", &address], None).await);
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.podman_auth()).unwrap()).unwrap();
    assert!(saved["auths"].get(&address).is_none(), "{saved}");
    std::fs::remove_file(env.plugins.join("hello.wasm")).unwrap();
    let err = refused(&host(&env, &home, &["install"], None).await);
    assert!(err.contains(&format!("host login {address}")), "{err}");
    let err = refused(&bare(&home, &["logout", &address], None).await);
    assert!(err.contains("holds no login"), "{err}");
}

/// Docker's file naming a credential helper for the registry: the helper
/// (a stand-in script) is asked, with the registry on its stdin.
#[tokio::test(flavor = "multi_thread")]
async fn a_credential_helper_named_in_dockers_file_is_asked() {
    let Some(registry) = private_registry() else {
        return;
    };
    let env = Env::new(&[], "");
    let home = Home::new();
    let address = registry.address.clone();
    let asked = home.path("asked");
    let helper = home.path("bin/docker-credential-stand-in");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 2\nread -r registry\necho \"$registry\" >> {asked}\n\
             if [ \"$registry\" = {address} ]; then\n\
               printf '{{\"ServerURL\":\"%s\",\"Username\":\"{USER}\",\"Secret\":\"{PASSWORD}\"}}' \"$registry\"\n\
             else echo 'credentials not found in native keychain'; exit 1; fi\n",
            asked = asked.display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(
        home.path(".docker/config.json"),
        format!(r#"{{"credHelpers": {{"{address}": "stand-in"}}}}"#),
    )
    .unwrap();

    // Issue 70: a helper of the same name planted in the workspace's
    // `node_modules/.bin`, ahead on PATH, ran during `host install`.
    let planted_bin = env.workspace.join("node_modules/.bin");
    std::fs::create_dir_all(&planted_bin).unwrap();
    let planted_ran = env.dir.path().join("planted-helper-ran");
    let planted = planted_bin.join("docker-credential-stand-in");
    std::fs::write(
        &planted,
        format!(
            "#!/bin/sh
touch {}
exit 1
",
            planted_ran.display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    let tag = registry.url("tools/hello:2");
    let out = publish(&home, &built_plugin("hello"), &tag).await;
    succeeded(&out);
    let mut command = env.host(&["install", &tag]);
    home.apply(&mut command);
    let path = format!(
        "{}:{}",
        planted_bin.display(),
        command
            .as_std()
            .get_envs()
            .find(|(k, _)| *k == "PATH")
            .and_then(|(_, v)| v)
            .unwrap()
            .to_string_lossy()
    );
    command.env("PATH", path);
    let out = run(command, None).await;
    assert!(
        !planted_ran.exists(),
        "a credential helper planted in the workspace ran"
    );
    let listed = succeeded(&out);
    assert!(listed.starts_with("hello\t"), "{listed}");
    let asked = std::fs::read_to_string(&asked).unwrap();
    assert!(
        asked.lines().all(|l| l == address) && !asked.is_empty(),
        "{asked}"
    );
    for dir in [&env.plugins, &env.cache] {
        let found = files_holding(dir, PASSWORD.as_bytes());
        assert!(found.is_empty(), "the password is in {found:?}");
    }
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains(PASSWORD), "{text}");
}
