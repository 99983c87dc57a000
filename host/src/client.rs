//! The link from a running call back to whoever asked for it: an MCP client
//! (progress and logging notifications, questions for the person or its
//! model) or the shell (`host call`, stderr).

// Sampling is deprecated by SEP-2577 but is what today's clients speak;
// the issue asks for it.
#![allow(deprecated)]

use std::future::Future;
use std::pin::Pin;

use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ListRootsResult,
};
use serde_json::Value;

/// Log levels as MCP names them (a subset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Warning,
    Error,
}

pub trait ClientLink: Send + Sync {
    /// Progress of the current call; dropped when the client gave no token.
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>);
    /// Whether progress notifications reach the client at all.
    fn wants_progress(&self) -> bool;
    /// A log record for the client (MCP `notifications/message`).
    fn log(&self, level: Level, logger: &str, data: Value);
    /// A relayed event: a progress notification carrying the event JSON as
    /// its message when the client follows progress, a log record otherwise.
    fn event(&self, logger: &str, event: Value);
    /// Ask the client named questions at once on behalf of the call and
    /// wait for the answers, one per question in order (the caller bounds
    /// the wait).
    fn ask(&self, questions: Vec<(String, Question)>) -> Asking;
}

/// What a call may ask its client (the `client` capability).
pub enum Question {
    Elicit(ElicitRequestParams),
    Sample(CreateMessageRequestParams),
    Roots,
}

#[derive(Clone)]
pub enum Answer {
    Elicited(ElicitResult),
    Sampled(CreateMessageResult),
    Roots(ListRootsResult),
}

/// Why a question got no answer.
#[derive(Clone)]
pub enum Unasked {
    /// Nobody there can answer it; says why.
    Unsupported(String),
    /// The client failed it.
    Failed(String),
}

pub type Asking = Pin<Box<dyn Future<Output = Vec<Result<Answer, Unasked>>> + Send>>;

/// The same refusal for every one of `questions`.
pub fn unanswered(questions: usize, why: Unasked) -> Vec<Result<Answer, Unasked>> {
    vec![Err(why); questions]
}

/// For `host call` and background work: progress and events go to stderr
/// as lines of JSON, log records through the host's log.
pub struct StderrLink;

impl ClientLink for StderrLink {
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        eprintln!(
            "{}",
            serde_json::json!({"progress": progress, "total": total, "message": message})
        );
    }
    fn wants_progress(&self) -> bool {
        true
    }
    /// As log records of target `plugin`, so `MCP_SERVER_LOG` applies to
    /// plugins' records too.
    fn log(&self, level: Level, logger: &str, data: Value) {
        match level {
            Level::Debug => tracing::debug!(target: "plugin", logger, %data),
            Level::Info => tracing::info!(target: "plugin", logger, %data),
            Level::Warning => tracing::warn!(target: "plugin", logger, %data),
            Level::Error => tracing::error!(target: "plugin", logger, %data),
        }
    }
    fn event(&self, _logger: &str, event: Value) {
        eprintln!("{event}");
    }
    fn ask(&self, questions: Vec<(String, Question)>) -> Asking {
        let answers = unanswered(
            questions.len(),
            Unasked::Unsupported(
                "no MCP client is behind this call (`host call` or background work): call the tool from an MCP client to be asked".into(),
            ),
        );
        Box::pin(async { answers })
    }
}

/// Wraps a call's link to remember whether the plugin relayed any event,
/// so the host can close the stream with a final `call_end` event.
pub struct EventTracker {
    inner: std::sync::Arc<dyn ClientLink>,
    relayed: std::sync::atomic::AtomicBool,
}

impl EventTracker {
    pub fn new(inner: std::sync::Arc<dyn ClientLink>) -> Self {
        EventTracker {
            inner,
            relayed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub fn relayed(&self) -> bool {
        self.relayed.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl ClientLink for EventTracker {
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.inner.progress(progress, total, message);
    }
    fn wants_progress(&self) -> bool {
        self.inner.wants_progress()
    }
    fn log(&self, level: Level, logger: &str, data: Value) {
        self.inner.log(level, logger, data);
    }
    fn event(&self, logger: &str, event: Value) {
        self.relayed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.inner.event(logger, event);
    }
    fn ask(&self, questions: Vec<(String, Question)>) -> Asking {
        self.inner.ask(questions)
    }
}
