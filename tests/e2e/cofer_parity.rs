//! The rest of container-use's toolset on real Podman: `environment_config`
//! (a new container, the worktree kept, all or nothing),
//! `environment_add_service` (reached by name from the environment and on
//! 127.0.0.1 from the host, started again by `environment_open`),
//! `environment_checkpoint` (a local image with /workdir), and a session
//! that calls the tools as container-use's agent rules tell an agent to.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cofer::{Fixture, container_of, error_of};
use crate::harness::*;

/// `args` on environment `id`, with an explanation.
fn on(f: &Fixture, id: &str, args: Value) -> Value {
    let mut all = f.scoped(id);
    all["explanation"] = json!("test");
    for (k, v) in args.as_object().unwrap() {
        all[k] = v.clone();
    }
    all
}

/// stdout of a command in environment `id` (which must exit 0).
async fn run(client: &Client, f: &Fixture, id: &str, command: &str) -> String {
    let r = client
        .call("environment_run_cmd", f.run_args(id, command))
        .await;
    let out = structured(&r);
    assert_eq!(out["exit_code"], 0, "{command}: {r:?}");
    out["stdout"].as_str().unwrap().to_string()
}

/// The JSON an answer carries after its first lines of prose.
fn described(answer: &str) -> Value {
    let start = answer.find('{').expect("a JSON description");
    serde_json::from_str(&answer[start..answer.rfind('}').unwrap() + 1]).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn config_recreates_the_container_and_keeps_the_worktree() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "conf").await;
    run(
        &client,
        &f,
        "conf",
        "echo kept > kept.txt; echo lost > /tmp/lost.txt",
    )
    .await;

    let r = client
        .call(
            "environment_config",
            on(&f, "conf", json!({"config": {
                "base_image": cofer_image(),
                "setup_commands": ["echo tool > /opt-tool.txt", "echo made-by-setup > setup.txt"],
                "envs": ["GREETING=hello there"],
            }})),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let answer = text(&r);
    assert!(answer.contains("Configuration applied"), "{answer}");
    let config = &described(&answer)["config"];
    assert_eq!(
        config["setup_commands"].as_array().unwrap().len(),
        2,
        "{config}"
    );
    assert_eq!(config["env"], json!(["GREETING=hello there"]));
    // What the setup wrote in /workdir is committed on the branch.
    assert!(answer.contains("committed to cofer/conf"), "{answer}");
    assert_eq!(
        git(&f.repo, &["show", "cofer/conf:setup.txt"]).trim(),
        "made-by-setup"
    );

    let seen = run(
        &client,
        &f,
        "conf",
        "cat kept.txt /opt-tool.txt; echo \"$GREETING\"; test -e /tmp/lost.txt || echo recreated",
    )
    .await;
    assert_eq!(seen, "kept\ntool\nhello there\nrecreated\n");

    // A setup command that fails changes nothing: same container, same config.
    let before = podman(&["inspect", "--format", "{{.Id}}", &container_of(&f, "conf")]);
    let r = client
        .call(
            "environment_config",
            on(&f, "conf", json!({"config": {"setup_commands": ["echo half-way", "echo broken >&2; exit 3"], "envs": []}})),
        )
        .await;
    let e = error_of(&r);
    assert_eq!(e["code"], "setup_failed", "{e}");
    assert_eq!(e["exit_code"], 3, "{e}");
    assert!(e["stderr"].as_str().unwrap().contains("broken"), "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("left as it was"),
        "{e}"
    );
    let after = podman(&["inspect", "--format", "{{.Id}}", &container_of(&f, "conf")]);
    assert_eq!(before, after, "the environment's container was kept");
    assert_eq!(
        run(&client, &f, "conf", "echo \"$GREETING\"").await,
        "hello there\n"
    );
    let open = text(&client.call("environment_open", f.scoped("conf")).await);
    assert_eq!(
        described(&open)["config"]["env"],
        json!(["GREETING=hello there"])
    );
    assert_eq!(
        podman(&["ps", "-a", "-q", "--filter", "name=-next$"]).trim(),
        "",
        "no candidate container left behind"
    );

    // Bad settings and missing environments are refused plainly.
    let e = error_of(
        &client
            .call(
                "environment_config",
                on(&f, "conf", json!({"config": {"envs": ["NOEQUALS"]}})),
            )
            .await,
    );
    assert_eq!(e["code"], "invalid_request", "{e}");
    let e = error_of(
        &client
            .call(
                "environment_config",
                on(&f, "nowhere", json!({"config": {}})),
            )
            .await,
    );
    assert_eq!(e["code"], "not_found", "{e}");
}

