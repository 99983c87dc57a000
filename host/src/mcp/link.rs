//! The link from one MCP request back to its client: the call's progress
//! and log records, sent in order, and its questions for the client (sent
//! as requests on sessions; 2026-07-28 clients are asked through
//! [`super::rounds`]).

// MCP logging and sampling are deprecated by SEP-2577 but are what today's
// clients speak; the issue asks for them.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientResult, CreateMessageRequest, ElicitRequest, ElicitRequestParams,
    GetExtensions, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
    ProgressToken, RequestId, ServerRequest,
};
use rmcp::service::{OriginatingRequestId, Peer, RequestContext, RoleServer, ServiceError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::client::{Answer, Asking, ClientLink, Level, Question, Unasked, unanswered};

/// Where a call's lowest wanted log level comes from.
pub(super) enum Levels {
    Session(Arc<Mutex<Level>>),
    Request(Option<Level>),
}

impl Levels {
    pub(super) fn wants(&self, level: Level) -> bool {
        match self {
            Levels::Session(min) => level >= *min.lock().expect("level lock"),
            Levels::Request(min) => min.is_some_and(|min| level >= min),
        }
    }
}

pub(super) fn level_of(level: LoggingLevel) -> Level {
    match level {
        LoggingLevel::Debug => Level::Debug,
        LoggingLevel::Info | LoggingLevel::Notice => Level::Info,
        LoggingLevel::Warning => Level::Warning,
        _ => Level::Error,
    }
}

enum Note {
    Progress(ProgressNotificationParam),
    Log(LoggingMessageNotificationParam),
}

/// Sends one call's notifications, in order, through a single task that
/// starts with the first notification (most calls send none).
pub(super) struct McpLink {
    peer: Peer<RoleServer>,
    /// The request the call serves: questions to the client ride its
    /// stream (HTTP) and name it.
    request: RequestId,
    sender: Mutex<Sender>,
    token: Option<ProgressToken>,
    levels: Levels,
    last_progress: Mutex<Option<f64>>,
}

enum Sender {
    Idle,
    Running(mpsc::UnboundedSender<Note>, tokio::task::JoinHandle<()>),
    Closed,
}

impl McpLink {
    pub(super) fn new(
        context: &RequestContext<RoleServer>,
        token: Option<ProgressToken>,
        levels: Levels,
    ) -> Arc<McpLink> {
        Arc::new(McpLink {
            peer: context.peer.clone(),
            request: context.id.clone(),
            sender: Mutex::new(Sender::Idle),
            token,
            levels,
            last_progress: Mutex::new(None),
        })
    }

    /// Stop taking notifications and wait until those taken are sent.
    pub(super) async fn close(&self) {
        let previous =
            std::mem::replace(&mut *self.sender.lock().expect("link lock"), Sender::Closed);
        if let Sender::Running(tx, forwarder) = previous {
            drop(tx);
            let _ = forwarder.await;
        }
    }

    fn send(&self, note: Note) {
        let mut sender = self.sender.lock().expect("link lock");
        if let Sender::Idle = *sender {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let peer = self.peer.clone();
            let forwarder = tokio::spawn(async move {
                while let Some(note) = rx.recv().await {
                    let sent = match note {
                        Note::Progress(p) => peer.notify_progress(p).await,
                        Note::Log(l) => peer.notify_logging_message(l).await,
                    };
                    if let Err(e) = sent {
                        tracing::debug!(error = %e, "notification not delivered");
                    }
                }
            });
            *sender = Sender::Running(tx, forwarder);
        }
        if let Sender::Running(tx, _) = &*sender {
            let _ = tx.send(note);
        }
    }
}

impl ClientLink for McpLink {
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(token) = &self.token else { return };
        // The protocol wants progress to increase with every notification.
        let progress = {
            let mut last = self.last_progress.lock().expect("progress lock");
            let value = match *last {
                Some(before) if progress <= before => before + 1.0,
                _ => progress,
            };
            *last = Some(value);
            value
        };
        let mut param = ProgressNotificationParam::new(token.clone(), progress);
        param.total = total;
        param.message = message;
        self.send(Note::Progress(param));
    }

    fn wants_progress(&self) -> bool {
        self.token.is_some()
    }

    fn log(&self, level: Level, logger: &str, data: Value) {
        if !self.levels.wants(level) {
            return;
        }
        let level = match level {
            Level::Debug => LoggingLevel::Debug,
            Level::Info => LoggingLevel::Info,
            Level::Warning => LoggingLevel::Warning,
            Level::Error => LoggingLevel::Error,
        };
        self.send(Note::Log(
            LoggingMessageNotificationParam::new(level, data).with_logger(logger),
        ));
    }

    fn event(&self, logger: &str, event: Value) {
        if self.wants_progress() {
            self.progress(0.0, None, Some(event.to_string()));
        } else {
            self.log(Level::Info, logger, event);
        }
    }

    fn ask(&self, questions: Vec<(String, Question)>) -> Asking {
        let peer = self.peer.clone();
        let request = self.request.clone();
        let count = questions.len();
        if matches!(self.levels, Levels::Request(_)) {
            // Tool calls of such clients ask through `rounds`.
            let why = "only a tool call can ask an MCP 2026-07-28 client (by input_required)";
            let answers = unanswered(count, Unasked::Unsupported(why.into()));
            return Box::pin(async { answers });
        }
        let capabilities = peer.peer_info().map(|info| info.capabilities.clone());
        // Sent together; each answered on its own.
        let asked = questions.into_iter().map(move |(_, question)| {
            let peer = peer.clone();
            let request = request.clone();
            let sent = request_for(question, capabilities.as_ref());
            async move {
                let mut sent = sent.map_err(Unasked::from)?;
                sent.extensions_mut().insert(OriginatingRequestId(request));
                match peer.send_request(sent).await {
                    Ok(ClientResult::ElicitResult(result)) => Ok(Answer::Elicited(result)),
                    Ok(ClientResult::CreateMessageResult(result)) => Ok(Answer::Sampled(*result)),
                    Ok(ClientResult::ListRootsResult(result)) => Ok(Answer::Roots(result)),
                    Ok(_) => Err(Unasked::Failed("the client answered something else".into())),
                    Err(ServiceError::McpError(e)) => Err(Unasked::Failed(format!(
                        "the client refused: {}",
                        e.message
                    ))),
                    Err(e) => Err(Unasked::Failed(format!("the client did not answer: {e}"))),
                }
            }
        });
        Box::pin(futures_util::future::join_all(asked))
    }
}

