//! Cofer environments through the host: real git, real Podman, the local
//! test image (scripts/test-image). The tests run one at a time: the
//! environment limit counts running environments machine-wide.
//!
//! Every command also plants what an attacker in the container would: a
//! `.gitattributes` naming a filter the repository defines, a `.git` file
//! pointing elsewhere, a nested repository `planted/` whose own config
//! defines a filter its attributes apply, and Cofer's state under
//! `.cofer/` (a hook in `.cofer/remote.git`, a record). The filters record
//! any run by the host's git (whose environment is cleared; the tests' own
//! git sets a variable), and each test fails if one ran or if a branch
//! holds a `.cofer` path. The planting rides along with every test's own
//! commands (one run instead of the whole suite run twice, 636 s of CI:
//! issue 75); `COFER_TEST_PLANT=0` leaves it out, to see a failure without it.

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::*;

static SERIAL: LazyLock<tokio::sync::Mutex<()>> = LazyLock::new(Default::default);

/// A host with the cofer plugin and a committed repository in its
/// workspace; the repository's containers are removed on drop. It holds the
/// test's turn: the tests run one at a time.
pub struct Fixture {
    pub env: Env,
    pub repo: PathBuf,
    /// Written by the planted filter if the host's git ever ran it.
    filter_ran: PathBuf,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

/// Whether this run plants a filter and a `.git` file in every command:
/// unless `COFER_TEST_PLANT=0`.
fn planting() -> bool {
    std::env::var_os("COFER_TEST_PLANT").is_none_or(|v| v != "0")
}

impl Fixture {
    /// When Podman and the test image are there; `None`: skipped.
    pub async fn with_podman(vars: &[(&str, &str)], init: bool) -> Option<Fixture> {
        if !podman_ready() {
            return None;
        }
        Some(Fixture::new(vars, init).await)
    }

