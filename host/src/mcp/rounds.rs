//! Multi round-trip tool calls, for MCP 2026-07-28 clients (SEP-2322).
//!
//! That revision has no requests from server to client: a call that asks
//! the client something answers `input_required`, carrying the question
//! and a `requestState`, and the client calls the tool again with its
//! answer. Here the call keeps running in the host meanwhile (its plugin
//! waits inside `client.elicit-form` or `client.sample`), and the state is
//! only a handle to it: random, good for one answer to the same tool, and
//! forgotten after [`PARK_LIMIT`]. Progress and log records go to the
//! request of the current round.

// Sampling is deprecated by SEP-2577 but is what today's clients speak.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, CreateMessageResult, ElicitResult, InputRequest,
    InputRequests, InputRequiredResult, ServerRequest,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::link::{McpLink, request_for};
use crate::client::{Answer, Asking, ClientLink, Level, Question, Unasked};
use crate::service::{Reply, Service};

/// How long a parked call waits for the client to call again.
const PARK_LIMIT: Duration = Duration::from_secs(600);

/// The key of the one question a round carries.
const KEY: &str = "ask";

/// The calls waiting for their clients' answers, by `requestState`;
/// shared by every handler of the host (HTTP makes one per request).
#[derive(Default)]
pub struct Rounds {
    parked: Mutex<HashMap<String, Parked>>,
}

/// A call waiting for the answer to the question it asked.
struct Parked {
    run: Running,
    answer: oneshot::Sender<Result<Answer, Unasked>>,
    sampling: bool,
}

/// A question a call asked, and where its answer goes.
struct Asked {
    question: Question,
    answer: oneshot::Sender<Result<Answer, Unasked>>,
}

/// A tool call running on its own task, whose questions come out here.
pub(super) struct Running {
    tool: String,
    done: oneshot::Receiver<Option<Reply>>,
    questions: mpsc::UnboundedReceiver<Asked>,
    relay: Arc<RelayLink>,
    cancel: CancellationToken,
}

/// How a round ended.
pub(super) enum Round {
    /// The call ended (`None`: no such tool).
    Done(Option<Reply>),
    /// The call asked something: answer `input_required`.
    Asks(InputRequiredResult),
}

impl Rounds {
    /// Start `request` on its own task, its first round reporting to `link`.
    pub(super) fn start(
        &self,
        service: Arc<Service>,
        request: CallToolRequestParams,
        link: Arc<McpLink>,
        capabilities: Option<ClientCapabilities>,
    ) -> Running {
        let (questions_tx, questions) = mpsc::unbounded_channel();
        let relay = Arc::new(RelayLink {
            current: Mutex::new((link, capabilities)),
            questions: questions_tx,
        });
        let cancel = CancellationToken::new();
        let (done_tx, done) = oneshot::channel();
        let (tool, call_relay, call_cancel) = (request.name.clone(), relay.clone(), cancel.clone());
        tokio::spawn(async move {
            let arguments = request.arguments.unwrap_or_default();
            let reply = service
                .call(&request.name, arguments, call_relay, call_cancel)
                .await;
            let _ = done_tx.send(reply);
        });
        Running {
            tool: tool.to_string(),
            done,
            questions,
            relay,
            cancel,
        }
    }

