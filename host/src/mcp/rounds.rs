//! Multi round-trip requests (tool calls, prompts), for MCP 2026-07-28
//! clients (SEP-2322).
//!
//! That revision has no requests from server to client: a request whose
//! plugin asks the client something answers `input_required`, carrying the
//! questions and a `requestState`, and the client sends the request again
//! with its answers. Here the call keeps running in the host meanwhile (its plugin
//! waits inside a `client` function, holding its turn among the plugin's
//! calls), and the state is
//! only a handle to it: random, good for one answer to the same request, and
//! forgotten after [`PARK_LIMIT`]. Progress and log records go to the
//! request of the current round. Answers a client sends with its first
//! call, before being asked (a stateless retry), answer the questions of
//! those names at once.

// Sampling is deprecated by SEP-2577 but is what today's clients speak.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, CreateMessageResult, ElicitResult, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, ListRootsResult, ServerRequest,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::link::{McpLink, request_for};
use crate::bindings::Filled;
use crate::client::{Answer, Asking, ClientLink, Level, Question, Unasked, unanswered};
use crate::service::{AskFailure, Reply};

/// How long a parked call waits for the client to call again.
const PARK_LIMIT: Duration = Duration::from_secs(600);

/// The calls waiting for their clients' answers, by `requestState`;
/// shared by every handler of the host (HTTP makes one per request).
#[derive(Default)]
pub struct Rounds {
    parked: Mutex<HashMap<String, Parked>>,
}

/// A call waiting for the answers to the questions it asked.
struct Parked {
    run: Running,
    /// The questions the client was sent: their place, name and kind.
    open: Vec<(usize, String, Kind)>,
    /// One per question; those the client could not take are filled in.
    answers: Vec<Option<Result<Answer, Unasked>>>,
    reply: oneshot::Sender<Vec<Result<Answer, Unasked>>>,
}

/// What kind of answer a question wants.
#[derive(Clone, Copy)]
enum Kind {
    Elicit,
    Sample,
    Roots,
}

impl Kind {
    fn of(question: &Question) -> Kind {
        match question {
            Question::Elicit(_) => Kind::Elicit,
            Question::Sample(_) => Kind::Sample,
            Question::Roots => Kind::Roots,
        }
    }
}

/// Questions a call asked together, and where their answers go.
struct Asked {
    questions: Vec<(String, Question)>,
    reply: oneshot::Sender<Vec<Result<Answer, Unasked>>>,
}

/// What a request run in rounds ends with.
pub(super) enum Outcome {
    /// A tool call's reply (`None`: no such tool).
    Call(Option<Reply>),
    Prompt(Result<Filled, AskFailure>),
}

/// What runs a request, given the link it reports to and its cancellation.
pub(super) type Run =
    Box<dyn FnOnce(Arc<dyn ClientLink>, CancellationToken) -> BoxedOutcome + Send>;
pub(super) type BoxedOutcome = std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>>;

/// A request running on its own task, whose questions come out here.
pub(super) struct Running {
    /// What it is (`tools/call NAME`, `prompts/get NAME`): a state resumes
    /// only the same.
    what: String,
    done: oneshot::Receiver<Outcome>,
    questions: mpsc::UnboundedReceiver<Asked>,
    relay: Arc<RelayLink>,
    cancel: CancellationToken,
    /// The client capabilities its refused questions needed.
    needed: Vec<Value>,
    /// Answers the client gave with its first call, before any question
    /// (a client that retries statelessly): used for the questions of those
    /// names.
    given: InputResponses,
}

/// How a round ended.
pub(super) enum Round {
    /// The request ended, with the client capabilities its refused
    /// questions needed.
    Done(Outcome, Vec<Value>),
    /// The call asked something: answer `input_required`.
    Asks(InputRequiredResult),
}

impl Rounds {
    /// Start `what` (run by `run`) on its own task, its first round
    /// reporting to `link`; `given` are answers the client sent unasked.
    pub(super) fn start(
        &self,
        what: String,
        run: Run,
        link: Arc<McpLink>,
        capabilities: Option<ClientCapabilities>,
        given: Option<InputResponses>,
    ) -> Running {
        let (questions_tx, questions) = mpsc::unbounded_channel();
        let relay = Arc::new(RelayLink {
            current: Mutex::new((link, capabilities)),
            questions: questions_tx,
        });
        let cancel = CancellationToken::new();
        let (done_tx, done) = oneshot::channel();
        let running = run(relay.clone(), cancel.clone());
        tokio::spawn(async move {
            let _ = done_tx.send(running.await);
        });
        Running {
            what,
            done,
            questions,
            relay,
            cancel,
            needed: Vec::new(),
            given: given.unwrap_or_default(),
        }
    }

    /// The request `state` names (it must be `what`), given the client's
    /// answers and reporting to `link` from now on.
    pub(super) fn resume(
        &self,
        what: &str,
        state: &str,
        responses: Option<&InputResponses>,
        link: Arc<McpLink>,
        capabilities: Option<ClientCapabilities>,
    ) -> Result<Running, McpError> {
        let parked = {
            let mut parked = self.parked.lock().expect("rounds lock");
            match parked.get(state) {
                Some(p) if p.run.what == what => parked.remove(state),
                _ => None,
            }
        };
        let Some(parked) = parked else {
            return Err(McpError::invalid_params(
                format!(
                    "requestState `{state}` names no `{what}` waiting for an answer (it ended, expired after {} s, or was answered): send the request again without it",
                    PARK_LIMIT.as_secs()
                ),
                None,
            ));
        };
        let Parked {
            run,
            open,
            mut answers,
            reply,
        } = parked;
        for (place, key, kind) in open {
            let response = responses.and_then(|r| r.get(&key)).cloned();
            answers[place] = Some(answer_of(kind, &key, response));
        }
        *run.relay.current.lock().expect("relay lock") = (link, capabilities);
        let _ = reply.send(
            answers
                .into_iter()
                .map(|a| a.expect("every place answered"))
                .collect(),
        );
        Ok(run)
    }

