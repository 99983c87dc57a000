//! One pi run: start `pi --mode rpc`, send the prompt, read events until
//! the run is over, relay them, and build the result.
//!
//! When is it over? `agent_end` ends one attempt. If its last assistant
//! message stopped with `error`, pi may retry: `auto_retry_start` follows at
//! once and another attempt runs; `auto_retry_end {success: false}` or
//! silence means that was the last one. So a failed attempt is judged only
//! after the next event (or a short silence).

use plugin_sdk::process::{self, Child, LineEvent, StartRequest};
use plugin_sdk::text::{ANSWER_BYTES, fit_text};
use plugin_sdk::{ToolError, notify};
use serde::Serialize;
use serde_json::{Value, json};

use crate::failure;
use crate::provider::Provider;
use crate::provider_error::ProviderError;
use crate::relay::{Coalesce, relay};

/// How long to wait after a failed attempt for pi to announce a retry.
const RETRY_NOTICE_MS: u64 = 1_500;
/// After cancellation or `stop`: time for pi to abort before it is killed.
const GRACE_MS: u32 = 2_000;

/// The characters of a tool call's string argument kept in the answer: a
/// `write` carries a whole file, and clients show a model about 20 KB of
/// an answer whole.
const ARG_CHARS: usize = 200;

/// Every string in `value` cut to [`ARG_CHARS`] characters, saying how
/// many more it had.
fn shorten_strings(value: &mut Value) {
    match value {
        Value::String(text) => {
            let total = text.chars().count();
            if total > ARG_CHARS {
                let kept: String = text.chars().take(ARG_CHARS).collect();
                *text = format!("{kept}… ({} more characters)", total - ARG_CHARS);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(shorten_strings),
        Value::Object(map) => map.values_mut().for_each(shorten_strings),
        _ => {}
    }
}

pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The final answer."},
            "stop_reason": {"type": "string"},
            "tool_calls": {"type": "array", "items": {"type": "object", "properties": {
                "toolCallId": {"type": "string"}, "toolName": {"type": "string"},
                "args": {}, "result": {"type": "string", "description": "What the tool gave back, as text."},
                "isError": {"type": "boolean"}}}},
            "usage": {"type": "object", "properties": {
                "input": {"type": "integer"}, "output": {"type": "integer"},
                "cacheRead": {"type": "integer"}, "cacheWrite": {"type": "integer"},
                "totalTokens": {"type": "integer"}, "cost": {"type": "number"}}},
            "tool_calls_omitted": {"type": "integer", "description": "The earliest tool calls left out of tool_calls to keep this answer within 16 KB; each was relayed as a notification while it ran."},
            "turns": {"type": "integer"},
            "refused": {"type": "string", "description": "Present when the host's confinement refused a tool a file (Permission denied): what, and the policy key that would grant it."},
        },
        "required": ["text", "stop_reason", "tool_calls", "usage", "turns"],
    })
}

#[derive(Serialize, Default, Debug)]
pub struct Outcome {
    text: String,
    stop_reason: String,
    tool_calls: Vec<Value>,
    /// The earliest tool calls left out of the answer to keep it within
    /// [`ANSWER_BYTES`] (each was relayed as it ran).
    #[serde(skip_serializing_if = "is_zero")]
    tool_calls_omitted: usize,
    usage: Usage,
    turns: u64,
    /// What the host's confinement refused one of pi's tools, and the key
    /// that would grant it (the first such refusal).
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Outcome {
    fn size(&self) -> usize {
        serde_json::to_string(self).map_or(0, |s| s.len())
    }

    /// The answer within [`ANSWER_BYTES`]: the earliest tool calls go
    /// first (the latest stays), then the middle of the text (a long
    /// final answer keeps its start and end).
    pub fn within_budget(mut self) -> Outcome {
        let over = self.size().saturating_sub(ANSWER_BYTES);
        if over == 0 {
            return self;
        }
        let mut freed = 0;
        let calls = self
            .tool_calls
            .iter()
            .take(self.tool_calls.len().saturating_sub(1))
            .take_while(|call| {
                let enough = freed >= over;
                freed += call.to_string().len() + 1;
                !enough
            })
            .count();
        self.tool_calls.drain(..calls);
        self.tool_calls_omitted = calls;
        let whole = std::mem::take(&mut self.text);
        self.text = fit_text(
            &whole,
            |keep| keep * 3 / 4,
            |n| {
                format!(
                    "\n[… {n} bytes of pi's answer left out here; ask it for the part you need]\n"
                )
            },
            |text| {
                self.text = text.to_string();
                self.size()
            },
        );
        self
    }
}

#[derive(Serialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct Usage {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    total_tokens: u64,
    cost: f64,
}