    /// The call `request.request_state` names, given the client's answer
    /// and reporting to `link` from now on.
    pub(super) fn resume(
        &self,
        request: &CallToolRequestParams,
        link: Arc<McpLink>,
        capabilities: Option<ClientCapabilities>,
    ) -> Result<Running, McpError> {
        let state = request.request_state.as_deref().unwrap_or_default();
        let parked = {
            let mut parked = self.parked.lock().expect("rounds lock");
            match parked.get(state) {
                Some(p) if p.run.tool == request.name => parked.remove(state),
                _ => None,
            }
        };
        let Some(parked) = parked else {
            return Err(McpError::invalid_params(
                format!(
                    "requestState `{state}` names no call of `{}` waiting for an answer (it ended, expired after {} s, or was answered): call the tool again without it",
                    request.name,
                    PARK_LIMIT.as_secs()
                ),
                None,
            ));
        };
        let answer = request
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get(KEY))
            .cloned();
        *parked.run.relay.current.lock().expect("relay lock") = (link, capabilities);
        let _ = parked.answer.send(answer_of(parked.sampling, answer));
        Ok(parked.run)
    }

    /// Keep `run` for the client's next call, under a new state.
    fn park(
        self: &Arc<Self>,
        run: Running,
        answer: oneshot::Sender<Result<Answer, Unasked>>,
        request: ServerRequest,
    ) -> Round {
        let (sampling, input) = match request {
            ServerRequest::CreateMessageRequest(r) => (true, InputRequest::CreateMessage(r)),
            ServerRequest::ElicitRequest(r) => (false, InputRequest::Elicitation(r)),
            _ => unreachable!("questions are elicitations or sampling"),
        };
        let state = uuid::Uuid::new_v4().simple().to_string();
        self.parked.lock().expect("rounds lock").insert(
            state.clone(),
            Parked {
                run,
                answer,
                sampling,
            },
        );
        // Unanswered for too long: forgotten, and the call cancelled.
        let (rounds, expired) = (Arc::downgrade(self), state.clone());
        tokio::spawn(async move {
            tokio::time::sleep(PARK_LIMIT).await;
            let gone = rounds
                .upgrade()
                .and_then(|r| r.parked.lock().expect("rounds lock").remove(&expired));
            if let Some(parked) = gone {
                tracing::info!(tool = %parked.run.tool, "call cancelled: its client did not answer");
                parked.run.cancel.cancel();
            }
        });
        let requests = InputRequests::from([(KEY.to_string(), input)]);
        Round::Asks(InputRequiredResult::new(Some(requests), Some(state)))
    }
}

impl Running {
    /// Run until the call ends or asks something; `ended` (this round's
    /// request was cancelled) cancels the call.
    pub(super) async fn round(mut self, rounds: &Arc<Rounds>, ended: &CancellationToken) -> Round {
        loop {
            let asked = tokio::select! {
                reply = &mut self.done => {
                    return Round::Done(reply.unwrap_or_else(|_| {
                        Some(Reply::error("internal", "the call ended without a reply", false, Default::default()))
                    }));
                }
                Some(asked) = self.questions.recv() => asked,
                () = ended.cancelled(), if !self.cancel.is_cancelled() => {
                    self.cancel.cancel();
                    continue;
                }
            };
            let capabilities = self.relay.current.lock().expect("relay lock").1.clone();
            let Asked { question, answer } = asked;
            match request_for(question, capabilities.as_ref()) {
                Ok(request) => return rounds.park(self, answer, request),
                // Not something this client can be asked: the plugin hears so.
                Err(unasked) => {
                    let _ = answer.send(Err(unasked));
                }
            }
        }
    }
}

/// The client's answer to the question, from its `inputResponses`.
fn answer_of(sampling: bool, response: Option<Value>) -> Result<Answer, Unasked> {
    let response = response.ok_or_else(|| {
        Unasked::Failed(format!(
            "the client called again without `inputResponses.{KEY}`"
        ))
    })?;
    let malformed =
        |e: serde_json::Error| Unasked::Failed(format!("the client's answer is malformed: {e}"));
    if sampling {
        serde_json::from_value::<CreateMessageResult>(response)
            .map(Answer::Sampled)
            .map_err(malformed)
    } else {
        serde_json::from_value::<ElicitResult>(response)
            .map(Answer::Elicited)
            .map_err(malformed)
    }
}

/// The link a round-trip call runs with: notifications go to the current
/// round's request, questions to [`Running::round`].
struct RelayLink {
    current: Mutex<(Arc<McpLink>, Option<ClientCapabilities>)>,
    questions: mpsc::UnboundedSender<Asked>,
}

impl RelayLink {
    fn link(&self) -> Arc<McpLink> {
        self.current.lock().expect("relay lock").0.clone()
    }
}

impl ClientLink for RelayLink {
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.link().progress(progress, total, message);
    }
    fn wants_progress(&self) -> bool {
        self.link().wants_progress()
    }
    fn log(&self, level: Level, logger: &str, data: Value) {
        self.link().log(level, logger, data);
    }
    fn event(&self, logger: &str, event: Value) {
        self.link().event(logger, event);
    }
    fn ask(&self, question: Question) -> Asking {
        let (answer, answered) = oneshot::channel();
        let sent = self.questions.send(Asked { question, answer });
        Box::pin(async move {
            if sent.is_err() {
                return Err(Unasked::Failed("the call's client is gone".into()));
            }
            answered.await.unwrap_or_else(|_| {
                Err(Unasked::Failed(
                    "the client did not call again with an answer".into(),
                ))
            })
        })
    }
}