/// A question the client did not declare it can be asked: the capability
/// it would need (as a `ClientCapabilities` object), and why in words.
pub(super) struct Missing {
    pub capability: serde_json::Value,
    pub why: String,
}

impl From<Missing> for Unasked {
    fn from(missing: Missing) -> Unasked {
        Unasked::Unsupported(missing.why)
    }
}

/// The MCP request asking `question`, if the client declared (in
/// `capabilities`) that it can be asked that.
pub(super) fn request_for(
    question: Question,
    capabilities: Option<&ClientCapabilities>,
) -> Result<ServerRequest, Missing> {
    let capabilities = capabilities.cloned().unwrap_or_default();
    let missing = |capability: serde_json::Value, why: &str| Missing {
        capability,
        why: format!("the client does not support {why}"),
    };
    match question {
        Question::Elicit(params) => {
            let url = matches!(params, ElicitRequestParams::UrlElicitationParams { .. });
            let declared = capabilities.elicitation.as_ref().is_some_and(|e| {
                // Declaring neither mode means form, as MCP has it.
                let (form, by_url) = (e.form.is_some(), e.url.is_some());
                if url { by_url } else { form || !by_url }
            });
            match (declared, url) {
                (true, _) => Ok(ServerRequest::ElicitRequest(ElicitRequest::new(params))),
                (false, true) => Err(missing(
                    json!({"elicitation": {"url": {}}}),
                    "URL elicitation",
                )),
                (false, false) => Err(missing(json!({"elicitation": {}}), "elicitation")),
            }
        }
        Question::Sample(params) => match capabilities.sampling {
            Some(_) => Ok(ServerRequest::CreateMessageRequest(
                CreateMessageRequest::new(params),
            )),
            None => Err(missing(json!({"sampling": {}}), "sampling")),
        },
        Question::Roots => match capabilities.roots {
            Some(_) => Ok(ServerRequest::ListRootsRequest(Default::default())),
            None => Err(missing(json!({"roots": {}}), "roots (it shares none)")),
        },
    }
}
