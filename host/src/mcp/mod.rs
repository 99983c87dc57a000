//! The MCP front: rmcp's server handler ([`handler`]), one per session (stdio has one,
//! HTTP one per client session or stateless request). Lists the catalog's
//! tools, runs calls through the [`Service`], forwards progress and log
//! records of a call to the client in order, relays a call's questions
//! (elicitation, sampling) to the client, and announces changes (the tool
//! list, resource lists, subscribed resources): to 2026-07-28 clients on
//! their `subscriptions/listen` stream, to older ones as notifications
//! after `initialized`.

// MCP logging is deprecated by SEP-2577 but is what today's clients speak;
// the issue asks for logging notifications.
#![allow(deprecated)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, InputResponses, Tool};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::caps::notify::Change;
use crate::client::Level;

mod handler;
mod link;
mod malformed;
mod prompts;
mod rounds;
mod tasks;
pub mod unread;

use crate::service::{AskFailure, Reply, Service};
use link::{Levels, McpLink, level_of};
use rounds::{Round, Rounds};
use tasks::Tasks;

/// How long a client may keep a list without asking again: lists change
/// only when plugins do, and subscribers hear of that at once.
const LIST_TTL_MS: u64 = 60_000;

/// Requests that outlive the request that made them, kept for every
/// handler of a host (HTTP makes one per request): calls waiting for a
/// 2026-07-28 client's answer, and calls gone on as tasks.
#[derive(Default)]
pub struct Unfinished {
    rounds: Arc<Rounds>,
    tasks: Tasks,
}

#[derive(Clone)]
pub struct McpFront {
    service: Arc<Service>,
    unfinished: Arc<Unfinished>,
    /// The lowest level of log record the client wants (`logging/setLevel`).
    min_level: Arc<Mutex<Level>>,
    /// The resources this session subscribed to (`resources/subscribe`).
    subscribed: Arc<Mutex<HashSet<String>>>,
    /// Cancelled when the session's handler is dropped: what was started
    /// for the session (its tool-change forwarder) ends with it.
    session: CancellationToken,
    _session_guard: Arc<DropGuard>,
}

impl McpFront {
    pub fn new(service: Arc<Service>, unfinished: Arc<Unfinished>) -> Self {
        let session = CancellationToken::new();
        McpFront {
            service,
            unfinished,
            min_level: Arc::new(Mutex::new(Level::Info)),
            subscribed: Default::default(),
            _session_guard: Arc::new(session.clone().drop_guard()),
            session,
        }
    }

    /// The log level a call's records are sent at: a 2026-07-28 request
    /// asks in its `_meta` (none asked: none sent), older sessions set it
    /// once with `logging/setLevel`.
    fn levels(&self, context: &RequestContext<RoleServer>) -> Levels {
        let per_request = context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        if per_request {
            Levels::Request(context.meta.log_level().map(level_of))
        } else {
            Levels::Session(self.min_level.clone())
        }
    }
}

/// A failed resource read or prompt as its MCP error: the client's mistake
/// (nothing by that name: `not_found`'s kind; a bad argument: invalid
/// params) or else the plugin's or the host's (internal).
fn asked_error(
    failure: AskFailure,
    data: Value,
    not_found: fn(String, Option<Value>) -> McpError,
) -> McpError {
    let data = Some(data);
    match failure.code.as_str() {
        "not_found" | "NOT_FOUND" | "unknown_scheme" => not_found(failure.message, data),
        "invalid_request" | "invalid_argument" | "INVALID_ARGUMENT" => {
            McpError::invalid_params(failure.message, data)
        }
        _ => McpError::internal_error(failure.message, data),
    }
}

