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
mod run;

use plugin_sdk::{Guest, Tool, ToolError, ToolOutput, notify, tool};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Args {
    prompt: String,
    timeout_ms: Option<u64>,
}

struct Pi;

impl Guest for Pi {
    fn list() -> Vec<Tool> {
        vec![tool(
            "pi.prompt",
            "Ask the pi coding agent to do something in the workspace. Its loop (turns, messages, tool executions) is \
             relayed as notifications while it runs; the result is the final answer, the stop reason, the tool calls \
             it made and the tokens it used.",
            json!({
                "type": "object",
                "properties": {
                    "prompt": {"type": "string", "minLength": 1, "description": "What pi should do or answer."},
                    "timeout_ms": {"type": "integer", "minimum": 1000, "description": "Give up after this long (default PI_TIMEOUT_MS, 600000)."},
                },
                "required": ["prompt"],
                "additionalProperties": false,
                "x-error-code": "invalid_request",
            }),
            Some(run::output_schema()),
        )
        .with_hints(plugin_sdk::Hints { read_only: false, destructive: true, idempotent: false, open_world: true })]
    }

    fn call(_name: String, arguments: String) -> Result<ToolOutput, ToolError> {
        let args: Args = plugin_sdk::parse_args(&arguments)?;
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
        let timeout_ms = args
            .timeout_ms
            .or_else(|| std::env::var("PI_TIMEOUT_MS").ok()?.parse().ok())
            .unwrap_or(600_000);
        let result = run::run(&args.prompt, &provider, &agent_dir, timeout_ms)?;
        Ok(plugin_sdk::structured_output(&result))
    }
}

/// A failure as the seed wants it: code, message, whether a retry may help.
pub fn failure(code: &str, message: impl Into<String>, retryable: bool) -> ToolError {
    let mut e = ToolError::new(code, message);
    e.retryable = retryable;
    e
}

plugin_sdk::export!(Pi);
