//! Cofer against a Podman engine that does not share the host's files
//! ([`IsolatedEngine`]), reached over TCP as another machine's would be.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cofer::{Fixture, created, error_of};
use crate::harness::*;
use crate::isolated_engine::IsolatedEngine;

/// The engine really does not see the host's files: a bind mount of one
/// of them fails there, and a container of its own runs.
fn bind_mounts_fail_there(engine: &IsolatedEngine, host_dir: &Path) {
    let out = Command::new("podman")
        .args(["--remote", "--url", &engine.address, "run", "--rm"])
        .arg("-v")
        .arg(format!("{}:/x", host_dir.display()))
        .args([&cofer_image(), "true"])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the engine saw {}",
        host_dir.display()
    );
    assert_eq!(
        engine.remote(&["run", "--rm", &cofer_image(), "echo", "there"]),
        "there\n"
    );
}

/// An engine that cannot see the worktree (another machine's) cannot serve
/// an environment until its files travel as a volume (issue 14): create
/// fails with a typed error that names the path it could not mount, and
/// leaves nothing behind, here or on the engine.
#[tokio::test(flavor = "multi_thread")]
async fn an_engine_without_the_worktree_fails_create_cleanly() {
    let Some(engine) = IsolatedEngine::start(&cofer_image()) else {
        return;
    };
    let f = Fixture::with_podman(&[("CONTAINER_HOST", &engine.address)], true)
        .await
        .unwrap();
    bind_mounts_fail_there(&engine, &f.repo);
    let client = f.env.start().await;
    let r = client
        .call("environment_create", f.create_args("far"))
        .await;
    assert!(is_error(&r), "{r:?}");
    let err = structured(&r);
    assert_eq!(err["code"], "podman_unavailable", "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("does not see this machine's files") && message.contains("CONTAINER_HOST"),
        "{message}"
    );
    assert_eq!(
        engine.remote(&["ps", "--all", "--quiet"]),
        "",
        "a container was left on the engine"
    );
    assert_eq!(
        git(&f.repo, &["branch", "--list", "cofer/far"]),
        "",
        "the branch was left"
    );
    assert!(
        !f.repo.join(".cofer/worktrees/far").exists(),
        "the worktree was left"
    );
}

/// The user's config naming `engine` as `far`: Podman's API over TCP,
/// which the host takes only when told the network is the person's own
/// (here a namespace of the test's).
fn far_engine_config(engine: &IsolatedEngine) -> String {
    format!(
        "[plugins.cofer.containers.engines]\nfar = {{ url = \"{}\", insecure = true }}\n",
        engine.address
    )
}

