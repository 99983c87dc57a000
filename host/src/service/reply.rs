//! What a tool call answers ([`Reply`]): made from whatever the plugin
//! returned or how the call failed, fitted to the tool's output schema,
//! and logged once per call.

use std::time::Instant;

use serde_json::{Map, Value, json};

use crate::runtime::CallFailure;

/// What a tool call answers: MCP `content` (its text, then the blocks the
/// plugin added), optional `structuredContent`, and whether it is an error.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Reply {
    pub is_error: bool,
    pub text: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<rmcp::model::ContentBlock>,
    pub structured: Option<Value>,
}

impl Reply {
    /// The reply with every secret value masked ([`crate::scrub`]): what a
    /// plugin read or a command printed never carries one to the client.
    pub fn scrubbed(mut self) -> Reply {
        if !crate::scrub::active() {
            return self;
        }
        self.text = crate::scrub::scrubbed(self.text);
        if let Some(structured) = &mut self.structured {
            crate::scrub::scrub_json(structured);
        }
        if !self.content.is_empty() {
            let mut blocks = serde_json::to_value(&self.content).unwrap_or_default();
            crate::scrub::scrub_json(&mut blocks);
            if let Ok(blocks) = serde_json::from_value(blocks) {
                self.content = blocks;
            }
        }
        self
    }

    /// A tool error: `code: message` as text, the fields as structure.
    pub fn error(code: &str, message: &str, retryable: bool, details: Map<String, Value>) -> Reply {
        let mut fields = Map::new();
        fields.insert("code".into(), json!(code));
        fields.insert("message".into(), json!(message));
        fields.insert("retryable".into(), json!(retryable));
        fields.extend(details);
        Reply {
            is_error: true,
            text: format!("{code}: {message}"),
            content: Vec::new(),
            structured: Some(Value::Object(fields)),
        }
    }
}

impl Reply {
    /// An error whose fields do not match the tool's output schema moves
    /// them into the text (the `code: message` sentence, then the other
    /// fields as compact JSON: a one-line message is not said twice) and
    /// carries no `structuredContent`: a client that validates it would
    /// otherwise throw the whole error away.
    pub(super) fn fitted_to(self, schema: Option<&jsonschema::Validator>) -> Reply {
        match (&self.structured, schema) {
            (Some(fields), Some(schema)) if self.is_error && !schema.is_valid(fields) => Reply {
                is_error: true,
                text: format!(
                    "{}\n{}",
                    self.text.lines().next().unwrap_or_default(),
                    Value::Object(
                        fields
                            .as_object()
                            .into_iter()
                            .flatten()
                            // What the first line says whole is not said again.
                            .filter(|(key, value)| {
                                *key != "code"
                                    && (*key != "message"
                                        || value.as_str().is_some_and(|m| m.contains('\n')))
                            })
                            .map(|(key, value)| (key.clone(), value.clone()))
                            .collect()
                    )
                ),
                structured: None,
                ..self
            },
            _ => self,
        }
    }
}

/// The retryable `busy` answer of a call its plugin had no room for.
pub(super) fn busy_reply(busy: &crate::admission::Busy, trace_id: &str) -> Reply {
    let mut details = Map::new();
    details.insert("concurrency".into(), json!(busy.concurrency));
    details.insert("queue".into(), json!(busy.queue));
    details.insert("trace_id".into(), json!(trace_id));
    Reply::error("busy", &busy.to_string(), true, details)
}

/// Log a call's one `tool call` record and hand back its reply.
pub(super) fn finish(
    plugin: &str,
    exposed: &str,
    mode: &str,
    started: Instant,
    trace_id: &str,
    reply: Reply,
) -> Reply {
    let outcome = reply_code(&reply);
    tracing::info!(
        target: "call",
        plugin = %plugin, tool = %exposed, mode, duration_ms = started.elapsed().as_millis() as u64,
        duration_us = started.elapsed().as_micros() as u64,
        %outcome, %trace_id, "tool call"
    );
    reply
}

/// `ok`, or the error's code.
pub(super) fn reply_code(reply: &Reply) -> String {
    match &reply.structured {
        Some(s) if reply.is_error => s["code"].as_str().unwrap_or("error").to_string(),
        _ if reply.is_error => "error".into(),
        _ => "ok".into(),
    }
}

/// The most a tool's result (its text and structured content together) may
/// hold: every result waits in the host's memory until the client reads it.
const MAX_RESULT_BYTES: usize = 16 << 20;

pub(super) fn reply_from(
    outcome: Result<Result<crate::bindings::ToolOutput, crate::bindings::ToolError>, CallFailure>,
    has_output_schema: bool,
    trace_id: &str,
) -> Reply {
    let with_trace = |mut details: Map<String, Value>| {
        details.insert("trace_id".into(), json!(trace_id));
        details
    };
    match outcome {
        Ok(Ok(output))
            if output.text.len() + output.structured.as_ref().map_or(0, String::len)
                > MAX_RESULT_BYTES =>
        {
            Reply::error(
                "result_too_large",
                &format!(
                    "the tool's result holds {} bytes, more than the {} MiB a result may: ask for less \
                     (a narrower query, a smaller range), or have the plugin write it to a file",
                    output.text.len() + output.structured.as_ref().map_or(0, String::len),
                    MAX_RESULT_BYTES >> 20
                ),
                false,
                with_trace(Map::new()),
            )
        }
        Ok(Ok(output)) => {
            let structured = output
                .structured
                .as_deref()
                .and_then(|s| serde_json::from_str(s).ok());
            match structured {
                None if has_output_schema => Reply::error(
                    "invalid_plugin_output",
                    "the plugin declared an output schema but returned no structured result",
                    false,
                    with_trace(Map::new()),
                ),
                structured => Reply {
                    is_error: false,
                    text: output.text,
                    content: Vec::new(),
                    structured,
                },
            }
        }
        Ok(Err(e)) => {
            let details = match e.details.as_deref().map(serde_json::from_str::<Value>) {
                Some(Ok(Value::Object(map))) => map,
                _ => Map::new(),
            };
            let message = crate::wasi_errno::named(&e.message);
            Reply::error(&e.code, &message, e.retryable, with_trace(details))
        }
        Err(failure) => {
            let retryable = matches!(failure, CallFailure::Timeout(_) | CallFailure::Cancelled);
            Reply::error(
                failure.code(),
                &failure.to_string(),
                retryable,
                with_trace(Map::new()),
            )
        }
    }
}