    async fn new(vars: &[(&str, &str)], init: bool) -> Fixture {
        let turn = SERIAL.lock().await;
        let mut env = Env::new(&["cofer"], "");
        env.host_vars
            .push(("CONTAINERS_CONF".into(), containers_conf()));
        for (k, v) in vars {
            env.host_vars.push((k.to_string(), v.to_string()));
        }
        let repo = env.workspace.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "--quiet", "--initial-branch=main"]);
        std::fs::write(repo.join("README.md"), "hello\n").unwrap();
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "--quiet", "-m", "first"]);
        let filter_ran = env.dir.path().join("filter-ran");
        let clean = format!(
            "sh -c 'test -n \"$COFER_TEST_USER_GIT\" || touch {}; cat'",
            filter_ran.display()
        );
        git(&repo, &["config", "filter.pwn.clean", &clean]);
        if init {
            let out = cofer(&repo, &["init"]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Fixture {
            env,
            repo,
            filter_ran,
            _turn: turn,
        }
    }

    /// Create environment `id` and return its description.
    pub async fn create(&self, client: &Client, id: &str) -> Value {
        created(
            &client
                .call("environment_create", self.create_args(id))
                .await,
        )
    }

    pub fn source(&self) -> String {
        self.repo.to_string_lossy().into_owned()
    }

    pub fn create_args(&self, id: &str) -> Value {
        json!({"environment_source": self.source(), "title": "test env", "image": cofer_image(), "environment_id": id})
    }

    pub fn run_args(&self, id: &str, command: &str) -> Value {
        let mut args = json!({"environment_source": self.source(), "environment_id": id,
                              "command": command, "explanation": format!("run {command}")});
        if planting() {
            // On exit, keeping the command's status; the .git write must fail.
            let ran = self.filter_ran.display();
            args["command"] = json!(format!(
                "trap 'echo \"* filter=pwn\" > /workdir/.gitattributes; \
                 echo \"gitdir: /workdir\" 2>/dev/null > /workdir/.git; \
                 mkdir -p /workdir/planted/.git /workdir/.cofer/remote.git/hooks /workdir/.cofer/environments; \
                 printf \"[filter \\\"x\\\"]\\n\\tclean = touch {ran}\\n\" > /workdir/planted/.git/config; \
                 echo \"* filter=x\" > /workdir/planted/.gitattributes; echo x > /workdir/planted/file; \
                 printf \"#!/bin/sh\\ntouch {ran}\\n\" > /workdir/.cofer/remote.git/hooks/post-receive; \
                 echo {{}} > /workdir/.cofer/environments/planted.json' EXIT\n{command}"
            ));
        }
        args
    }

    /// The host path of environment `id`'s worktree.
    pub fn worktree(&self, id: &str) -> PathBuf {
        self.repo.join(".cofer/worktrees").join(id)
    }

    /// Fail if the host's git ever ran the repository's filter.
    pub fn assert_no_filter_ran(&self) {
        assert!(
            !self.filter_ran.exists(),
            "the host's git ran a filter named by a container-written .gitattributes"
        );
    }

    /// Run `command` in environment `id`; its structured answer, which
    /// must not be an error.
    pub async fn run_ok(&self, client: &Client, id: &str, command: &str) -> Value {
        let r = client
            .call("environment_run_cmd", self.run_args(id, command))
            .await;
        assert!(!is_error(&r), "{r:?}");
        structured(&r).clone()
    }

    /// `environment_list`'s (id, engine, container state) of each
    /// environment, and the whole answer for a failure message.
    pub async fn listed(&self, client: &Client) -> (Vec<(String, String, String)>, Value) {
        let r = client
            .call(
                "environment_list",
                json!({"environment_source": self.source()}),
            )
            .await;
        let listed: Value = serde_json::from_str(&text(&r)).unwrap();
        let rows = listed["environments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let field = |k: &str| e[k].as_str().unwrap().to_string();
                (field("id"), field("engine"), field("container_state"))
            })
            .collect();
        (rows, listed)
    }

    pub fn scoped(&self, id: &str) -> Value {
        json!({"environment_source": self.source(), "environment_id": id})
    }

    /// Container ids of this repository's environments.
    /// Its containers as `podman ps` shows them (name, state, roles), for
    /// a failure message.
    pub fn describe_containers(&self) -> String {
        podman(&[
            "ps",
            "-a",
            "--format",
            "{{.Names}} {{.State}} {{.Labels}}",
            "--filter",
            &format!("label=cofer.source={}", self.source()),
        ])
    }

    pub fn containers(&self) -> Vec<String> {
        podman(&[
            "ps",
            "-a",
            "-q",
            "--filter",
            &format!("label=cofer.source={}", self.source()),
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Each environment's network is named as its main container.
        let networks = podman(&[
            "ps",
            "-a",
            "--format",
            "{{.Names}}",
            "--filter",
            &format!("label=cofer.source={}", self.source()),
            "--filter",
            "label=cofer.role=main",
        ]);
        for id in self.containers() {
            podman(&["rm", "-f", "-t", "0", &id]);
        }
        for network in networks.lines() {
            podman(&["network", "rm", network]);
        }
        if !std::thread::panicking() {
            self.assert_no_filter_ran();
            let cofer_paths = git(
                &self.repo,
                &[
                    "log",
                    "--all",
                    "--format=",
                    "--name-only",
                    "--",
                    ".cofer",
                    ":(icase).cofer",
                ],
            );
            assert!(
                cofer_paths.trim().is_empty(),
                "a branch holds Cofer's state: {cofer_paths}"
            );
        }
    }
}

/// The error object of a failed call (code, message, remediation, ...).
/// The error of a failed call, checked to read as sentences for a person:
/// no Rust debug text (`Some(128)`, `GitError::Denied(..)`) anywhere in it.
pub fn error_of(result: &rmcp::model::CallToolResult) -> Value {
    assert!(is_error(result), "expected an error, got {result:?}");
    let error = structured(result);
    let words = error.to_string();
    for debug in ["Some(", "None", "Err(", "Ok(", "::"] {
        assert!(!words.contains(debug), "`{debug}` in an error: {words}");
    }
    error
}

pub fn created(result: &rmcp::model::CallToolResult) -> Value {
    assert!(!is_error(result), "create failed: {result:?}");
    let body = text(result);
    let json_part = body.split("\n\nWARNING").next().unwrap();
    serde_json::from_str(json_part).unwrap()
}

async fn http_get(port: u16, path: &str) -> String {
    http_get_at("127.0.0.1", port, path).await
}

/// `GET path` at `host:port`, retried for 10 s until something answers.
pub async fn http_get_at(host: &str, port: u16, path: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut stream) = tokio::net::TcpStream::connect((host, port)).await {
            stream
                .write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut body = String::new();
            if stream.read_to_string(&mut body).await.is_ok() && !body.is_empty() {
                return body;
            }
        }
        assert!(
            Instant::now() < deadline,
            "nothing answered on {host}:{port}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn create_run_serve_destroy() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    std::fs::write(f.repo.join("scratch.txt"), "uncommitted\n").unwrap();
    let client = f.env.start().await;

    let r = client
        .call("environment_create", f.create_args("first-env"))
        .await;
    let env = created(&r);
    for key in [
        "id",
        "title",
        "config",
        "remote_ref",
        "checkout_command_to_share_with_user",
        "log_command_to_share_with_user",
        "diff_command_to_share_with_user",
    ] {
        assert!(env.get(key).is_some(), "{key} missing in {env}");
    }
    assert_eq!(env["id"], "first-env");
    assert_eq!(
        env["remote_ref"], "cofer/first-env",
        "a ref git log can read"
    );
    assert_eq!(env["config"]["workdir"], "/workdir");
    assert_eq!(env["config"]["base_image"], cofer_image());
    assert!(
        text(&r).contains("WARNING") && text(&r).contains("?? scratch.txt"),
        "dirty repo warning: {}",
        text(&r)
    );
    let status = git(&f.repo, &["status", "--porcelain"]);
    assert_eq!(
        status.trim(),
        "?? scratch.txt",
        ".cofer/ must stay out of git status"
    );
    assert!(
        f.repo
            .join(".cofer/worktrees/first-env/README.md")
            .is_file()
    );

    // Foreground command: exit code, output, commit on the env branch.
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args(
                "first-env",
                "echo served > index.html; cat README.md; echo warn >&2; exit 7",
            ),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let out = structured(&r);
    assert_eq!(out["exit_code"], 7);
    assert_eq!(out["stdout"], "hello\n");
    assert_eq!(out["stderr"], "warn\n");
    assert!(
        text(&r).starts_with("The command failed with exit code 7.\n")
            && text(&r).contains("stderr: warn")
            && text(&r).contains("exit code: 7"),
        "{}",
        text(&r)
    );
    let log = git(&f.repo, &["log", "--format=%s", "cofer/first-env"]);
    assert!(
        log.starts_with("run echo served"),
        "commit message is the explanation: {log}"
    );
    let on_remote = git(
        &f.repo,
        &[
            "--git-dir",
            ".git/cofer/remote.git",
            "log",
            "--format=%s",
            "cofer/first-env",
        ],
    );
    assert_eq!(on_remote, log, "the branch is pushed to the cofer remote");

    // The container runs with the minimal capability set (CHOWN,
    // DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, NET_BIND_SERVICE),
    // no new privileges, and the pids and memory limits.
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args(
                "first-env",
                "grep -E '^(CapEff|NoNewPrivs)' /proc/1/status; \
                 cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null",
            ),
        )
        .await;
    let out = structured(&r)["stdout"].as_str().unwrap().to_string();
    assert!(out.contains("CapEff:\t00000000000004fb"), "{out}");
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.lines().any(|l| l == "4096"), "pids limit: {out}");

    // The commands named in the response work.
    let diff = cofer(&f.repo, &["diff", "first-env"]);
    assert!(
        String::from_utf8_lossy(&diff.stdout).contains("+served"),
        "{diff:?}"
    );
    let log_cmd = cofer(&f.repo, &["log", "first-env"]);
    let log_text = String::from_utf8_lossy(&log_cmd.stdout);
    assert!(log_text.contains("run echo served"), "{log_cmd:?}");
    // Only the environment's commits, not the user's history (issue 42).
    assert!(!log_text.contains("    first\n"), "{log_text}");
    std::fs::remove_file(f.repo.join("scratch.txt")).unwrap();
    let checkout = cofer(&f.repo, &["checkout", "first-env"]);
    assert!(checkout.status.success(), "{checkout:?}");
    assert_eq!(
        std::fs::read_to_string(f.repo.join("index.html")).unwrap(),
        "served\n"
    );
    git(&f.repo, &["checkout", "--quiet", "main"]);

    // Background service with a published port.
    let mut args = f.run_args("first-env", "httpd -f -p 8080 -h /workdir");
    args["background"] = json!(true);
    args["ports"] = json!([8080]);
    // `httpd`, or the test plant's `trap` in front of it.
    let program = args["command"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let r = client.call("environment_run_cmd", args).await;
    assert!(!is_error(&r), "{r:?}");
    assert!(
        text(&r).starts_with("Command started in the background in NEW container. Endpoints are ")
    );
    let name = structured(&r)["container_name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        name.starts_with("cofer-first-env-") && name.ends_with(&format!("-{program}-1")),
        "a service is named after its environment and program: {name}"
    );
    let endpoint = &structured(&r)["endpoints"]["8080"];
    assert!(
        endpoint["environment_internal"]
            .as_str()
            .unwrap()
            .ends_with(":8080"),
        "{endpoint}"
    );
    let external = endpoint["host_external"].as_str().unwrap();
    let port: u16 = external
        .strip_prefix("tcp://127.0.0.1:")
        .unwrap()
        .parse()
        .unwrap();
    let page = http_get(port, "/index.html").await;
    assert!(page.contains("served"), "{page}");

    let log = std::fs::read_to_string(f.env.stderr_log()).unwrap();
    let record = log
        .lines()
        .find(|l| {
            l.contains("tool call")
                && l.contains("tool=environment_run_cmd")
                && l.contains("mode=\"background\"")
        })
        .unwrap_or_else(|| panic!("no background tool call record in\n{log}"));
    assert!(
        record.as_bytes()[..4].iter().all(u8::is_ascii_digit) && record.as_bytes()[10] == b'T',
        "ISO 8601: {record}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("tool=environment_run_cmd") && l.contains("mode=\"foreground\""))
    );

    let listed = client
        .call(
            "environment_list",
            json!({"environment_source": f.source()}),
        )
        .await;
    let listed: Value = serde_json::from_str(&text(&listed)).unwrap();
    assert_eq!(listed["environments"][0]["id"], "first-env");
    assert_eq!(listed["environments"][0]["services"], 1);

    // Destroy: nothing left.
    let r = client
        .call("environment_destroy", f.scoped("first-env"))
        .await;
    assert!(!is_error(&r), "{r:?}");
    let report = structured(&r);
    assert_eq!(report["id"], "first-env");
    assert_eq!(
        report["containers"].as_array().unwrap().len(),
        2,
        "{report}"
    );
    assert!(
        report["removed_paths"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().ends_with(".cofer/worktrees/first-env"))
    );
    assert_eq!(report["branch_deleted"], true);
    for c in report["containers"].as_array().unwrap() {
        assert_eq!(c["stop"], "terminated", "both stop on SIGTERM: {c}");
        assert_eq!(c["leftover_processes_killed"], 0);
    }
    assert!(
        f.containers().is_empty(),
        "containers left: {:?}",
        f.containers()
    );
    assert!(!f.repo.join(".cofer/worktrees/first-env").exists());
    assert!(
        git(&f.repo, &["branch", "--list", "cofer/*"])
            .trim()
            .is_empty()
    );
    assert!(!git(&f.repo, &["worktree", "list"]).contains("first-env"));

    let again = client
        .call("environment_destroy", f.scoped("first-env"))
        .await;
    let e = error_of(&again);
    assert_eq!(e["code"], "not_found");
    assert!(
        e["message"].as_str().unwrap().contains("will not help"),
        "{e}"
    );
    assert!(e["trace_id"].is_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_conflict_precondition_and_policy() {
    let Some(f) = Fixture::with_podman(&[], false).await else {
        return;
    };
    let client = f.env.start().await;
    let r = client
        .call("environment_create", f.create_args("one"))
        .await;
    let e = error_of(&r);
    assert_eq!(e["code"], "precondition_failed");
    assert!(
        e["remediation"].as_str().unwrap().contains("cofer init"),
        "{e}"
    );
    assert!(f.containers().is_empty());

    assert!(cofer(&f.repo, &["init"]).status.success());
    let again = cofer(&f.repo, &["init"]);
    assert!(
        again.status.success() && String::from_utf8_lossy(&again.stdout).contains("nothing to do"),
        "{again:?}"
    );
    assert_eq!(
        git(&f.repo, &["remote"]).trim(),
        "cofer",
        "init is idempotent"
    );
    f.create(&client, "one").await;
    let head = git(&f.repo, &["rev-parse", "cofer/one"]);
    let before = f.containers();

    let r = client
        .call("environment_create", f.create_args("one"))
        .await;
    let e = error_of(&r);
    assert_eq!(e["code"], "conflict");
    assert_eq!(f.containers(), before, "the old environment is untouched");
    assert_eq!(git(&f.repo, &["rev-parse", "cofer/one"]), head);
    let r = client
        .call("environment_run_cmd", f.run_args("one", "true"))
        .await;
    assert!(!is_error(&r), "the old environment still works: {r:?}");

    let mut replace = f.create_args("one");
    replace["allow_replace"] = json!(true);
    created(&client.call("environment_create", replace).await);
    assert_ne!(f.containers(), before, "replaced by a new container");

    // Arguments outside the schema, and a repository outside the policy.
    let mut bad_shell = f.run_args("one", "true");
    bad_shell["shell"] = json!("python");
    assert_eq!(
        error_of(&client.call("environment_run_cmd", bad_shell).await)["code"],
        "invalid_request"
    );
    let outside = tempfile::tempdir().unwrap();
    git(outside.path(), &["init", "--quiet"]);
    let r = client
        .call(
            "environment_create",
            json!({"environment_source": outside.path(), "title": "x", "image": cofer_image()}),
        )
        .await;
    let e = error_of(&r);
    assert_eq!(e["code"], "denied");
    assert!(e["message"].as_str().unwrap().contains("fs.write"), "{e}");
    let r = client
        .call("environment_run_cmd", f.run_args("no-such-env", "true"))
        .await;
    assert_eq!(error_of(&r)["code"], "not_found");

    client.call("environment_destroy", f.scoped("one")).await;
    assert!(f.containers().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn limit_of_live_environments() {
    let Some(mut f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    // Counted in this test's turn, so no other test's environment is coming or going.
    let running = podman(&[
        "ps",
        "-q",
        "--filter",
        "label=cofer.role=main",
        "--filter",
        "status=running",
    ])
    .lines()
    .count();
    let limit = (running + 1).to_string();
    f.env
        .host_vars
        .push(("COFER_MAX_ENVIRONMENTS".into(), limit));
    let client = f.env.start().await;
    f.create(&client, "a").await;
    let r = client.call("environment_create", f.create_args("b")).await;
    let e = error_of(&r);
    assert_eq!(e["code"], "limit_exceeded");
    assert!(
        e["remediation"]
            .as_str()
            .unwrap()
            .contains("COFER_MAX_ENVIRONMENTS"),
        "{e}"
    );
    assert!(
        !f.repo.join(".cofer/worktrees/b").exists(),
        "nothing made for the refused one"
    );
    client.call("environment_destroy", f.scoped("a")).await;
    f.create(&client, "b").await;
    client.call("environment_destroy", f.scoped("b")).await;
}

/// Processes on the host (container processes included) whose command
/// line contains `needle`.

#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_the_tree_in_the_container() {
    let Some(f) = Fixture::with_podman(&[("COHERRA_TIMEOUT_RUN", "1500")], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "slow").await;
    // A child that leaves its parent (setsid, re-parented) and one that stays.
    let command = "echo started; setsid sleep 4242 & sleep 4243; echo never";
    let started = Instant::now();
    let r = client
        .call("environment_run_cmd", f.run_args("slow", command))
        .await;
    let e = error_of(&r);
    assert_eq!(e["code"], "timeout");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(
        e["result"]["stdout"], "started\n",
        "output before the kill is kept: {e}"
    );
    assert!(e["remediation"].is_string() && e["step"].is_string());
    assert_eq!(
        e["result"]["exit_code"],
        Value::Null,
        "a killed command has no exit code: {e}"
    );
    assert!(
        e["result"]["signal"].as_str().unwrap().contains("SIGKILL"),
        "{e}"
    );
    assert!(
        text(&r).contains("started"),
        "the text carries the partial output: {}",
        text(&r)
    );
    for sleeper in ["sleep 4242", "sleep 4243"] {
        assert!(
            processes_with(sleeper).is_empty(),
            "`{sleeper}` survived the timeout"
        );
    }
    // The environment still works after the kill.
    let r = client
        .call("environment_run_cmd", f.run_args("slow", "echo ok"))
        .await;
    assert_eq!(structured(&r)["stdout"], "ok\n");
    client.call("environment_destroy", f.scoped("slow")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_podman_service_ends_the_command_and_the_next_one_reconnects() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "shot").await;
    let call = client
        .start_call(
            "environment_run_cmd",
            f.run_args("shot", "sleep 4245"),
            "shot",
        )
        .await;
    // The command runs; then the Podman service the host started for its
    // API calls dies under it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_with("sleep 4245").is_empty() {
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its socket is in a directory named after the host instance.
    let service = format!("mcp-host-podman-{}.", client.pid);
    let services = processes_with(&service);
    assert_eq!(
        services.len(),
        1,
        "the host's own Podman service: {services:?}"
    );
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", services[0])).unwrap();
    let socket = String::from_utf8_lossy(&cmdline)
        .split('\0')
        .find_map(|a| a.strip_prefix("unix://").map(std::path::PathBuf::from))
        .unwrap();
    let service_dir = socket.parent().unwrap().to_path_buf();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(services[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let r = Client::finish(call).await;
    let e = error_of(&r);
    assert_eq!(e["code"], "step_failed", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("stopped answering"),
        "{e}"
    );
    // Issue 54, item 6: the next call works, and the error says so.
    assert_eq!(e["retryable"], true, "{e}");
    // Its fate unknown, the command did not live on.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with("sleep 4245").is_empty() {
        assert!(Instant::now() < deadline, "the command outlived its call");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The next command starts the service again.
    let r = client
        .call("environment_run_cmd", f.run_args("shot", "echo again"))
        .await;
    assert_eq!(structured(&r)["stdout"], "again\n", "{r:?}");
    client.call("environment_destroy", f.scoped("shot")).await;
    // The host gone, its service and the socket's directory go too.
    drop(client);
    let deadline = Instant::now() + Duration::from_secs(10);
    while service_dir.exists() || !processes_with(&service).is_empty() {
        assert!(
            Instant::now() < deadline,
            "{} or its service outlived the host",
            service_dir.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A Podman service reached over TCP (`CONTAINER_HOST=tcp://…`; here on
/// loopback, started by the test) serves environments as a socket does.
#[tokio::test(flavor = "multi_thread")]
async fn a_tcp_container_host_serves_environments() {
    if !podman_ready() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("tcp://127.0.0.1:{port}");
    // Killed when the test ends, however it ends.
    let _service = tokio::process::Command::new("podman")
        .args(["system", "service", "--time=0", &address])
        .env("CONTAINERS_CONF", containers_conf())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the TCP service never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let f = Fixture::with_podman(&[("CONTAINER_HOST", &address)], true)
        .await
        .unwrap();
    let client = f.env.start().await;
    f.create(&client, "wire").await;
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("wire", "echo over tcp > t.txt; cat t.txt"),
        )
        .await;
    assert_eq!(structured(&r)["stdout"], "over tcp\n", "{r:?}");
    assert_eq!(git(&f.repo, &["show", "cofer/wire:t.txt"]), "over tcp\n");
    let r = client.call("environment_destroy", f.scoped("wire")).await;
    assert!(!is_error(&r), "{r:?}");
    assert!(f.containers().is_empty());
    // Only the test's own service was used: the host started none.
    assert!(processes_with(&format!("mcp-host-podman-{}.", client.pid)).is_empty());
}

/// Every command's exec session used to leave two `conmon` processes
/// behind for five minutes (Podman's cleanup delay); they end with it.
#[tokio::test(flavor = "multi_thread")]
async fn exec_sessions_leave_no_conmon_behind() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "reap").await;
    let id = podman(&["inspect", "--format", "{{.Id}}", &container_of(&f, "reap")]);
    let id = id.trim();
    let conmons = || {
        processes_with(id)
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("conmon"))
            })
            .count()
    };
    let before = conmons();
    for i in 0..5 {
        let r = client
            .call(
                "environment_run_cmd",
                f.run_args("reap", &format!("echo {i}")),
            )
            .await;
        assert_eq!(structured(&r)["exit_code"], 0, "{r:?}");
    }
    assert_eq!(conmons(), before, "conmon processes left by 5 execs");
}

/// The main container's name of environment `id`.
pub fn container_of(f: &Fixture, id: &str) -> String {
    podman(&[
        "ps",
        "--format",
        "{{.Names}}",
        "--filter",
        &format!("label=cofer.source={}", f.source()),
        "--filter",
        &format!("label=cofer.env={id}"),
        "--filter",
        "label=cofer.role=main",
    ])
    .trim()
    .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_cut_off_by_the_hosts_end_leaves_nothing_and_a_usable_environment() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    for (signal, n) in [
        (nix::sys::signal::Signal::SIGTERM, 4461),
        (nix::sys::signal::Signal::SIGKILL, 4462),
    ] {
        let client = f.env.start().await;
        if !f.containers().is_empty() {
            // The environment from the round before is reused.
        } else {
            f.create(&client, "cut").await;
        }
        let command = format!("echo partial > partial.txt; sleep {n}");
        let _call = client
            .start_call("environment_run_cmd", f.run_args("cut", &command), "cut")
            .await;
        let deadline = Instant::now() + Duration::from_secs(20);
        let partial = f.worktree("cut").join("partial.txt");
        while !partial.exists() || processes_with(&format!("sleep {n}")).is_empty() {
            assert!(Instant::now() < deadline, "the command never started");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Within 2 s the command's tree inside the container is gone.
        end_host_and_check_gone(client.pid, signal, &format!("sleep {n}")).await;
    }
    // The next host finds the environment as it was: runs, commits, destroys,
    // even past the lock a commit cut off mid-way leaves.
    std::fs::write(f.repo.join(".git/worktrees/cut/index.lock"), "").unwrap();
    let client = f.env.start().await;
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("cut", "cat partial.txt; echo more >> partial.txt"),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert_eq!(structured(&r)["stdout"], "partial\n", "{r:?}");
    assert!(structured(&r)["commit"].is_string(), "{r:?}");
    assert!(
        text(&r).contains("index.lock"),
        "the broken lock is reported: {r:?}"
    );
    let r = client.call("environment_destroy", f.scoped("cut")).await;
    assert!(!is_error(&r), "{r:?}");
    assert!(f.containers().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn build_output_and_huge_files_stay_out_of_commits() {
    let Some(f) = Fixture::with_podman(&[("COFER_MAX_FILE_MB", "5")], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "tidy").await;
    let command = "mkdir -p __pycache__ node_modules/left-pad && echo x > __pycache__/m.cpython-312.pyc \
                   && echo x > node_modules/left-pad/index.js && echo kept > kept.txt \
                   && head -c 6000000 /dev/zero > big.bin";
    let r = client
        .call("environment_run_cmd", f.run_args("tidy", command))
        .await;
    let out = structured(&r);
    let commit = out["commit"].as_str().expect("kept.txt was committed");
    let files = git(&f.repo, &["ls-tree", "-r", "--name-only", commit]);
    assert!(files.lines().any(|l| l == "kept.txt"), "{files}");
    for left_out in ["__pycache__", "node_modules", "big.bin"] {
        assert!(
            !files.contains(left_out),
            "{left_out} was committed: {files}"
        );
    }
    let warnings = out["warnings"].to_string();
    assert!(
        warnings.contains("big.bin") && warnings.contains("COFER_MAX_FILE_MB"),
        "{out}"
    );

    // A repository with its own .gitignore decides for itself.
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args(
                "tidy",
                "echo big.bin > .gitignore; echo y > node_modules/left-pad/index.js",
            ),
        )
        .await;
    let commit = structured(&r)["commit"]
        .as_str()
        .expect("a commit")
        .to_string();
    let files = git(&f.repo, &["ls-tree", "-r", "--name-only", &commit]);
    assert!(files.contains("node_modules/left-pad/index.js"), "{files}");

    // Destroy leaves nothing of the environment in the cofer remote's
    // object store: what only its branch held is pruned.
    let in_remote = |object: &str| {
        std::process::Command::new("git")
            .args([
                "--git-dir",
                ".git/cofer/remote.git",
                "cat-file",
                "-e",
                object,
            ])
            .current_dir(&f.repo)
            .status()
            .unwrap()
            .success()
    };
    assert!(in_remote(&commit), "the commit was pushed");
    let r = client.call("environment_destroy", f.scoped("tidy")).await;
    assert!(!is_error(&r), "{r:?}");
    assert!(
        !in_remote(&commit),
        "the destroyed branch's commit is still in the remote"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hundred_megabytes_of_output_in_bounded_memory() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "loud").await;
    // Warm up, then measure the host's peak memory over the big run only.
    client
        .call("environment_run_cmd", f.run_args("loud", "true"))
        .await;
    reset_peak_rss(client.pid);
    let (before, _) = rss_kib(client.pid);
    let r = client
        .call("environment_run_cmd", f.run_args("loud", "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 100000000; echo; echo last line"))
        .await;
    let (_, peak) = rss_kib(client.pid);
    let out = structured(&r);
    assert_eq!(out["stdout_bytes"], 100_000_000 + 11);
    assert_eq!(out["truncated"], true);
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.len() <= 64 * 1024 && stdout.ends_with("last line\n"));
    assert!(stdout.lines().count() <= 512);
    // The answer fits what clients show a model whole, and says how to
    // get more (issue 39, item 4).
    assert!(text(&r).len() <= 20_000, "{} bytes", text(&r).len());
    assert!(text(&r).contains("max_output_bytes"), "{}", text(&r));
    let mut more = f.run_args(
        "loud",
        "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -n 1000",
    );
    more["max_output_bytes"] = json!(65536);
    let r = client.call("environment_run_cmd", more).await;
    let out = structured(&r);
    assert_eq!(
        out["stdout"].as_str().unwrap().lines().count(),
        512,
        "{out}"
    );
    assert_eq!(out["lines_omitted"]["stdout"], 488, "{out}");
    // Issue 54, item 6: one line longer than what is kept keeps its end.
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args(
                "loud",
                "printf '%s' \"$(head -c 200000 /dev/zero | tr '\\0' x)\"; echo TAILMARK",
            ),
        )
        .await;
    let out = structured(&r);
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.ends_with("xxTAILMARK\n"), "{out}");
    assert_eq!(out["truncated"], true);
    // Issue 72, item 8: the same long line followed by another line kept
    // its end too (it was dropped whole: 5 bytes of a 16 KB budget).
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args(
                "loud",
                "printf '%s' \"$(head -c 200000 /dev/zero | tr '\\0' y)\"; echo LONGEND; echo short",
            ),
        )
        .await;
    let out = structured(&r);
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.ends_with("yyLONGEND\nshort\n"), "{out}");
    assert!(stdout.len() > 8_000, "{} bytes kept", stdout.len());
    let growth_mib = peak.saturating_sub(before) / 1024;
    assert!(
        growth_mib < 48,
        "host memory grew by {growth_mib} MiB for 100 MB of output"
    );
    // Output under 64 KB but over 512 lines is cut too, and says so
    // (issue 42: `truncated` was false).
    let r = client
        .call("environment_run_cmd", f.run_args("loud", "seq 600"))
        .await;
    let out = structured(&r);
    assert_eq!(out["truncated"], true, "{out}");
    assert_eq!(out["lines_omitted"]["stdout"], 88, "{out}");
    assert!(out["stdout"].as_str().unwrap().starts_with("89\n"));
    assert!(text(&r).contains("88 lines of stdout"), "{}", text(&r));
    // Issue 54, item 6: what was kept is what there was (2 KB), not 64 KB.
    assert!(
        text(&r).contains("the last 2 KB were kept") && !text(&r).contains("64 KB were kept"),
        "{}",
        text(&r)
    );
    client.call("environment_destroy", f.scoped("loud")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn environments_survive_a_host_restart() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    {
        let client = f.env.start().await;
        f.create(&client, "kept").await;
        client.service.cancel().await.unwrap();
    }
    let client = f.env.start().await;
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("kept", "echo after restart > note.txt; cat note.txt"),
        )
        .await;
    assert_eq!(structured(&r)["stdout"], "after restart\n", "{r:?}");
    let opened = client.call("environment_open", f.scoped("kept")).await;
    assert_eq!(created(&opened)["title"], "test env");

    // A container removed behind our back is recreated from the record.
    for id in f.containers() {
        podman(&["rm", "-f", "-t", "0", &id]);
    }
    let r = client
        .call("environment_run_cmd", f.run_args("kept", "cat note.txt"))
        .await;
    assert_eq!(structured(&r)["stdout"], "after restart\n", "{r:?}");
    // ... and the answer says what a new container loses.
    assert!(
        structured(&r)["warnings"].to_string().contains("recreated")
            && text(&r).contains("outside it is lost")
            && text(&r).contains("its setup commands ran again")
            && !text(&r).contains("Run the setup commands again"),
        "{r:?}"
    );
    client.call("environment_destroy", f.scoped("kept")).await;
    assert!(f.containers().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_not_in_local_storage_is_image_missing() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    let mut args = f.create_args("nowhere");
    args["image"] = json!("localhost/cofer-never-built:latest");
    let r = client.call("environment_create", args).await;
    let e = error_of(&r);
    assert_eq!(e["code"], "image_missing", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("podman pull localhost/cofer-never-built:latest")
            && message.contains("containers.pull"),
        "{message}"
    );
    assert!(!f.repo.join(".cofer/worktrees/nowhere").exists());
    // Issue 39, item 7: the text says the message once (the fields under
    // it leave out the code and message of its first line).
    assert_eq!(
        text(&r)
            .matches("podman pull localhost/cofer-never-built")
            .count(),
        1,
        "{}",
        text(&r)
    );
}

/// Issue 54, item 3: a default image whose registry cannot be reached is
/// a pull failure with the registry's reason and the ways around it, not
/// a Podman that is not there.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_registry_is_a_pull_failure_not_a_missing_podman() {
    // A registry on this machine that listens to nobody.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let image = format!("127.0.0.1:{port}/nowhere/base:1");
    let Some(f) = Fixture::with_podman(&[("COFER_DEFAULT_IMAGE", &image)], true).await else {
        return;
    };
    let client = f.env.start().await;
    let mut args = f.create_args("pull");
    args.as_object_mut().unwrap().remove("image");
    let r = client.call("environment_create", args).await;
    let e = error_of(&r);
    assert_eq!(e["code"], "image_pull_failed", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("`{image}` could not be pulled"))
            && message.contains("COFER_DEFAULT_IMAGE")
            && !message.contains("install Podman"),
        "{message}"
    );
    assert_eq!(e["retryable"], true, "{e}");
    // Podman itself is fine: the next environment is made at once.
    let r = client
        .call("environment_create", f.create_args("after"))
        .await;
    assert!(!is_error(&r), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn environments_of_other_machines_and_repositories_are_left_alone() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    // What a host on another machine made on the same Podman service, for
    // a repository at the same path; what this machine made for a
    // repository that was at this path before (removed, cloned again); and
    // for another repository: fault injection, made here by hand.
    let foreign = |env: &str, machine: &str, source: &str, repository: &str| {
        let id = podman(&[
            "run",
            "--detach",
            "--pull=never",
            "--label",
            "mcphost.plugin=cofer",
            "--label",
            &format!("mcphost.machine={machine}"),
            "--label",
            &format!("cofer.env={env}"),
            "--label",
            &format!("cofer.source={source}"),
            "--label",
            &format!("cofer.repository={repository}"),
            "--label",
            "cofer.role=main",
            &cofer_image(),
            "sleep",
            "600",
        ]);
        let id = id.trim().to_string();
        assert!(!id.is_empty(), "the foreign container did not start");
        id
    };
    // This machine as the host names it.
    let machine = ["/etc/machine-id", "/proc/sys/kernel/hostname"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .find(|id| !id.trim().is_empty())
        .unwrap();
    let theirs = foreign("theirs", "another-machine", &f.source(), "0123456789abcdef");
    let earlier = foreign("earlier", machine.trim(), &f.source(), "00000000deadbeef");
    let other = foreign(
        "other",
        machine.trim(),
        "/elsewhere/repo",
        "00000000cafef00d",
    );
    let client = f.env.start().await;
    // This repository's first environment gives it an id of its own, which
    // its containers carry.
    f.create(&client, "mine").await;
    let own_id = std::fs::read_to_string(f.repo.join(".git/cofer/id")).unwrap();
    let own_id = own_id.trim();
    assert_eq!(own_id.len(), 16, "{own_id}");
    let labels = podman(&[
        "inspect",
        "--format",
        "{{index .Config.Labels \"cofer.repository\"}}",
        &container_of(&f, "mine"),
    ]);
    assert_eq!(labels.trim(), own_id);
    let listed = client
        .call(
            "environment_list",
            json!({"environment_source": f.source()}),
        )
        .await;
    assert!(!is_error(&listed), "{listed:?}");
    assert!(text(&listed).contains("mine"), "{}", text(&listed));
    for env in ["theirs", "earlier", "other"] {
        assert!(!text(&listed).contains(env), "{}", text(&listed));
        let r = client.call("environment_destroy", f.scoped(env)).await;
        assert_eq!(error_of(&r)["code"], "not_found", "{r:?}");
    }
    for (container, whose) in [
        (&theirs, "another machine's"),
        (&earlier, "an earlier repository's"),
        (&other, "another repository's"),
    ] {
        let state = podman(&["inspect", "--format", "{{.State.Status}}", container]);
        assert_eq!(state.trim(), "running", "{whose} container was touched");
        podman(&["rm", "-f", "-t", "0", container]);
    }
    client.call("environment_destroy", f.scoped("mine")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_environments_at_once() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    let (a, b) = tokio::join!(
        client.call("environment_create", f.create_args("left")),
        client.call("environment_create", f.create_args("right")),
    );
    created(&a);
    created(&b);
    // Made at once in a new repository, both carry its one id (two ids
    // were written once, and destroy missed the container of the other).
    let id = std::fs::read_to_string(f.repo.join(".git/cofer/id")).unwrap();
    let labels = podman(&[
        "ps",
        "-a",
        "--format",
        "{{index .Labels \"cofer.repository\"}}",
        "--filter",
        &format!("label=cofer.source={}", f.source()),
    ]);
    assert!(
        labels.lines().count() == 2 && labels.lines().all(|l| l == id.trim()),
        "{labels} vs {id}"
    );
    let (a, b) = tokio::join!(
        client.call(
            "environment_run_cmd",
            f.run_args("left", "echo L > side.txt")
        ),
        client.call(
            "environment_run_cmd",
            f.run_args("right", "echo R > side.txt")
        ),
    );
    assert!(!is_error(&a) && !is_error(&b), "{a:?} {b:?}");
    assert_eq!(git(&f.repo, &["show", "cofer/left:side.txt"]), "L\n");
    assert_eq!(git(&f.repo, &["show", "cofer/right:side.txt"]), "R\n");
    let (a, b) = tokio::join!(
        client.call("environment_destroy", f.scoped("left")),
        client.call("environment_destroy", f.scoped("right")),
    );
    assert!(!is_error(&a) && !is_error(&b), "{a:?} {b:?}");
    assert!(
        f.containers().is_empty(),
        "left after both destroys answered {a:?} {b:?}:\n{}",
        f.describe_containers()
    );
}

/// Issue 42, item 15: two creates of one id at once: one makes it, the
/// other answers `conflict` (it was `step_failed`) and leaves it alone.
#[tokio::test(flavor = "multi_thread")]
async fn a_concurrent_create_of_the_same_id_is_a_conflict() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    let (a, b) = tokio::join!(
        client.call("environment_create", f.create_args("twin")),
        client.call("environment_create", f.create_args("twin")),
    );
    let (won, lost) = if is_error(&a) { (b, a) } else { (a, b) };
    created(&won);
    assert_eq!(error_of(&lost)["code"], "conflict", "{lost:?}");
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("twin", "echo still > here.txt"),
        )
        .await;
    assert!(!is_error(&r), "the environment that was made works: {r:?}");
    assert_eq!(git(&f.repo, &["show", "cofer/twin:here.txt"]), "still\n");
}