/// What the stream has told so far.
#[derive(Default)]
struct Run {
    outcome: Outcome,
    /// The last assistant message's error, if it stopped with one.
    error: Option<String>,
    /// An attempt ended; waiting to hear whether pi retries.
    attempt_over: bool,
    /// Each running tool call's arguments, by id: pi gives them at the
    /// start of the call only.
    args: std::collections::HashMap<String, Value>,
}

/// How long pi may run: what was asked, cut to end (abort, grace and
/// answer included) before the host's limit for the whole call.
pub struct Limit {
    pub ms: u64,
    /// The call's limit, when it is what cut `ms` short.
    pub by_call: Option<u64>,
}

impl Limit {
    /// What stopping pi and answering need after the limit: the abort's
    /// grace, and a second.
    const ROOM_MS: u64 = GRACE_MS as u64 + 1_000;

    pub fn within_call(asked: u64, call: Option<u64>) -> Limit {
        match call.map(|c| c.saturating_sub(Self::ROOM_MS).max(1)) {
            Some(room) if room < asked => Limit {
                ms: room,
                by_call: call,
            },
            _ => Limit {
                ms: asked,
                by_call: None,
            },
        }
    }
}

pub fn run(
    prompt: &str,
    provider: &Provider,
    agent_dir: &str,
    limit: &Limit,
) -> Result<Outcome, ToolError> {
    let timeout_ms = limit.ms;
    let workspace = plugin_sdk::workspace();
    let program = std::env::var("PI_BIN")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "pi".into());
    let mut args = vec!["--mode".to_string(), "rpc".into(), "--no-session".into()];
    args.extend(provider.pi_args());
    let child = process::start(&StartRequest {
        program,
        args,
        cwd: workspace,
        env: provider.env(agent_dir),
        abort_input: Some(format!("{}\n", json!({"type": "abort"}))),
        grace_ms: GRACE_MS,
        stderr_tail_bytes: 16 * 1024,
    })
    .map_err(|e| match e {
        plugin_sdk::CapabilityError::NotFound(why) => failure(
            "pi_not_installed",
            format!("the pi CLI is not installed: {why}; install it with `npm install -g @mariozechner/pi-coding-agent` (or set PI_BIN)"),
            false,
        ),
        other => other.into(),
    })?;
    let command = json!({"id": "prompt-1", "type": "prompt", "message": prompt});
    child
        .write(&format!("{command}\n"))
        .map_err(|_| crashed(&child, None))?;

    let started = std::time::Instant::now();
    let mut run = Run::default();
    let mut updates = Coalesce::default();
    loop {
        let left = timeout_ms.saturating_sub(started.elapsed().as_millis() as u64);
        let wait = if run.attempt_over {
            left.min(RETRY_NOTICE_MS)
        } else {
            left
        };
        match child.read_line(wait.max(1)) {
            LineEvent::Line(line) => {
                let Ok(event) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if let Some(relayed) = relay(&event).and_then(|r| updates.pass(r)) {
                    notify::event(
                        event["type"].as_str().unwrap_or_default(),
                        &relayed.to_string(),
                    );
                }
                if let Some(done) = run.see(&event) {
                    // pi's work is done: dropping the child kills it at once,
                    // without waiting for it to shut down.
                    return done;
                }
            }
            LineEvent::Timeout if run.attempt_over => return run.finish(),
            LineEvent::Timeout => {
                let _ = child.stop();
                return Err(failure(
                    "timeout",
                    match limit.by_call {
                        Some(call) => format!(
                            "pi did not finish within {timeout_ms} ms; it was aborted and stopped. The \
                             call's own limit ({call} ms, limits.timeout_ms under [plugins.pi]) is shorter \
                             than the timeout asked for: raise it, or ask for less"
                        ),
                        None => format!(
                            "pi did not finish within {timeout_ms} ms; it was aborted and stopped"
                        ),
                    },
                    true,
                ));
            }
            LineEvent::Exited(status) if run.attempt_over => {
                let _ = status;
                return run.finish();
            }
            LineEvent::Exited(status) => return Err(crashed(&child, status.exit_code)),
            LineEvent::Cancelled(_) => {
                return Err(failure(
                    "cancelled",
                    "the call was cancelled; pi was aborted and stopped",
                    true,
                ));
            }
        }
    }
}

fn crashed(child: &Child, exit_code: Option<i32>) -> ToolError {
    let stderr = child.stderr_tail();
    let mut e = failure(
        "pi_crashed",
        format!(
            "pi ended ({}) before finishing: {}",
            plugin_sdk::exit_text(exit_code),
            stderr.trim()
        ),
        true,
    );
    if stderr.contains("No API key found") {
        e = failure(
            "provider_auth_failed",
            format!(
                "pi found no credentials for the provider: {}",
                stderr.trim()
            ),
            false,
        );
    } else if stderr.contains("not found. Use --list-models") {
        e = failure(
            "invalid_config",
            format!("pi does not know the model: {}", stderr.trim()),
            false,
        );
    }
    e.with_details(json!({"exit_code": exit_code, "stderr": stderr}))
}

