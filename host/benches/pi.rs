//! pi.prompt benchmarks: `cargo bench -p host --bench pi` (after
//! scripts/build-plugins; pi from $PI_CLI).
//!
//! The real pi (RPC mode) answers from the mock OpenAI-compatible server on
//! 127.0.0.1 with one tool call and then text. Measured per run, alternating:
//! - pi driven directly (spawn, send the prompt, read events to
//!   `agent_end`) against the same through `pi.prompt` over MCP stdio;
//! - from tools/call to the first relayed event (`run_start`, sent by the
//!   plugin) and to pi's own first event (`agent_start`).

mod common;
#[path = "../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "../../tests/e2e/mock_llm.rs"]
#[allow(dead_code)]
mod mock_llm;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{ms, percentile};
use harness::{Client, Env, Note, is_error};
use mock_llm::{MODEL, MockLlm, Script};
use serde_json::json;

const RUNS: usize = 20;

#[tokio::main]
async fn main() {
    let Some(pi) = std::env::var_os("PI_CLI")
        .map(PathBuf::from)
        .filter(|p| p.exists())
    else {
        eprintln!(
            "set PI_CLI to the pi executable (npm install --prefix DIR @mariozechner/pi-coding-agent)"
        );
        return;
    };
    let mock = MockLlm::start(Script::Answer {
        text: "All done.".into(),
        tool_first: Some(("bash".into(), json!({"command": "true"}).to_string())),
    })
    .await;
    let mut env = Env::new(&["pi"], "");
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        pi.parent().unwrap().display()
    );
    for (k, v) in [
        ("PATH", path.clone()),
        ("HOME", home.to_string_lossy().into_owned()),
        ("PI_PROVIDER", "custom".into()),
        ("PI_BASE_URL", mock.base_url()),
        ("PI_MODEL", MODEL.into()),
        ("PI_API_KEY", "k".into()),
    ] {
        env.host_vars.push((k.into(), v));
    }
    let client = env.start().await;
    // The plugin writes pi's config on its first call; the direct runs use it too.
    let through_host = async |client: &Client| {
        let started = Instant::now();
        let handle = client
            .start_call(
                "pi.prompt",
                json!({"prompt": "Run a tool, then answer"}),
                "b",
            )
            .await;
        let first = wait_for(client, "run_start")
            .await
            .then(|| started.elapsed());
        let agent = wait_for(client, "agent_start")
            .await
            .then(|| started.elapsed());
        let result = Client::finish(handle).await;
        assert!(!is_error(&result), "{result:?}");
        client.drain_notes().await;
        (started.elapsed(), first.unwrap(), agent.unwrap())
    };
    through_host(&client).await;
    let agent_dir = env.cache.join("plugins/pi/agent");
    let direct = || {
        let started = Instant::now();
        let mut child = std::process::Command::new(&pi)
            .args([
                "--mode",
                "rpc",
                "--no-session",
                "--provider",
                "custom",
                "--model",
                &format!("custom/{MODEL}"),
            ])
            .env_clear()
            .env("PATH", &path)
            .env("HOME", &home)
            .env("PI_CODING_AGENT_DIR", &agent_dir)
            .env("PI_PROVIDER_API_KEY", "k")
            .current_dir(&env.workspace)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(
            stdin,
            "{}",
            json!({"type": "prompt", "message": "Run a tool, then answer"})
        )
        .unwrap();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            if line.unwrap().contains("\"type\":\"agent_end\"") {
                break;
            }
        }
        let elapsed = started.elapsed();
        let _ = child.kill();
        let _ = child.wait();
        elapsed
    };
    direct();

    let (mut plain, mut hosted, mut first, mut agent) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut paired = Vec::new();
    for _ in 0..RUNS {
        let d = direct();
        plain.push(d);
        let (total, to_first, to_agent) = through_host(&client).await;
        paired.push(total.as_secs_f64() - d.as_secs_f64());
        hosted.push(total);
        first.push(to_first);
        agent.push(to_agent);
    }
    let (p, h) = (percentile(&mut plain, 0.5), percentile(&mut hosted, 0.5));
    println!(
        "pi --mode rpc directly, prompt to agent_end ({RUNS} runs): median {}",
        ms(p)
    );
    println!(
        "pi.prompt over MCP, tools/call to result: median {}, overhead {}",
        ms(h),
        ms(h.saturating_sub(p))
    );
    paired.sort_by(f64::total_cmp);
    println!(
        "paired difference (hosted minus direct, run by run): median {:.1} ms, from {:.1} to {:.1} ms",
        paired[RUNS / 2] * 1000.0,
        paired[0] * 1000.0,
        paired[RUNS - 1] * 1000.0
    );
    println!(
        "tools/call to the first relayed event (run_start): median {}",
        ms(percentile(&mut first, 0.5))
    );
    println!(
        "tools/call to pi's first event (agent_start) relayed: median {}",
        ms(percentile(&mut agent, 0.5))
    );
}

async fn wait_for(client: &Client, event: &str) -> bool {
    let needle = format!("\"event\":\"{event}\"");
    client
        .wait_note(Duration::from_secs(30), |n| {
            matches!(n, Note::Progress(p) if p.message.as_deref().is_some_and(|m| m.contains(&needle)))
        })
        .await
        .is_some()
}