/// Issue 42, item 11: a background command that dies at start is
/// `service_exited` with its exit code and last output, not "started" with
/// endpoints (nor a wrong diagnosis of Podman), and nothing is left.
#[tokio::test(flavor = "multi_thread")]
async fn a_background_command_that_dies_at_start_says_so() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "dies").await;
    let before = f.containers().len();
    let mut args = f.run_args("dies", "echo getting ready; no-such-server --port 8080");
    args["background"] = json!(true);
    let r = client.call("environment_run_cmd", args).await;
    let e = error_of(&r);
    assert_eq!(e["code"], "service_exited", "{r:?}");
    assert_eq!(e["exit_code"], 127, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("exit code 127") && message.contains("getting ready"),
        "{message}"
    );
    assert_eq!(f.containers().len(), before, "its container is removed");
}

/// Issue 42, item 14: what a foreground command leaves running (`cmd &`,
/// `setsid`) ends when the command returns, and is counted; nothing is
/// left for destroy.
#[tokio::test(flavor = "multi_thread")]
async fn what_a_foreground_command_leaves_running_ends_with_it() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "strays").await;
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args(
                "strays",
                "sleep 301 >/dev/null 2>&1 & setsid sleep 302 >/dev/null 2>&1 & echo started",
            ),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert_eq!(structured(&r)["leftover_processes_killed"], 2, "{r:?}");
    assert!(text(&r).contains("background=true"), "{}", text(&r));
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("strays", "ps -o args | grep -c 'sleep 30[12]' || true"),
        )
        .await;
    assert_eq!(structured(&r)["stdout"], "0\n", "{r:?}");
    let r = client.call("environment_destroy", f.scoped("strays")).await;
    let leftovers: u64 = structured(&r)["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["leftover_processes_killed"].as_u64().unwrap())
        .sum();
    assert_eq!(leftovers, 0, "{r:?}");
}