/// A shell command that fetches / from `name`:8080 by the address the
/// environment's /etc/hosts gives the name, where a resolver looks first
/// (the test image's static wget cannot resolve names itself, and Podman's
/// DNS on Debian 12 is unreliable: see services.rs).
fn fetch(name: &str) -> String {
    format!(
        "ip=$(awk '$2 == \"{name}\" {{ print $1; exit }}' /etc/hosts); \
         test -n \"$ip\" || {{ echo no address for {name} >&2; exit 1; }}; wget -qO- http://$ip:8080/"
    )
}

/// A small web server from the test image, serving `body`.
fn web_service(f: &Fixture, id: &str, name: &str, body: &str) -> Value {
    on(
        f,
        id,
        json!({
            "name": name,
            "image": cofer_image(),
            "command": format!("mkdir -p /www && echo {body} > /www/index.html && exec httpd -f -p 8080 -h /www"),
            "ports": [8080],
            "envs": ["MODE=test"],
        }),
    )
}

/// GET / from `addr` (`host:port`) over plain TCP, once the service in the
/// container answers (within a minute: a loaded machine starts it late).
async fn http_get(addr: &str) -> String {
    for _ in 0..1200 {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await {
            stream
                .write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut body = String::new();
            let _ = stream.read_to_string(&mut body).await;
            if !body.is_empty() {
                return body;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing answered on {addr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_is_reached_by_name_and_on_its_published_port() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "svc").await;
    let r = client
        .call(
            "environment_add_service",
            web_service(&f, "svc", "web", "from-web"),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert!(
        text(&r).starts_with("Service added and started successfully: {"),
        "{}",
        text(&r)
    );
    let service = structured(&r);
    assert_eq!(service["config"]["name"], "web");
    assert_eq!(service["config"]["exposed_ports"], json!([8080]));
    let endpoint = &service["endpoints"]["8080"];
    assert_eq!(endpoint["internal"], "web:8080", "{service}");
    assert_eq!(
        endpoint["environment_internal"], "tcp://web:8080",
        "{service}"
    );
    let external = endpoint["external"].as_str().unwrap().to_string();
    assert!(external.starts_with("127.0.0.1:"), "{service}");

    // From the environment, by the service's name; from the host, on 127.0.0.1.
    let inside = run(&client, &f, "svc", &fetch("web")).await;
    assert_eq!(inside, "from-web\n");
    assert!(http_get(&external).await.contains("from-web"));
    let env_of_service = podman(&[
        "exec",
        service["container_name"].as_str().unwrap(),
        "sh",
        "-c",
        "echo $MODE",
    ]);
    assert_eq!(env_of_service.trim(), "test");

    // A second service of the same name is a conflict; the first is untouched.
    let e = error_of(
        &client
            .call(
                "environment_add_service",
                web_service(&f, "svc", "web", "again"),
            )
            .await,
    );
    assert_eq!(e["code"], "conflict", "{e}");
    // An image the policy does not have locally says how to get it.
    let mut missing = web_service(&f, "svc", "db", "x");
    missing["image"] = json!("localhost/no-such-image:1");
    let e = error_of(&client.call("environment_add_service", missing).await);
    assert_eq!(e["code"], "image_missing", "{e}");
    // Issue 54, item 4: one that dies at once says how it ended and what
    // it wrote, as a background run_cmd does.
    let dying = on(
        &f,
        "svc",
        json!({"name": "dying", "image": cofer_image(), "command": "echo no database here; exit 3"}),
    );
    let e = error_of(&client.call("environment_add_service", dying).await);
    assert_eq!(e["code"], "service_exited", "{e}");
    assert_eq!(e["exit_code"], 3, "{e}");
    assert!(
        e["output"].as_str().unwrap().contains("no database here"),
        "{e}"
    );

    let e = error_of(
        &client
            .call(
                "environment_add_service",
                web_service(&f, "nowhere", "web", "x"),
            )
            .await,
    );
    assert_eq!(e["code"], "not_found", "{e}");

    // Gone (a reboot, a hand-made `podman rm`): environment_open starts it again.
    podman(&[
        "rm",
        "-f",
        "-t",
        "0",
        service["container_name"].as_str().unwrap(),
    ]);
    let open = text(&client.call("environment_open", f.scoped("svc")).await);
    assert!(open.contains("started again: web"), "{open}");
    assert_eq!(run(&client, &f, "svc", &fetch("web")).await, "from-web\n");

    // A reconfigured environment still reaches its services by name.
    let r = client
        .call(
            "environment_config",
            on(&f, "svc", json!({"config": {"envs": ["AFTER=1"]}})),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert_eq!(run(&client, &f, "svc", &fetch("web")).await, "from-web\n");

    // Destroy takes the services and the network with it.
    let network = container_of(&f, "svc");
    let r = client.call("environment_destroy", f.scoped("svc")).await;
    assert!(!is_error(&r), "{r:?}");
    assert_eq!(structured(&r)["warnings"], json!([]), "{r:?}");
    assert!(f.containers().is_empty());
    let exists = std::process::Command::new("podman")
        .args(["network", "exists", &network])
        .env("CONTAINERS_CONF", containers_conf())
        .status()
        .unwrap();
    assert!(
        !exists.success(),
        "network {network} outlived its environment"
    );
}

/// Removes the checkpoint image however the test ends.
struct Image(String);

impl Drop for Image {
    fn drop(&mut self) {
        podman(&["rmi", "-f", &self.0]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn checkpoint_makes_a_local_image_with_the_workdir() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "snap").await;
    run(
        &client,
        &f,
        "snap",
        "echo work > work.txt; echo installed > /usr/installed.txt",
    )
    .await;
    let image = Image(format!(
        "localhost/cofer-checkpoint-test:{}",
        std::process::id()
    ));
    let r = client
        .call(
            "environment_checkpoint",
            on(&f, "snap", json!({"destination": image.0})),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let out = structured(&r);
    assert_eq!(out["image"], image.0.as_str());
    assert!(text(&r).contains("podman run --rm -it"), "{}", text(&r));

    // The image has what was installed and the work, not the host's .git file.
    let seen = podman(&[
        "run",
        "--rm",
        "--pull=never",
        &image.0,
        "sh",
        "-c",
        "cat /usr/installed.txt /workdir/work.txt /workdir/README.md; test -e /workdir/.git || echo no-git",
    ]);
    assert_eq!(seen, "installed\nwork\nhello\nno-git\n");
    // Containers started from it by hand do not pass for Cofer's.
    let labels = podman(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config.Labels}}",
        &image.0,
    ]);
    let labels: Value = serde_json::from_str(labels.trim()).unwrap();
    assert_eq!(labels["cofer.env"], "", "{labels}");
    assert_eq!(labels["mcphost.plugin"], "", "{labels}");

    // Again to the same name: replaced, the old image not left dangling.
    let first = out["image_id"].as_str().unwrap().to_string();
    run(&client, &f, "snap", "echo more > more.txt").await;
    let r = client
        .call(
            "environment_checkpoint",
            on(&f, "snap", json!({"destination": image.0})),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert_ne!(structured(&r)["image_id"].as_str().unwrap(), first);
    assert_eq!(
        podman(&["images", "-q", "--filter", &format!("id={first}")]).trim(),
        ""
    );

    // A name that is not an image reference is refused before Podman
    // hears of it (issue 42).
    for bad in [
        "localhost/../x",
        "localhost/a..b:t",
        "-x",
        "localhost/x:../../t",
    ] {
        let r = client
            .call(
                "environment_checkpoint",
                on(&f, "snap", json!({"destination": bad})),
            )
            .await;
        assert!(is_error(&r), "{bad}");
        assert_eq!(structured(&r)["code"], "invalid_request", "{bad}: {r:?}");
    }

    // Only names the policy allows (containers.commit: localhost/*), and
    // never over an image the plugin did not make.
    let e = error_of(
        &client
            .call(
                "environment_checkpoint",
                on(
                    &f,
                    "snap",
                    json!({"destination": "docker.io/library/alpine:checkpoint"}),
                ),
            )
            .await,
    );
    assert_eq!(e["code"], "denied", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("containers.commit"),
        "{e}"
    );
    let e = error_of(
        &client
            .call(
                "environment_checkpoint",
                on(&f, "snap", json!({"destination": cofer_image()})),
            )
            .await,
    );
    assert_eq!(e["code"], "invalid_request", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("was not made by plugin"),
        "{e}"
    );
    let e = error_of(
        &client
            .call(
                "environment_checkpoint",
                on(&f, "gone", json!({"destination": image.0})),
            )
            .await,
    );
    assert_eq!(e["code"], "not_found", "{e}");
}

/// A session as container-use's agent rules have an agent work: every
/// file and shell operation through the environment tools, with only the
/// argument names container-use defines (no Cofer extras), and the user
/// told how to see the work.
#[tokio::test(flavor = "multi_thread")]
async fn a_container_use_session_runs_as_its_agent_rules_say() {
    let Some(f) = Fixture::with_podman(&[("COFER_DEFAULT_IMAGE", &cofer_image())], true).await
    else {
        return;
    };
    let client = f.env.start().await;
    let source = f.source();
    let call = |tool: &'static str, args: Value| {
        let client = &client;
        async move {
            let r = client.call(tool, args).await;
            assert!(!is_error(&r), "{tool}: {r:?}");
            text(&r)
        }
    };
    // Orient: no environments yet.
    let listed = call(
        "environment_list",
        json!({"environment_source": source, "explanation": "look around"}),
    )
    .await;
    assert!(listed.contains("\"environments\": []"), "{listed}");

    let created = call(
        "environment_create",
        json!({"environment_source": source, "title": "Add a greeting script", "explanation": "start the work"}),
    )
    .await;
    let env: Value = serde_json::from_str(&created).unwrap();
    let id = env["id"].as_str().unwrap().to_string();
    let scoped = |explanation: &str, more: Value| {
        let mut args =
            json!({"environment_source": source, "environment_id": id, "explanation": explanation});
        for (k, v) in more.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };

    let wrote = call(
        "environment_file_write",
        scoped(
            "write the script",
            json!({"target_file": "greet.sh", "contents": "echo \"hello, $1\"\n"}),
        ),
    )
    .await;
    assert!(wrote.contains("written successfully"), "{wrote}");
    let ran = call(
        "environment_run_cmd",
        scoped("try it", json!({"command": "sh greet.sh world"})),
    )
    .await;
    assert!(ran.starts_with("hello, world\n"), "{ran}");
    let read = call(
        "environment_file_read",
        scoped(
            "check it",
            json!({"target_file": "greet.sh", "should_read_entire_file": true}),
        ),
    )
    .await;
    assert_eq!(read, "echo \"hello, $1\"\n");
    let edited = call(
        "environment_file_edit",
        scoped(
            "be polite",
            json!({"target_file": "greet.sh", "search_text": "hello", "replace_text": "good day"}),
        ),
    )
    .await;
    assert!(edited.contains("edited successfully"), "{edited}");
    let added = call(
        "environment_add_service",
        scoped("a web server to test against", json!({
            "name": "web", "image": cofer_image(), "ports": [8080],
            "command": "mkdir -p /www && echo up > /www/index.html && exec httpd -f -p 8080 -h /www",
        })),
    )
    .await;
    assert!(added.contains("\"internal\":\"web:8080\""), "{added}");
    let ran = call(
        "environment_run_cmd",
        scoped("reach the service", json!({"command": fetch("web")})),
    )
    .await;
    assert!(ran.starts_with("up\n"), "{ran}");
    let listed = call(
        "environment_file_list",
        scoped("see the files", json!({"path": "."})),
    )
    .await;
    assert!(listed.contains("greet.sh"), "{listed}");

    // What the user is told to look at shows each step under its explanation.
    let log = call("environment_log", scoped("summarise", json!({}))).await;
    for message in ["write the script", "be polite"] {
        assert!(log.contains(message), "{message}: {log}");
    }
    let diff = call("environment_diff", scoped("summarise", json!({}))).await;
    assert!(diff.contains("+echo \"good day, $1\""), "{diff}");
    for key in [
        "checkout_command_to_share_with_user",
        "log_command_to_share_with_user",
        "diff_command_to_share_with_user",
    ] {
        assert!(env[key].as_str().unwrap().contains(&id), "{key}: {env}");
    }
    // The branch the user checks out has the work.
    assert!(git(&f.repo, &["show", &format!("cofer/{id}:greet.sh")]).contains("good day"));
    let r = client
        .call(
            "environment_destroy",
            json!({"environment_source": source, "environment_id": id}),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
}