/// Issue 14's lifecycle on another machine's engine, beside a local
/// environment in the same host: create copies the worktree into a volume
/// there; a command's edits come back into the worktree and its branch; a
/// file tool's change goes there; a timeout kills the tree in the
/// container; a service answers at the engine's address; after a restart
/// the environment is found on its engine; destroy leaves nothing there.
#[tokio::test(flavor = "multi_thread")]
async fn an_environment_lives_on_another_machines_engine() {
    let Some(engine) = IsolatedEngine::start(&cofer_image()) else {
        return;
    };
    let Some(f) = Fixture::with_podman(&[("COHERRA_TIMEOUT_RUN", "8000")], true).await else {
        return;
    };
    std::fs::write(&f.env.config, far_engine_config(&engine)).unwrap();
    let engine_ip = engine
        .address
        .trim_start_matches("tcp://")
        .split(':')
        .next()
        .unwrap()
        .to_string();
    let client = f.env.start().await;

    let mut args = f.create_args("far");
    args["engine"] = json!("far");
    let described = created(&client.call("environment_create", args).await);
    assert_eq!(described["engine"], "far", "{described}");
    let near = f.create(&client, "near").await;
    assert!(near.get("engine").is_none(), "{near}");
    let on_engine = engine.remote(&["ps", "--format", "{{.Names}}"]);
    assert!(on_engine.contains("cofer-far-"), "{on_engine}");
    assert!(!on_engine.contains("cofer-near-"), "{on_engine}");
    assert!(
        engine
            .remote(&["volume", "ls", "--quiet"])
            .contains("-workdir"),
        "no workdir volume on the engine"
    );

    // The worktree went in; edits come back, committed.
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args(
                "far",
                "cat README.md && echo far > README.md && mkdir -p src && echo made > src/new.txt && ln -s README.md link",
            ),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert!(
        structured(&r)["stdout"]
            .as_str()
            .unwrap()
            .starts_with("hello"),
        "{r:?}"
    );
    assert!(structured(&r)["commit"].is_string(), "{r:?}");
    let wt = f.worktree("far");
    assert_eq!(
        std::fs::read_to_string(wt.join("README.md")).unwrap(),
        "far\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("src/new.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(
        std::fs::read_link(wt.join("link")).unwrap(),
        Path::new("README.md")
    );
    let files = git(&f.repo, &["ls-tree", "-r", "--name-only", "cofer/far"]);
    assert!(
        files.contains("src/new.txt") && files.contains("link"),
        "{files}"
    );
    assert!(!files.lines().any(|l| l == ".git"), "{files}");
    assert!(
        std::fs::read_to_string(wt.join(".git"))
            .unwrap()
            .starts_with("gitdir: "),
        "the worktree's .git was changed"
    );
    let log = cofer(&f.repo, &["log", "far"]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(log.contains("run cat README.md"), "{log}");
    // A deletion in the container reaches the worktree too.
    let r = client
        .call("environment_run_cmd", f.run_args("far", "rm src/new.txt"))
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert!(!wt.join("src/new.txt").exists());

    // A file tool's change goes to the engine.
    let r = client
        .call(
            "environment_file_write",
            json!({"environment_source": f.source(), "environment_id": "far",
                   "target_file": "notes/todo.txt", "contents": "written here\n"}),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("far", "cat notes/todo.txt"),
        )
        .await;
    assert_eq!(structured(&r)["stdout"], "written here\n", "{r:?}");
    let r = client
        .call(
            "environment_file_delete",
            json!({"environment_source": f.source(), "environment_id": "far",
                   "target_file": "notes/todo.txt"}),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("far", "test ! -e notes/todo.txt && echo gone"),
        )
        .await;
    assert_eq!(structured(&r)["stdout"], "gone\n", "{r:?}");

    // A timeout kills the whole tree inside the container, re-parented
    // descendants included, with no /proc of the engine's here.
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("far", "(sleep 997 &) ; sleep 998"),
        )
        .await;
    assert_eq!(error_of(&r)["code"], "timeout", "{r:?}");
    let main = on_engine
        .lines()
        .find(|n| n.starts_with("cofer-far-"))
        .unwrap()
        .to_string();
    let left = engine.remote(&["exec", &main, "ps", "-o", "args"]);
    assert!(
        !left.contains("sleep 99"),
        "left running on the engine:\n{left}"
    );

    // A checkpoint is an image on the engine, /workdir (the volume) in it.
    assert_eq!(
        engine
            .checkpoint_holds(
                &client,
                &f.source(),
                "far",
                "localhost/far-checkpoint:1",
                "/workdir/README.md"
            )
            .await,
        "far\n"
    );

    // A service answers at the engine's address.
    let mut args = f.run_args("far", "httpd -f -p 8080 -h /workdir");
    args["background"] = json!(true);
    args["ports"] = json!([8080]);
    let r = client.call("environment_run_cmd", args).await;
    assert!(!is_error(&r), "{r:?}");
    let external = structured(&r)["endpoints"]["8080"]["host_external"]
        .as_str()
        .unwrap()
        .to_string();
    let port: u16 = external
        .strip_prefix(&format!("tcp://{engine_ip}:"))
        .unwrap_or_else(|| panic!("not at the engine's address: {external}"))
        .parse()
        .unwrap();
    let page = crate::cofer::http_get_at(&engine_ip, port, "/README.md").await;
    assert!(page.contains("far"), "{page}");

    // What a service writes between commands comes back, committed apart.
    let mut args = f.run_args("far", "echo bg > bg.txt; sleep 600");
    args["background"] = json!(true);
    assert!(!is_error(&client.call("environment_run_cmd", args).await));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !engine
        .remote(&["exec", &main, "ls", "/workdir"])
        .contains("bg.txt")
    {
        assert!(Instant::now() < deadline, "the service never wrote bg.txt");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = client
        .call("environment_run_cmd", f.run_args("far", "true"))
        .await;
    assert!(
        structured(&r)["background_changes_commit"].is_string(),
        "{r:?}"
    );
    assert_eq!(std::fs::read_to_string(wt.join("bg.txt")).unwrap(), "bg\n");

    // The local environment works beside it, on this machine.
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("near", "echo near > near.txt"),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert!(f.worktree("near").join("near.txt").exists());
    let (engines, listed) = f.listed(&client).await;
    assert_eq!(
        engines,
        [
            ("far".into(), "far".into(), "running".into()),
            ("near".into(), "local".into(), "running".into())
        ],
        "{listed}"
    );
    drop(client);

    // A new host finds it on its engine, and destroy empties the engine.
    let client = f.env.start().await;
    let r = client.call("environment_open", f.scoped("far")).await;
    assert!(!is_error(&r), "{r:?}");
    let r = client.call("environment_destroy", f.scoped("far")).await;
    assert!(!is_error(&r), "{r:?}");
    assert_eq!(
        engine.remote(&["ps", "--all", "--quiet"]),
        "",
        "containers left"
    );
    assert_eq!(
        engine.remote(&["volume", "ls", "--quiet"]),
        "",
        "volumes left"
    );
    assert!(
        !engine
            .remote(&["network", "ls", "--format", "{{.Name}}"])
            .contains("cofer-")
    );
    let r = client.call("environment_destroy", f.scoped("near")).await;
    assert!(!is_error(&r), "{r:?}");
}

/// After the first command, only what changed comes back from another
/// machine's engine (the container's `stat`s against the last sync's),
/// and what comes back is what a whole copy would have brought: a file
/// written twice in one second with the same size, one whose time was set
/// back, one removed, and a worktree file changed on this machine behind
/// the environment's back (the container's copy wins, as before).
#[tokio::test(flavor = "multi_thread")]
async fn only_what_changed_comes_back_from_another_engine() {
    let Some(engine) = IsolatedEngine::start(&cofer_image()) else {
        return;
    };
    let vars = [("RUST_LOG", "info,host::caps::containers::files=debug")];
    let Some(f) = Fixture::with_podman(&vars, true).await else {
        return;
    };
    std::fs::write(&f.env.config, far_engine_config(&engine)).unwrap();
    let client = f.env.start().await;
    let mut args = f.create_args("far");
    args["engine"] = json!("far");
    created(&client.call("environment_create", args).await);
    let wt = f.worktree("far");
    let run = |command: &str| {
        let (client, args) = (&client, f.run_args("far", command));
        async move {
            let r = client.call("environment_run_cmd", args).await;
            assert!(!is_error(&r), "{r:?}");
        }
    };
    let changed_only = || f.env.logged("changed_only=true");

    run("mkdir -p data && seq 1 2000 > data/numbers && echo aa > a.txt").await;
    assert_eq!(std::fs::read_to_string(wt.join("a.txt")).unwrap(), "aa\n");
    let before = changed_only();
    // Same size, same second: only its ctime/inode can tell, or not even
    // those; the second it was seen in makes it fetched again.
    run("echo bb > a.txt").await;
    assert_eq!(std::fs::read_to_string(wt.join("a.txt")).unwrap(), "bb\n");
    run("echo cc > a.txt && touch -d '2001-01-01 00:00:00' a.txt").await;
    assert_eq!(std::fs::read_to_string(wt.join("a.txt")).unwrap(), "cc\n");
    run("rm data/numbers && mkdir -p deep/er && echo x > deep/er/f").await;
    assert!(!wt.join("data/numbers").exists());
    assert_eq!(
        std::fs::read_to_string(wt.join("deep/er/f")).unwrap(),
        "x\n"
    );
    std::fs::write(wt.join("README.md"), "changed here\n").unwrap();
    run("true").await;
    assert_eq!(
        std::fs::read_to_string(wt.join("README.md")).unwrap(),
        "hello\n",
        "the container's copy is what the worktree holds"
    );
    assert!(
        changed_only() >= before + 4,
        "the later commands fetched only what changed: {}",
        std::fs::read_to_string(f.env.stderr_log()).unwrap_or_default()
    );
    // Their `stat`s came with the sweep after each command: no exec of
    // the sync's own.
    assert!(
        f.env.logged("from_sweep=true") >= 4,
        "{}",
        std::fs::read_to_string(f.env.stderr_log()).unwrap_or_default()
    );
    let r = client.call("environment_destroy", f.scoped("far")).await;
    assert!(!is_error(&r), "{r:?}");
}

/// The worktree goes into another engine's container through the
/// container's own `tar` (Podman's archive API takes seconds on 10,000
/// files), and through the archive API when the image has no `tar`.
#[tokio::test(flavor = "multi_thread")]
async fn the_worktree_goes_in_with_or_without_tar_in_the_image() {
    let Some(engine) = IsolatedEngine::start(&cofer_image()) else {
        return;
    };
    let vars = [("RUST_LOG", "info,host::caps::containers::files=debug")];
    let Some(f) = Fixture::with_podman(&vars, true).await else {
        return;
    };
    engine.remote(&["run", "--name", "no-tar", &cofer_image(), "rm", "/bin/tar"]);
    engine.remote(&["commit", "no-tar", "localhost/cofer-no-tar:latest"]);
    engine.remote(&["rm", "-f", "no-tar"]);
    std::fs::write(&f.env.config, far_engine_config(&engine)).unwrap();
    let client = f.env.start().await;
    for (id, image, said) in [
        ("with", cofer_image(), "copied in by the container's tar"),
        (
            "without",
            "localhost/cofer-no-tar:latest".to_string(),
            "no tar in the container: copied in through the archive API",
        ),
    ] {
        let mut args = f.create_args(id);
        args["engine"] = json!("far");
        args["image"] = json!(image);
        created(&client.call("environment_create", args).await);
        if id == "with" {
            // One `tar -x` per core of the engine's machine (this one).
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
            assert_eq!(f.env.logged(&format!("parts={cores}")), 1);
        }
        let mut args = f.run_args(id, "cat README.md && ls -la README.md");
        args["shell"] = json!("ash");
        let r = client.call("environment_run_cmd", args).await;
        assert!(!is_error(&r), "{r:?}");
        let stdout = structured(&r)["stdout"].as_str().unwrap().to_string();
        assert!(stdout.starts_with("hello"), "{stdout}");
        // The sweep after a command comes in the command's own exec,
        // beneath `sh`: output, status and what it left running. Without
        // `sh` (removed under the running container) the command runs on
        // its own, and the sweep, which needs `sh` too, cannot end what it
        // left (destroy does).
        let names = engine.remote(&["ps", "--format", "{{.Names}}"]);
        let main = names
            .lines()
            .find(|n| n.starts_with(&format!("cofer-{id}-")))
            .unwrap()
            .to_string();
        for sh in [true, false] {
            if !sh {
                engine.remote(&["exec", &main, "rm", "/bin/sh"]);
            }
            let mut args = f.run_args(id, "printf 'no newline'; (sleep 995 &) ; exit 4");
            args["shell"] = json!("ash");
            let r = client.call("environment_run_cmd", args).await;
            assert_eq!(structured(&r)["stdout"], "no newline", "{r:?}");
            assert_eq!(structured(&r)["exit_code"], 4, "{r:?}");
            let left = engine.remote(&["exec", &main, "ps", "-o", "args"]);
            assert_eq!(left.contains("sleep 995"), !sh, "left running:\n{left}");
        }
        assert_eq!(
            f.env.logged("no sh in the container to frame the command"),
            if id == "with" { 1 } else { 2 }
        );
        assert!(
            f.env.logged(said) >= 1,
            "{}",
            std::fs::read_to_string(f.env.stderr_log()).unwrap_or_default()
        );
        let r = client.call("environment_destroy", f.scoped(id)).await;
        assert!(!is_error(&r), "{r:?}");
    }
}

/// An engine the config does not name cannot be asked for: the URL comes
/// from the user's config only.
#[tokio::test(flavor = "multi_thread")]
async fn only_configured_engines_can_be_used() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    for (asked, code) in [
        ("elsewhere", "denied"),
        ("tcp://10.0.0.1:8888", "invalid_request"),
    ] {
        let mut args = f.create_args("x");
        args["engine"] = json!(asked);
        let r = client.call("environment_create", args).await;
        let err = error_of(&r);
        assert_eq!(err["code"], code, "{err}");
        assert!(!f.worktree("x").exists());
    }
}

/// `host serve --stdio` in a PID namespace of its own, as on a machine
/// whose `/proc` does not show the engine's processes (here it would, and
/// the watchdog's scan of this machine would find them): the namespace's
/// first process is a shell that outlives the host by 20 s, so the
/// watchdog (in the namespace too) has the time to do its work.
fn serve_apart(env: &Env) -> tokio::process::Child {
    let serve = env.host(&["serve", "--stdio"]);
    let serve = serve.as_std();
    let mut command = tokio::process::Command::new("unshare");
    command
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            "\"$@\"; sleep 20",
            "sh",
        ])
        .arg(serve.get_program())
        .args(serve.get_args());
    for (key, value) in serve.get_envs() {
        if let Some(value) = value {
            command.env(key, value);
        }
    }
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(env.stderr_log())
        .unwrap();
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The pid (here) of the `host serve` serving `workspace`, and its parent's.
fn host_serving(workspace: &Path) -> Option<(i32, i32)> {
    let workspace = workspace.to_string_lossy();
    for pid in processes_with(&workspace) {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.first() == Some(&env!("CARGO_BIN_EXE_host").as_bytes())
            && args.get(1) == Some(&&b"serve"[..])
        {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            return Some((pid, ppid));
        }
    }
    None
}

