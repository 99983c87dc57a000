//! The copilot.chat bridge's overhead: `cargo bench -p host --bench copilot`
//! (after scripts/build-plugins; the CLI from $COPILOT_CLI or PATH).
//!
//! The real CLI answers from the mock OpenAI-compatible server on
//! 127.0.0.1 (bring-your-own-key mode). Runs alternate between `copilot -p
//! ... --model ... --no-color` started directly and the same through
//! `copilot.chat` over MCP stdio. The CLI's own time varies by tens of ms
//! from run to run, so besides the two medians the overhead is also taken
//! per call: the MCP round trip minus the CLI's run time as the host's
//! timebox measured it (`duration_ms`).

mod common;
#[path = "../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "../../tests/e2e/mock_llm.rs"]
#[allow(dead_code)]
mod mock_llm;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{ms, percentile};
use harness::{Env, is_error, structured};
use mock_llm::{MODEL, MockLlm, Script};
use serde_json::json;

const RUNS: usize = 15;

#[tokio::main]
async fn main() {
    let Some(cli) = std::env::var_os("COPILOT_CLI")
        .map(PathBuf::from)
        .filter(|p| p.exists())
    else {
        eprintln!(
            "set COPILOT_CLI to the copilot executable (npm install --prefix DIR @github/copilot)"
        );
        return;
    };
    let mock = MockLlm::start(Script::Answer {
        text: "benchmark answer".into(),
        tool_first: None,
    })
    .await;
    let mut env = Env::new(&["copilot"], "");
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let cache = env.dir.path().join("cache-xdg");
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        cli.parent().unwrap().display()
    );
    let models = env.workspace.join("models.json");
    std::fs::write(&models, json!({"models": [MODEL]}).to_string()).unwrap();
    let vars = [
        ("PATH", path.clone()),
        ("HOME", home.to_string_lossy().into_owned()),
        ("XDG_CACHE_HOME", cache.to_string_lossy().into_owned()),
        ("COPILOT_OFFLINE", "true".into()),
        ("COPILOT_PROVIDER_BASE_URL", mock.base_url()),
        ("COPILOT_PROVIDER_API_KEY", "k".into()),
        ("NO_COLOR", "1".into()),
    ];
    env.host_vars
        .extend(vars.iter().map(|(k, v)| (k.to_string(), v.clone())));
    env.host_vars.push((
        "COPILOT_MODELS_FILE".into(),
        models.to_string_lossy().into_owned(),
    ));
    let client = env.start().await;

    let direct = || {
        let started = Instant::now();
        let out = std::process::Command::new(&cli)
            .args(["-p", "Say hello", "--model", MODEL, "--no-color"])
            .env_clear()
            .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
            .current_dir(&env.workspace)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        started.elapsed()
    };
    // Warm up: the first run unpacks the CLI.
    direct();
    client
        .call("copilot.chat", json!({"input": "Say hello"}))
        .await;

    let (mut plain, mut bridged, mut overhead) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        plain.push(direct());
        let started = Instant::now();
        let r = client
            .call("copilot.chat", json!({"input": "Say hello"}))
            .await;
        let round_trip = started.elapsed();
        assert!(!is_error(&r), "{r:?}");
        let cli_ms = structured(&r)["duration_ms"].as_u64().unwrap();
        bridged.push(round_trip);
        overhead.push(round_trip.saturating_sub(Duration::from_millis(cli_ms)));
    }
    println!(
        "copilot -p directly ({RUNS} runs): median {}",
        ms(percentile(&mut plain, 0.5))
    );
    println!(
        "copilot.chat over MCP ({RUNS} runs): median {}",
        ms(percentile(&mut bridged, 0.5))
    );
    println!(
        "bridge overhead per call (round trip minus the CLI's run time): median {}, max {}",
        ms(percentile(&mut overhead, 0.5)),
        ms(percentile(&mut overhead, 1.0))
    );
}
