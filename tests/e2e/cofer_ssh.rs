//! Cofer on engines reached over ssh (issue 74): by an `ssh://` URL and by
//! one of the person's Podman connections, an unknown host key refused,
//! a pool of the local engine and the ssh one placing environments by
//! room, and the ssh engine going away mid-session and coming back.

use serde_json::json;

use crate::cofer::{Fixture, created, error_of};
use crate::harness::*;
use crate::ssh_engine::SshEngine;

/// The life of an environment on an ssh engine named by a Podman
/// connection: create, run (the edit comes back, committed), a service
/// answering at the engine's address, a checkpoint there, destroy leaving
/// nothing; an `ssh://` URL engine answering too; an engine whose host key
/// is not known refused with what to do, nothing made.
#[tokio::test(flavor = "multi_thread")]
async fn environments_live_on_an_engine_reached_over_ssh() {
    let Some(ssh) = SshEngine::start(&cofer_image()) else {
        return;
    };
    let config_home = tempfile::tempdir().unwrap();
    std::fs::create_dir(config_home.path().join("containers")).unwrap();
    // Podman 5's file, as `podman system connection add lab …` writes it.
    std::fs::write(
        config_home
            .path()
            .join("containers/podman-connections.json"),
        json!({"Connection": {"Default": "lab", "Connections": {"lab": {
            "URI": ssh.url(), "Identity": ssh.identity, "IsMachine": false}}}, "Farm": {}})
        .to_string(),
    )
    .unwrap();
    let home = config_home.path().display().to_string();
    let Some(f) = Fixture::with_podman(&[("XDG_CONFIG_HOME", &home)], true).await else {
        return;
    };
    std::fs::write(
        &f.env.config,
        format!(
            "[plugins.cofer.containers.engines]\n\
             lab = {{ connection = \"lab\", known_hosts = \"{kh}\" }}\n\
             byurl = {}\n\
             stranger = {}\n",
            ssh.table(&ssh.known_hosts),
            ssh.table(&ssh.strangers),
            kh = ssh.known_hosts.display()
        ),
    )
    .unwrap();
    let client = f.env.start().await;

    // An unknown host key: refused, with what to do; nothing is left.
    let mut args = f.create_args("nope");
    args["engine"] = json!("stranger");
    let r = client.call("environment_create", args).await;
    let err = error_of(&r);
    let message = err["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("not in") && message.contains("ssh-keyscan"),
        "{err}\nsshd: {}",
        ssh.log()
    );
    assert!(!f.repo.join(".cofer/worktrees/nope").exists());
    assert_eq!(git(&f.repo, &["branch", "--list", "cofer/nope"]), "");

    // By the Podman connection.
    let mut args = f.create_args("far");
    args["engine"] = json!("lab");
    let described = created(&client.call("environment_create", args).await);
    assert_eq!(described["engine"], "lab", "{described}");
    assert!(
        ssh.engine
            .remote(&["ps", "--format", "{{.Names}}"])
            .contains("cofer-far-"),
        "not on the ssh engine"
    );
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("far", "cat README.md && echo over-ssh > ssh.txt"),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert!(
        structured(&r)["stdout"]
            .as_str()
            .unwrap()
            .starts_with("hello")
    );
    assert_eq!(
        std::fs::read_to_string(f.worktree("far").join("ssh.txt")).unwrap(),
        "over-ssh\n"
    );
    assert!(git(&f.repo, &["ls-tree", "-r", "--name-only", "cofer/far"]).contains("ssh.txt"));

    // A service, reached at the engine's address.
    let r = client
        .call(
            "environment_add_service",
            json!({"environment_source": f.source(), "environment_id": "far",
                   "name": "web", "image": cofer_image(),
                   "command": "mkdir -p /www && echo from-web > /www/index.html && exec httpd -f -p 8080 -h /www",
                   "ports": [8080], "explanation": "a web service"}),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let service = structured(&r);
    let external = service["endpoints"]["8080"]["external"]
        .as_str()
        .unwrap_or_else(|| panic!("no endpoint: {service}"))
        .to_string();
    let port: u16 = external
        .strip_prefix(&format!("{}:", ssh.engine.ip))
        .unwrap_or_else(|| panic!("not at the engine's address: {external}"))
        .parse()
        .unwrap();
    let page = crate::cofer::http_get_at(&ssh.engine.ip, port, "/").await;
    assert!(page.contains("from-web"), "{page}");

    // A checkpoint is an image there.
    assert_eq!(
        ssh.engine
            .checkpoint_holds(
                &client,
                &f.source(),
                "far",
                "localhost/ssh-checkpoint:1",
                "/workdir/ssh.txt"
            )
            .await,
        "over-ssh\n"
    );

    // By the ssh:// URL.
    let mut args = f.create_args("url");
    args["engine"] = json!("byurl");
    created(&client.call("environment_create", args).await);
    let r = client
        .call("environment_run_cmd", f.run_args("url", "hostname"))
        .await;
    assert!(!is_error(&r), "{r:?}");

    for id in ["far", "url"] {
        let r = client.call("environment_destroy", f.scoped(id)).await;
        assert!(!is_error(&r), "{r:?}");
    }
    assert_eq!(
        ssh.engine.remote(&["ps", "--all", "--quiet"]),
        "",
        "containers left"
    );
    assert_eq!(
        ssh.engine.remote(&["volume", "ls", "--quiet"]),
        "",
        "volumes left"
    );
    drop(client);
    // The host's tunnels ended with it.
    let left = std::process::Command::new("pgrep")
        .args(["-f", &format!("ssh -F none.*{}", ssh.engine.ip)])
        .output()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut left = String::from_utf8_lossy(&left.stdout).into_owned();
    while !left.trim().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let out = std::process::Command::new("pgrep")
            .args(["-f", &format!("ssh -F none.*{}", ssh.engine.ip)])
            .output()
            .unwrap();
        left = String::from_utf8_lossy(&out.stdout).into_owned();
    }
    assert_eq!(left.trim(), "", "ssh tunnels outlived the host");
}