/// A host killed mid-command leaves nothing running on another machine's
/// engine: its watchdog finds the run the host recorded and kills it there.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_host_leaves_nothing_running_on_the_engine() {
    let Some(engine) = IsolatedEngine::start(&cofer_image()) else {
        return;
    };
    killed_host_leaves_nothing_running(&engine, &far_engine_config(&engine)).await;
}

/// The same for `engine` named `far` by `config` (over TCP, or over ssh:
/// the watchdog then opens a tunnel of its own to reach it).
pub async fn killed_host_leaves_nothing_running(engine: &IsolatedEngine, config: &str) {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    std::fs::write(&f.env.config, config).unwrap();
    let client = f.env.start().await;
    let mut args = f.create_args("far");
    args["engine"] = json!("far");
    created(&client.call("environment_create", args).await);
    drop(client);
    let main = engine
        .remote(&["ps", "--format", "{{.Names}}"])
        .trim()
        .to_string();

    let mut apart = serve_apart(&f.env);
    let mut stdin = apart.stdin.take().unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "environment_run_cmd", "arguments": f.run_args("far", "(sleep 9961 &) ; sleep 9962")}});
    use tokio::io::AsyncWriteExt;
    stdin
        .write_all(format!("{}{call}\n", handshake()).as_bytes())
        .await
        .unwrap();
    let running = || engine.remote(&["exec", &main, "ps", "-o", "args"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !running().contains("sleep 9962") {
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (host, namespace) = host_serving(&f.env.workspace).expect("the host's pid");
    let signal = |pid: i32| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
    };
    signal(host).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while running().contains("sleep 996") {
        if Instant::now() > deadline {
            let _ = signal(namespace);
            let log = std::fs::read_to_string(f.env.stderr_log()).unwrap_or_default();
            let tail = &log[log.floor_char_boundary(log.len().saturating_sub(3000))..];
            panic!(
                "left running on the engine after the host died:\n{}\nthe host's log ends:\n{tail}",
                running()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The namespace ends with its first process.
    let _ = signal(namespace);
    drop(stdin);
    let _ = apart.wait().await;
    let client = f.env.start().await;
    let r = client.call("environment_destroy", f.scoped("far")).await;
    let log = std::fs::read_to_string(f.env.stderr_log()).unwrap_or_default();
    let tail = &log[log.floor_char_boundary(log.len().saturating_sub(4000))..];
    assert!(!is_error(&r), "{r:?}\nthe hosts' log ends:\n{tail}");
}

/// Issue 72, item 9: a host started with a PATH without `/usr/sbin` (as
/// some desktop sessions and clients start it) starts its own Podman
/// service with the system's folders added: Podman's network helper runs
/// `iptables`/`nft` from there, and every environment (each has its own
/// network) failed with `netavark: No such file or directory`, answered
/// as "check that the image exists".
#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_own_podman_service_finds_its_network_helper() {
    let Some(f) = Fixture::with_podman(&[("PATH", "/usr/bin:/bin")], true).await else {
        return;
    };
    let client = f.env.start().await;
    let r = client
        .call("environment_create", f.create_args("net"))
        .await;
    assert!(!is_error(&r), "{r:?}");
    f.run_ok(&client, "net", "true").await;
}