/// Tell of each change with `notify` until `ended` or until `notify`
/// says the client is gone (false).
async fn forward_changes<F: Future<Output = bool>>(
    mut changes: broadcast::Receiver<Change>,
    ended: impl Future<Output = ()>,
    notify: impl Fn(Change) -> F,
) {
    tokio::pin!(ended);
    loop {
        tokio::select! {
            () = &mut ended => return,
            change = changes.recv() => {
                let change = match change {
                    Ok(change) => change,
                    // Missed some: the lists may have changed.
                    Err(broadcast::error::RecvError::Lagged(_)) => Change::Tools,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if !notify(change).await {
                    return;
                }
            }
        }
    }
}

impl McpFront {
    /// A 2026-07-28 request, run in rounds: the parked one `state` names,
    /// given the client's answers, or else a new one that `run` starts;
    /// until it ends or asks the client something.
    #[allow(clippy::too_many_arguments)]
    async fn in_rounds(
        &self,
        what: String,
        state: Option<&str>,
        given: Option<InputResponses>,
        run: rounds::Run,
        link: &Arc<McpLink>,
        context: &RequestContext<RoleServer>,
        late: Option<rounds::Lateness>,
    ) -> Result<Round, McpError> {
        let capabilities = context.meta.client_capabilities();
        let rounds = &self.unfinished.rounds;
        let running = match state {
            Some(state) => {
                rounds.resume(&what, state, given.as_ref(), link.clone(), capabilities)?
            }
            None => rounds.start(what, run, link.clone(), capabilities, given),
        };
        Ok(running.round(rounds, &context.ct, late).await)
    }

    /// The MCP `instructions`: one line on what serves the tools, then each
    /// plugin's own instructions under its name.
    fn instructions(&self) -> String {
        let mut text = String::from(
            "Tools are served by sandboxed WebAssembly plugins; each tool's description says what it does.",
        );
        for (plugin, theirs) in self.service.catalog().instructions() {
            text.push_str(&format!("\n\n## {plugin}\n\n{theirs}"));
        }
        text
    }
}

/// A tool as clients see it.
fn served_tool(name: &str, def: &crate::catalog::ToolDef) -> Tool {
    let mut tool = Tool::new(
        name.to_string(),
        def.description.clone(),
        Arc::new(def.input_schema.clone()),
    );
    if let Some(output) = &def.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(output.clone()));
    }
    tool.annotations = def.annotations.clone();
    tool.title = def.annotations.as_ref().and_then(|a| a.title.clone());
    tool.icons = def.icons.clone();
    tool
}

/// Whether a call ended with the plugin's `unsupported` error (it could
/// not do without an answer the client cannot give).
fn gave_up_unsupported(reply: &Reply) -> bool {
    reply.is_error
        && reply
            .structured
            .as_ref()
            .is_some_and(|s| s["code"] == "unsupported")
}

/// MCP's error for a request that needs client capabilities not declared
/// (`-32021`, naming them).
fn missing_capabilities(needed: Vec<Value>) -> McpError {
    let mut required = serde_json::Map::new();
    for capability in needed {
        if let Value::Object(c) = capability {
            required.extend(c);
        }
    }
    let required = serde_json::from_value(Value::Object(required)).unwrap_or_default();
    McpError::missing_required_client_capability(required)
}

/// The reply's text, unless it is empty and blocks were added, then the
/// blocks.
/// `result`, counted against what HTTP clients have not read yet, or a
/// short error when that is full ([`unread`]).
fn held_for_reading(
    result: CallToolResult,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let ledger = context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Arc<unread::Ledger>>());
    let Some(ledger) = ledger else {
        return result;
    };
    let bytes = serde_json::to_vec(&result).map_or(0, |json| json.len());
    let why = match ledger.hold(&tasks::client_of(context), bytes) {
        Ok(()) => return result,
        Err(unread::Full::Client(waiting)) => format!(
            "{} MiB of this client's earlier answers still wait to be read (a client may leave \
             {} MiB unread)",
            waiting >> 20,
            unread::MAX_UNREAD_PER_CLIENT >> 20
        ),
        Err(unread::Full::Host(waiting)) => format!(
            "{} MiB of earlier answers still wait for HTTP clients that have not read them \
             (the most the host keeps is {} MiB)",
            waiting >> 20,
            unread::MAX_UNREAD_BYTES >> 20
        ),
    };
    to_result(Reply::error(
        "clients_not_reading",
        &format!(
            "this result ({bytes} bytes) is dropped: {why}; read those responses, or end the \
             connections that stopped reading"
        ),
        true,
        serde_json::Map::new(),
    ))
}

fn to_result(reply: Reply) -> CallToolResult {
    let mut content = Vec::with_capacity(1 + reply.content.len());
    if !reply.text.is_empty() || reply.content.is_empty() {
        content.push(ContentBlock::text(reply.text));
    }
    content.extend(reply.content);
    let mut result = if reply.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = reply.structured;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: &str) -> AskFailure {
        AskFailure {
            code: code.into(),
            message: "m".into(),
        }
    }

    #[test]
    fn asked_errors_say_whose_mistake_it_was() {
        let code = |c: &str, not_found: fn(String, Option<Value>) -> McpError| {
            asked_error(failure(c), Value::Null, not_found).code
        };
        let resource = McpError::resource_not_found;
        assert_eq!(
            code("not_found", resource),
            McpError::resource_not_found("", None).code
        );
        assert_eq!(
            code("unknown_scheme", resource),
            McpError::resource_not_found("", None).code
        );
        // A prompt nobody offers is invalid params.
        assert_eq!(
            code("NOT_FOUND", McpError::invalid_params),
            McpError::invalid_params("", None).code
        );
        for bad in ["invalid_request", "invalid_argument", "INVALID_ARGUMENT"] {
            assert_eq!(
                code(bad, resource),
                McpError::invalid_params("", None).code,
                "{bad}"
            );
        }
        assert_eq!(
            code("plugin_trapped", resource),
            McpError::internal_error("", None).code
        );
    }
}