    /// Keep `run` for the client's next call, under a new state, asking
    /// `requests` (by name).
    fn park(
        self: &Arc<Self>,
        run: Running,
        asked: Vec<(usize, String, Kind, InputRequest)>,
        answers: Vec<Option<Result<Answer, Unasked>>>,
        reply: oneshot::Sender<Vec<Result<Answer, Unasked>>>,
    ) -> Round {
        let mut requests = InputRequests::new();
        let mut open = Vec::with_capacity(asked.len());
        for (place, key, kind, request) in asked {
            requests.insert(key.clone(), request);
            open.push((place, key, kind));
        }
        let state = uuid::Uuid::new_v4().simple().to_string();
        self.parked.lock().expect("rounds lock").insert(
            state.clone(),
            Parked {
                run,
                open,
                answers,
                reply,
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
                tracing::info!(request = %parked.run.what, "request cancelled: its client did not answer");
                parked.run.cancel.cancel();
            }
        });
        Round::Asks(InputRequiredResult::new(Some(requests), Some(state)))
    }
}

impl Running {
    /// Run until the call ends or asks something; `ended` (this round's
    /// request was cancelled) cancels the call.
    pub(super) async fn round(mut self, rounds: &Arc<Rounds>, ended: &CancellationToken) -> Round {
        loop {
            let asked = tokio::select! {
                outcome = &mut self.done => {
                    let outcome = outcome.unwrap_or_else(|_| {
                        Outcome::Call(Some(Reply::error("internal", "the request ended without a reply", false, Default::default())))
                    });
                    return Round::Done(outcome, self.needed);
                }
                Some(asked) = self.questions.recv() => asked,
                () = ended.cancelled(), if !self.cancel.is_cancelled() => {
                    self.cancel.cancel();
                    continue;
                }
            };
            let capabilities = self.relay.current.lock().expect("relay lock").1.clone();
            let Asked { questions, reply } = asked;
            // What this client cannot be asked is answered at once.
            let mut answers = Vec::with_capacity(questions.len());
            let mut sent = Vec::new();
            for (place, (key, question)) in questions.into_iter().enumerate() {
                let kind = Kind::of(&question);
                // A malformed one is as none: the question is asked.
                let given = self.given.remove(&key);
                if let Some(answer) = given.and_then(|r| answer_of(kind, &key, Some(r)).ok()) {
                    answers.push(Some(Ok(answer)));
                    continue;
                }
                match request_for(question, capabilities.as_ref()) {
                    Ok(request) => {
                        answers.push(None);
                        sent.push((place, key, kind, input_request(request)));
                    }
                    Err(missing) => {
                        self.needed.push(missing.capability.clone());
                        answers.push(Some(Err(missing.into())));
                    }
                }
            }
            if sent.is_empty() {
                let _ = reply.send(answers.into_iter().flatten().collect());
                continue;
            }
            return rounds.park(self, sent, answers, reply);
        }
    }
}

/// A question's request as an entry of `inputRequests`.
fn input_request(request: ServerRequest) -> InputRequest {
    match request {
        ServerRequest::ElicitRequest(r) => InputRequest::Elicitation(r),
        ServerRequest::CreateMessageRequest(r) => InputRequest::CreateMessage(r),
        ServerRequest::ListRootsRequest(r) => InputRequest::ListRoots(r),
        _ => unreachable!("questions are elicitation, sampling or roots"),
    }
}

/// The client's answer to question `key`, from its `inputResponses`.
fn answer_of(kind: Kind, key: &str, response: Option<Value>) -> Result<Answer, Unasked> {
    let response = response.ok_or_else(|| {
        Unasked::Failed(format!(
            "the client called again without `inputResponses.{key}`"
        ))
    })?;
    let malformed = |e: serde_json::Error| {
        Unasked::Failed(format!("the client's answer to `{key}` is malformed: {e}"))
    };
    match kind {
        Kind::Elicit => serde_json::from_value::<ElicitResult>(response).map(Answer::Elicited),
        Kind::Sample => {
            serde_json::from_value::<CreateMessageResult>(response).map(Answer::Sampled)
        }
        Kind::Roots => serde_json::from_value::<ListRootsResult>(response).map(Answer::Roots),
    }
    .map_err(malformed)
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
    fn ask(&self, questions: Vec<(String, Question)>) -> Asking {
        let count = questions.len();
        let (reply, answered) = oneshot::channel();
        let sent = self.questions.send(Asked { questions, reply });
        Box::pin(async move {
            if sent.is_err() {
                return unanswered(count, Unasked::Failed("the call's client is gone".into()));
            }
            answered.await.unwrap_or_else(|_| {
                unanswered(
                    count,
                    Unasked::Failed("the client did not call again with an answer".into()),
                )
            })
        })
    }
}