/// Issue 42, item 12: a background command's state, exit code and output
/// can be read later, by the `container_name` its start returned.
#[tokio::test(flavor = "multi_thread")]
async fn a_background_commands_output_and_exit_are_read_later() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "jobs").await;
    let mut args = f.run_args("jobs", "echo hello from the job; sleep 1; echo bye; exit 3");
    args["background"] = json!(true);
    let started = client.call("environment_run_cmd", args).await;
    assert!(!is_error(&started), "{started:?}");
    let name = structured(&started)["container_name"]
        .as_str()
        .unwrap()
        .to_string();
    let mut logs_args = f.scoped("jobs");
    logs_args["service"] = json!(name);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let service = loop {
        let r = client
            .call("environment_service_logs", logs_args.clone())
            .await;
        assert!(!is_error(&r), "{r:?}");
        let service = structured(&r)["services"][0].clone();
        if service["state"] != "running" || std::time::Instant::now() > deadline {
            break service;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(service["exit_code"], 3, "{service}");
    let output = service["output"].as_str().unwrap();
    assert!(
        output.contains("hello from the job") && output.contains("bye"),
        "{output}"
    );
    logs_args["service"] = json!("no-such-service");
    let r = client.call("environment_service_logs", logs_args).await;
    let e = error_of(&r);
    assert_eq!(e["code"], "not_found", "{e}");
    assert!(e["remediation"].as_str().unwrap().contains(&name), "{e}");
}

/// Issue 42, item 15: an empty `command` runs the image's default
/// command, as container-use does (it was refused).
#[tokio::test(flavor = "multi_thread")]
async fn an_empty_command_runs_the_images_default_command() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let image = "localhost/cofer-test-default-cmd:latest";
    let made = std::process::Command::new("podman")
        .args([
            "create",
            "--name",
            "cofer-default-cmd-src",
            "localhost/cofer-test",
            "true",
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let committed = std::process::Command::new("podman")
        .args([
            "commit",
            "--change",
            r#"CMD ["sh", "-c", "echo the default command ran > ran.txt; echo said so"]"#,
            "cofer-default-cmd-src",
            image,
        ])
        .output()
        .unwrap();
    let _ = std::process::Command::new("podman")
        .args(["rm", "-f", "cofer-default-cmd-src"])
        .output();
    assert!(committed.status.success(), "{committed:?}");
    let client = f.env.start().await;
    let mut args = f.create_args("plain");
    args["image"] = json!(image);
    created(&client.call("environment_create", args).await);
    // Empty in plant mode too (run_args would wrap it in the plants).
    let mut empty = f.run_args("plain", "");
    empty["command"] = json!("");
    let r = client.call("environment_run_cmd", empty).await;
    assert!(!is_error(&r), "{r:?}");
    assert!(text(&r).contains("said so"), "{}", text(&r));
    assert_eq!(
        git(&f.repo, &["show", "cofer/plain:ran.txt"]),
        "the default command ran\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn force_destroy_of_a_locked_worktree() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "stuck").await;
    let mut stubborn = f.run_args("stuck", "trap '' TERM; while :; do sleep 1; done");
    stubborn["background"] = json!(true);
    assert!(!is_error(
        &client.call("environment_run_cmd", stubborn).await
    ));
    git(&f.repo, &["worktree", "lock", ".cofer/worktrees/stuck"]);
    let r = client.call("environment_destroy", f.scoped("stuck")).await;
    let e = error_of(&r);
    assert_eq!(e["code"], "step_failed");
    assert_eq!(e["step"], "remove the worktree");
    assert!(
        e["remediation"].as_str().unwrap().contains("force=true"),
        "{e}"
    );
    // Issue 54, item 6: it says why (locked), not that a process was
    // killed: no process ran.
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("locked"), "{message}");
    assert!(!message.contains("killed"), "{message}");
    // Issue 42, item 15: refused before anything was removed, so the
    // environment still works (its containers were gone, its record
    // `missing`).
    assert!(!f.containers().is_empty(), "nothing was removed");
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args("stuck", "echo still here"),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");

    let mut force = f.scoped("stuck");
    force["force"] = json!(true);
    let r = client.call("environment_destroy", force).await;
    assert!(!is_error(&r), "{r:?}");
    assert!(!structured(&r)["warnings"].as_array().unwrap().is_empty());
    assert!(!f.repo.join(".cofer/worktrees/stuck").exists());
    assert!(
        git(&f.repo, &["branch", "--list", "cofer/*"])
            .trim()
            .is_empty()
    );
    assert!(f.containers().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_broken_or_unreachable_podman_says_what_to_do() {
    if !require_program("git", "install git") {
        return;
    }
    let git_path = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("git"))
        .find(|p| p.is_file())
        .unwrap();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&git_path, bin.path().join("git")).unwrap();
    let path = bin.path().to_string_lossy().into_owned();
    let f = Fixture::new(&[("PATH", &path)], true).await;
    let client = f.env.start().await;
    let r = client
        .call("environment_create", f.create_args("nopod"))
        .await;
    let e = error_of(&r);
    assert_eq!(e["code"], "podman_unavailable", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("apt-get install podman"),
        "{e}"
    );
    assert!(!f.repo.join(".cofer/worktrees/nopod").exists());
    drop(client);

    // A Podman that cannot run here (fault injection: a fake CLI whose
    // service ends at once, saying what crun says on these machines).
    let fake = bin.path().join("podman");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'Error: OCI runtime error: crun: cgroups in hybrid mode not supported' >&2\nexit 125\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let client = f.env.start().await;
    let r = client
        .call("environment_create", f.create_args("broken"))
        .await;
    let e = error_of(&r);
    assert_eq!(e["code"], "podman_unavailable", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("cgroups in hybrid mode") && message.contains("CONTAINERS_CONF"),
        "what Podman said and what to do: {e}"
    );
    assert!(
        !f.repo.join(".cofer/worktrees/broken").exists(),
        "the failed create left its worktree"
    );
    assert!(
        git(&f.repo, &["branch", "--list", "cofer/*"])
            .trim()
            .is_empty()
    );
    drop(client);
    drop(f); // the next fixture waits for this one's turn

    // A Podman service that does not answer (the real CLI, pointed at a
    // socket nobody listens on) is not a missing Podman.
    if !require_program("podman", "install Podman (`apt-get install podman runc`)") {
        return;
    }
    let nobody = bin.path().join("nobody.sock");
    let f = Fixture::new(
        &[("CONTAINER_HOST", &format!("unix://{}", nobody.display()))],
        true,
    )
    .await;
    let client = f.env.start().await;
    let r = client
        .call("environment_create", f.create_args("down"))
        .await;
    let e = error_of(&r);
    assert_eq!(e["code"], "podman_unavailable", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("is not answering") && !message.contains("apt-get install"),
        "{message}"
    );
}

/// The files each commit of `branch` touched, by commit message (the test
/// plant's `.gitattributes` left out).
pub fn files_by_message(repo: &std::path::Path, branch: &str) -> Vec<(String, Vec<String>)> {
    git(repo, &["log", "--format=%H%x09%s", branch])
        .lines()
        .map(|line| {
            let (hash, subject) = line.split_once('\t').unwrap();
            let files = git(repo, &["show", "--name-only", "--format=", hash])
                .lines()
                // What plant mode writes in every command is not the command's.
                .filter(|f| !f.is_empty() && *f != ".gitattributes" && !f.starts_with("planted/"))
                .map(str::to_string)
                .collect();
            (subject.to_string(), files)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_commit_holds_what_its_own_command_wrote() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "busy").await;

    // Six commands at once on one environment, each writing its own file
    // (slowly, so that unserialised runs would overlap).
    let write = |i: usize| {
        let mut args = f.run_args("busy", &format!("sleep 0.3; echo {i} > f{i}.txt"));
        args["explanation"] = json!(format!("write f{i}"));
        client.call("environment_run_cmd", args)
    };
    let (r0, r1, r2, r3, r4, r5) =
        tokio::join!(write(0), write(1), write(2), write(3), write(4), write(5));
    for r in [&r0, &r1, &r2, &r3, &r4, &r5] {
        assert!(!is_error(r), "{r:?}");
        assert!(
            structured(r)["commit"].is_string(),
            "every command changed a file: {r:?}"
        );
    }
    let commits = files_by_message(&f.repo, "cofer/busy");
    for i in 0..6 {
        let subject = format!("write f{i}");
        let (_, files) = commits
            .iter()
            .find(|(s, _)| *s == subject)
            .unwrap_or_else(|| panic!("no commit `{subject}`: {commits:?}"));
        assert_eq!(files, &[format!("f{i}.txt")], "{subject}: {commits:?}");
    }

    // What a background service writes between commands is committed on its
    // own before the next command, never under it.
    let mut service = f.run_args("busy", "sleep 0.5; echo bg > bg.txt; exec sleep 600");
    service["background"] = json!(true);
    assert!(!is_error(
        &client.call("environment_run_cmd", service).await
    ));
    let written = f.worktree("busy").join("bg.txt");
    for _ in 0..600 {
        if written.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        written.exists(),
        "the background service never wrote bg.txt"
    );
    let mut next = f.run_args("busy", "echo fg > fg.txt");
    next["explanation"] = json!("write fg");
    let r = client.call("environment_run_cmd", next).await;
    assert!(
        structured(&r)["background_changes_commit"].is_string(),
        "{r:?}"
    );
    assert!(
        text(&r).contains("background services had written"),
        "{}",
        text(&r)
    );
    let commits = files_by_message(&f.repo, "cofer/busy");
    assert_eq!(
        commits[0],
        ("write fg".to_string(), vec!["fg.txt".to_string()]),
        "{commits:?}"
    );
    assert!(
        commits[1].0.starts_with("Background changes"),
        "{commits:?}"
    );
    assert_eq!(commits[1].1, ["bg.txt"], "{commits:?}");
    assert!(!is_error(
        &client.call("environment_destroy", f.scoped("busy")).await
    ));
}
