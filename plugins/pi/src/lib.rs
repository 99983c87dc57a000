//! `pi.prompt`: runs the pi coding agent on a prompt and relays its loop to
//! the MCP client as it happens (seed 003; the host plays Electron's main
//! process, the client its renderer).
//!
//! pi runs in RPC mode as a long-lived child of the host's `process`
//! capability: one `prompt` command on stdin, JSON events on stdout. Tool,
//! turn and message events are relayed as notifications; the result is the
//! final answer, stop reason, tool calls and token usage. Every failure is
//! `{code, message, retryable}`. The host ends every relayed stream with a
//! `call_end` event, whatever the outcome, cancellation included; on
//! cancellation it sends pi `abort` and kills it after a grace period.

mod provider;
mod provider_error;
mod relay;
mod run;

use plugin_sdk::{Hints, McpTool, TaskSupport, ToolError, ToolOutput, notify};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-error-code" = "invalid_request"))]
struct Args {
    /// What pi should do or answer.
    #[schemars(length(min = 1, max = 1_000_000))]
    prompt: String,
    /// Give up after this long (default PI_TIMEOUT_MS, 600000).
    #[schemars(range(min = 1000))]
    timeout_ms: Option<u64>,
}

/// `pi.prompt`.
struct Prompt;

impl McpTool for Prompt {
    const NAME: &'static str = "pi.prompt";
    // It can run for minutes: a client that takes tasks polls for it.
    const TASKS: TaskSupport = TaskSupport::Optional;
    const TITLE: Option<&'static str> = Some("Prompt the pi coding agent");
    const VIEW: Option<&'static str> = Some("run");
    const DESCRIPTION: &'static str = "Ask the pi coding agent to do something in the workspace. Its loop (turns, messages, tool executions) is \
        relayed as notifications while it runs; the result is the final answer, the stop reason, the tool calls \
        it made and the tokens it used.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    });
    type Args = Args;

    fn output_schema() -> Option<Value> {
        Some(run::output_schema())
    }

    fn call(args: Args) -> Result<ToolOutput, ToolError> {
        // Relayed first, so the client always sees a stream that the host's
        // `call_end` closes, refusals included.
        notify::event("run_start", &json!({"type": "run_start"}).to_string());
        let agent_dir = std::env::var("PI_AGENT_DIR").map_err(|_| {
            failure(
                "invalid_config",
                "PI_AGENT_DIR is not set: the host's policy gives it",
                false,
            )
        })?;
        let provider = provider::configured(&agent_dir)?;
        provider.write_config(&agent_dir)?;
        let asked = args
            .timeout_ms
            .or_else(|| std::env::var("PI_TIMEOUT_MS").ok()?.parse().ok())
            .unwrap_or(600_000);
        let limit = run::Limit::within_call(asked, plugin_sdk::call_timeout_ms());
        let result = run::run(&args.prompt, &provider, &agent_dir, &limit)?;
        Ok(plugin_sdk::structured_output(&result.within_budget()))
    }
}

/// A failure as the seed wants it: code, message, whether a retry may help.
pub fn failure(code: &str, message: impl Into<String>, retryable: bool) -> ToolError {
    let mut e = ToolError::new(code, message);
    e.retryable = retryable;
    e
}

plugin_sdk::export! { tools: [Prompt] }
plugin_sdk::view!("run", "pi run", "views/run.html");