/// A pool of the ssh engine and the local one: the first environment goes
/// to the member listed first (both have the same room on this machine),
/// the second to the other (the first now runs one). The ssh engine's
/// machine stops answering (its sshd and sessions gone): its environment
/// is `unreachable`, nothing of it is lost, the local one answers; once
/// back, `environment_open` works again.
#[tokio::test(flavor = "multi_thread")]
async fn a_pool_places_by_room_and_outlives_an_engine_going_away() {
    let Some(mut ssh) = SshEngine::start(&cofer_image()) else {
        return;
    };
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    std::fs::write(
        &f.env.config,
        format!(
            "[plugins.cofer.containers.engines]\nlab = {}\n\
             [plugins.cofer.containers.pools]\nteam = [\"lab\", \"local\"]\n",
            ssh.table(&ssh.known_hosts)
        ),
    )
    .unwrap();
    let client = f.env.start().await;
    let mut placed = Vec::new();
    for id in ["one", "two"] {
        let mut args = f.create_args(id);
        args["engine"] = json!("team");
        let described = created(&client.call("environment_create", args).await);
        placed.push(described["engine"].as_str().unwrap_or("local").to_string());
    }
    assert_eq!(
        placed,
        ["lab", "local"],
        "placed by room, ties to the first"
    );

    ssh.stop_sshd();
    let (states, listed) = f.listed(&client).await;
    assert_eq!(
        states,
        [
            ("one".into(), "lab".into(), "unreachable".into()),
            ("two".into(), "local".into(), "running".into())
        ],
        "{listed}"
    );
    let r = client.call("environment_open", f.scoped("one")).await;
    let err = error_of(&r);
    assert_eq!(err["code"], "engine_unreachable", "{err}");
    assert_eq!(err["retryable"], true, "{err}");
    assert!(
        f.worktree("one").join("README.md").exists(),
        "worktree lost"
    );
    assert_ne!(
        git(&f.repo, &["branch", "--list", "cofer/one"]),
        "",
        "branch lost"
    );
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("two", "echo still > here.txt"),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");

    ssh.start_sshd();
    let r = client.call("environment_open", f.scoped("one")).await;
    assert!(!is_error(&r), "{r:?}");
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("one", "echo back > back.txt"),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert!(f.worktree("one").join("back.txt").exists());
    for id in ["one", "two"] {
        let r = client.call("environment_destroy", f.scoped(id)).await;
        assert!(!is_error(&r), "{r:?}");
    }
}

/// A host killed mid-command leaves nothing running on an ssh engine: the
/// run's record carries the engine's key and known_hosts, and the watchdog
/// opens a tunnel of its own to kill it there.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_host_leaves_nothing_running_on_an_ssh_engine() {
    let Some(ssh) = SshEngine::start(&cofer_image()) else {
        return;
    };
    let config = format!(
        "[plugins.cofer.containers.engines]\nfar = {}\n",
        ssh.table(&ssh.known_hosts)
    );
    crate::cofer_engines::killed_host_leaves_nothing_running(&ssh.engine, &config).await;
}