impl Run {
    /// Take one event: record what the result needs, and say whether the
    /// run is over.
    fn see(&mut self, event: &Value) -> Option<Result<Outcome, ToolError>> {
        let kind = event["type"].as_str().unwrap_or_default();
        if kind == "response" {
            if event["success"] == false {
                let why = event["error"]
                    .as_str()
                    .unwrap_or("pi refused the prompt")
                    .to_string();
                return Some(Err(failure("pi_rejected", why, false)));
            }
            return None;
        }
        match kind {
            "turn_start" => self.outcome.turns += 1,
            "tool_execution_start" => {
                if let (Some(id), Some(args)) = (event["toolCallId"].as_str(), event.get("args")) {
                    self.args.insert(id.to_string(), args.clone());
                }
            }
            "tool_execution_end" => {
                let started = event["toolCallId"]
                    .as_str()
                    .and_then(|id| self.args.remove(id));
                let mut args = event
                    .get("args")
                    .cloned()
                    .or(started)
                    .unwrap_or(Value::Null);
                shorten_strings(&mut args);
                // What the tool gave back, as text (shortened like the
                // arguments): the timeline a person reads.
                let mut result: Value = event["result"]["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["text"].as_str())
                    .collect::<String>()
                    .into();
                if self.outcome.refused.is_none() {
                    self.outcome.refused = plugin_sdk::refused::refusal_hint(
                        "pi",
                        result.as_str().unwrap_or_default(),
                    );
                }
                shorten_strings(&mut result);
                self.outcome.tool_calls.push(json!({
                    "toolCallId": event["toolCallId"], "toolName": event["toolName"],
                    "args": args,
                    "result": result,
                    "isError": event["isError"].as_bool().unwrap_or(false),
                }))
            }
            "message_end" if event["message"]["role"] == "assistant" => {
                self.assistant(&event["message"])
            }
            "agent_start" | "auto_retry_start" => self.attempt_over = false,
            "agent_end" if self.error.is_none() => return Some(self.finish()),
            "agent_end" => self.attempt_over = true,
            "auto_retry_end" if event["success"] == false => {
                self.error = event["finalError"]
                    .as_str()
                    .map(String::from)
                    .or(self.error.take());
                return Some(self.finish());
            }
            _ => {}
        }
        None
    }

    fn assistant(&mut self, message: &Value) {
        let stop = message["stopReason"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        self.error = (stop == "error").then(|| {
            message["errorMessage"]
                .as_str()
                .unwrap_or("the provider failed")
                .to_string()
        });
        let text: String = message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == "text")
            .filter_map(|c| c["text"].as_str())
            .collect();
        if !text.is_empty() || stop != "toolUse" {
            self.outcome.text = text;
        }
        self.outcome.stop_reason = stop;
        let u = &message["usage"];
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        let usage = &mut self.outcome.usage;
        usage.input += n("input");
        usage.output += n("output");
        usage.cache_read += n("cacheRead");
        usage.cache_write += n("cacheWrite");
        usage.total_tokens += n("totalTokens");
        usage.cost += u["cost"]["total"].as_f64().unwrap_or(0.0);
    }

    /// The run is over: its answer, or the provider's error.
    fn finish(&mut self) -> Result<Outcome, ToolError> {
        let Some(why) = self.error.take() else {
            return Ok(std::mem::take(&mut self.outcome));
        };
        Err(match ProviderError::of(&why) {
            ProviderError::Credentials => failure(
                "provider_auth_failed",
                format!("the model provider refused the credentials: {why}"),
                false,
            )
            .with_details(json!({
                "stop_reason": "error",
                "remediation": "check the provider's API key (or log in again for an OAuth provider); retrying as it is will fail the same way",
            })),
            ProviderError::Refused(status) => failure(
                "provider_error",
                format!("the model provider refused the request ({status}): {why}"),
                false,
            )
            .with_details(json!({
                "stop_reason": "error", "status": status,
                "remediation": if status == 404 {
                    "check PI_MODEL (a model this provider serves) and PI_BASE_URL; asking again as it is will fail the same way"
                } else {
                    "read the provider's message: asking again as it is will fail the same way"
                },
            })),
            ProviderError::Transient { status, retry_after_ms } => failure(
                "provider_error",
                format!("the model provider failed after pi's retries: {why}"),
                true,
            )
            .with_details(json!({
                "stop_reason": "error", "status": status, "retry_after_ms": retry_after_ms,
            })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_attempt_waits_for_the_retry_verdict() {
        let mut run = Run::default();
        let error = json!({"type": "message_end", "message": {"role": "assistant", "stopReason": "error",
            "errorMessage": "Connection error.", "content": []}});
        assert!(run.see(&error).is_none());
        assert!(
            run.see(&json!({"type": "agent_end"})).is_none(),
            "not final yet"
        );
        assert!(run.attempt_over);
        assert!(
            run.see(&json!({"type": "auto_retry_start", "attempt": 1}))
                .is_none()
        );
        assert!(!run.attempt_over);
        let done = run.see(
            &json!({"type": "auto_retry_end", "success": false, "finalError": "Connection error."}),
        );
        let e = done.unwrap().unwrap_err();
        assert_eq!(e.code, "provider_error");
        assert!(e.retryable);
    }

    #[test]
    fn refused_credentials_are_not_retryable() {
        let mut run = Run::default();
        let done = run.see(&json!({"type": "auto_retry_end", "success": false,
            "finalError": "401 Incorrect API key provided: sk-***"}));
        let e = done.unwrap().unwrap_err();
        assert_eq!(e.code, "provider_auth_failed");
        assert!(!e.retryable);
    }

    #[test]
    fn a_good_run_collects_answer_tools_and_usage() {
        let mut run = Run::default();
        let usage = json!({"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 12, "cost": {"total": 0.5}});
        let events = [
            json!({"type": "turn_start"}),
            json!({"type": "message_end", "message": {"role": "assistant", "stopReason": "toolUse", "content": [], "usage": usage}}),
            json!({"type": "tool_execution_start", "toolCallId": "c1", "toolName": "bash", "args": {"command": "ls"}}),
            json!({"type": "tool_execution_end", "toolCallId": "c1", "toolName": "bash", "isError": false}),
            json!({"type": "turn_start"}),
            json!({"type": "message_end", "message": {"role": "assistant", "stopReason": "stop",
                "content": [{"type": "text", "text": "All done."}], "usage": usage}}),
        ];
        for e in &events {
            assert!(run.see(e).is_none());
        }
        let outcome = run.see(&json!({"type": "agent_end"})).unwrap().unwrap();
        assert_eq!(outcome.text, "All done.");
        assert_eq!(outcome.stop_reason, "stop");
        assert_eq!(outcome.turns, 2);
        assert_eq!(outcome.tool_calls[0]["toolCallId"], "c1");
        assert_eq!(
            outcome.tool_calls[0]["args"],
            json!({"command": "ls"}),
            "the start's arguments"
        );
        assert_eq!(outcome.usage.total_tokens, 24);
    }

    #[test]
    fn a_long_run_answers_within_the_budget() {
        let small = Outcome {
            text: "Done.".into(),
            tool_calls: vec![json!({"toolCallId": "c0"})],
            ..Outcome::default()
        };
        assert_eq!(small.within_budget().tool_calls_omitted, 0);
        let calls: Vec<Value> = (0..300)
            .map(|i| json!({"toolCallId": format!("c{i}"), "toolName": "bash", "args": {"command": "x".repeat(200)}}))
            .collect();
        let outcome = Outcome {
            text: format!("START\n{}\nEND", "\"quoted\" line\n".repeat(5000)),
            tool_calls: calls,
            ..Outcome::default()
        }
        .within_budget();
        assert!(outcome.size() <= ANSWER_BYTES, "{}", outcome.size());
        assert_eq!(outcome.tool_calls.len(), 1, "the last call stays");
        assert_eq!(outcome.tool_calls[0]["toolCallId"], "c299");
        assert_eq!(outcome.tool_calls_omitted, 299);
        assert!(outcome.text.starts_with("START\n") && outcome.text.ends_with("\nEND"));
        assert!(outcome.text.contains("bytes of pi's answer left out here"));
        // Only as many calls go as make room.
        let calls: Vec<Value> = (0..100)
            .map(|i| json!({"toolCallId": format!("c{i}"), "args": {"command": "x".repeat(200)}}))
            .collect();
        let outcome = Outcome {
            tool_calls: calls,
            ..Outcome::default()
        }
        .within_budget();
        assert!(outcome.size() <= ANSWER_BYTES);
        assert!(outcome.size() > ANSWER_BYTES - 300, "{}", outcome.size());
        assert_eq!(outcome.tool_calls.len() + outcome.tool_calls_omitted, 100);
    }

    #[test]
    fn long_tool_arguments_are_cut_in_the_answer() {
        let mut args = json!({"path": "a.txt", "content": "é".repeat(5000), "n": 3});
        shorten_strings(&mut args);
        assert_eq!(args["path"], "a.txt");
        assert_eq!(args["n"], 3);
        let content = args["content"].as_str().unwrap();
        assert!(content.starts_with(&"é".repeat(ARG_CHARS)));
        assert!(content.ends_with("… (4800 more characters)"), "{content}");
    }
}
