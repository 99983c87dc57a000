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
use rmcp::task_manager::TaskContext;
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
    open: Open,
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
    /// Questions it asked that its task is to ask.
    open: Option<Open>,
}

/// How a round ended.
pub(super) enum Round {
    /// The request ended, with the client capabilities its refused
    /// questions needed.
    Done(Outcome, Vec<Value>),
    /// The call asked something: answer `input_required`.
    Asks(InputRequiredResult),
    /// Still running when its grace ended: it goes on as a task.
    Late(Running),
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
            current: Mutex::new((Reporter::Request(link), capabilities)),
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
            open: None,
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
        let Parked { run, mut open } = parked;
        for (place, key, kind, _) in &open.sent {
            let response = responses.and_then(|r| r.get(key)).cloned();
            open.answers[*place] = Some(answer_of(*kind, key, response));
        }
        *run.relay.current.lock().expect("relay lock") = (Reporter::Request(link), capabilities);
        open.answer();
        Ok(run)
    }

    /// Keep `run` for the client's next call, under a new state, asking
    /// what `open` sends.
    fn park(self: &Arc<Self>, run: Running, open: Open) -> Round {
        let mut requests = InputRequests::new();
        for (_, key, _, request) in &open.sent {
            requests.insert(key.clone(), request.clone());
        }
        let state = uuid::Uuid::new_v4().simple().to_string();
        self.parked
            .lock()
            .expect("rounds lock")
            .insert(state.clone(), Parked { run, open });
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
    /// Run until the call ends or asks something, or, with `late`, it is
    /// late (then it is [`Round::Late`]); `ended` (this round's request was
    /// cancelled) cancels the call.
    pub(super) async fn round(
        mut self,
        rounds: &Arc<Rounds>,
        ended: &CancellationToken,
        late: Option<Lateness>,
    ) -> Round {
        let grace = async {
            match late {
                Some(late) => tokio::time::sleep(late.after).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(grace);
        loop {
            let asked = tokio::select! {
                biased;
                outcome = &mut self.done => return Round::Done(ended_with(outcome), self.needed),
                Some(asked) = self.questions.recv() => asked,
                () = &mut grace => return Round::Late(self),
                () = ended.cancelled(), if !self.cancel.is_cancelled() => {
                    self.cancel.cancel();
                    continue;
                }
            };
            let open = self.sort(asked);
            if open.sent.is_empty() {
                open.answer();
            } else if late.is_some_and(|l| l.when_asking) {
                self.open = Some(open);
                return Round::Late(self);
            } else {
                return rounds.park(self, open);
            }
        }
    }

    /// What the client must be asked of `asked`: what it cannot be asked,
    /// or answered with its first call, is answered at once.
    fn sort(&mut self, asked: Asked) -> Open {
        let capabilities = self.relay.current.lock().expect("relay lock").1.clone();
        let Asked { questions, reply } = asked;
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
        Open {
            sent,
            answers,
            reply,
        }
    }

    /// Go on as task `task` until the call ends (`None`: cancelled by
    /// `tasks/cancel`): progress becomes the task's status message, and
    /// questions its `inputRequests`, answered by `tasks/update`. Dropped
    /// (the task expired), it cancels the call.
    pub(super) async fn run_as_task(mut self, task: TaskContext) -> Option<Outcome> {
        let _cancel_when_dropped = self.cancel.clone().drop_guard();
        self.relay.current.lock().expect("relay lock").0 = Reporter::Task(task.clone());
        let mut used = std::collections::HashSet::new();
        loop {
            let mut open = match self.open.take() {
                Some(open) => open,
                None => tokio::select! {
                    biased;
                    outcome = &mut self.done => {
                        return (!task.is_cancel_requested()).then(|| ended_with(outcome));
                    }
                    () = task.cancelled() => {
                        self.cancel.cancel();
                        let _ = (&mut self.done).await;
                        return None;
                    }
                    Some(asked) = self.questions.recv() => self.sort(asked),
                },
            };
            let asking =
                std::mem::take(&mut open.sent)
                    .into_iter()
                    .map(|(place, key, kind, request)| {
                        // Keys name one question in a task's life.
                        let mut unique = key.clone();
                        for n in 2.. {
                            if used.insert(unique.clone()) {
                                break;
                            }
                            unique = format!("{key}.{n}");
                        }
                        let task = task.clone();
                        async move {
                            let answer = match task.request_input(unique.clone(), request).await {
                                Ok(response) => answer_of(kind, &unique, Some(response)),
                                Err(_) => Err(Unasked::Failed("the task was cancelled".into())),
                            };
                            (place, answer)
                        }
                    });
            for (place, answer) in futures_util::future::join_all(asking).await {
                open.answers[place] = Some(answer);
            }
            open.answer();
        }
    }
}

/// When a call of a tool that may run as a task is late, and goes on as
/// one.
#[derive(Clone, Copy)]
pub(super) struct Lateness {
    /// Still running this long after it started (or resumed).
    pub after: Duration,
    /// Or as soon as it asks the client something (a person may take long
    /// to answer); otherwise questions are asked in rounds first.
    pub when_asking: bool,
}

/// Questions a call asked together: those sent to the client (place, name,
/// kind, request), and the answers so far, one place per question.
struct Open {
    sent: Vec<(usize, String, Kind, InputRequest)>,
    answers: Vec<Option<Result<Answer, Unasked>>>,
    reply: oneshot::Sender<Vec<Result<Answer, Unasked>>>,
}

impl Open {
    /// Every question answered: the answers go to the call.
    fn answer(self) {
        let _ = self.reply.send(
            self.answers
                .into_iter()
                .map(|a| a.expect("every place answered"))
                .collect(),
        );
    }
}

/// What a request's task ended with (a task that died without a word
/// ended with an internal error).
fn ended_with(outcome: Result<Outcome, oneshot::error::RecvError>) -> Outcome {
    outcome.unwrap_or_else(|_| {
        Outcome::Call(Some(Reply::error(
            "internal",
            "the request ended without a reply",
            false,
            Default::default(),
        )))
    })
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
    current: Mutex<(Reporter, Option<ClientCapabilities>)>,
    questions: mpsc::UnboundedSender<Asked>,
}

/// Where a call's progress and log records go.
#[derive(Clone)]
enum Reporter {
    /// To the request of the current round.
    Request(Arc<McpLink>),
    /// Into the status message of the task it became (a task has no
    /// request to send log records to).
    Task(TaskContext),
}

impl RelayLink {
    fn reporter(&self) -> Reporter {
        self.current.lock().expect("relay lock").0.clone()
    }
}

impl ClientLink for RelayLink {
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        match self.reporter() {
            Reporter::Request(link) => link.progress(progress, total, message),
            Reporter::Task(task) => {
                task.set_status_message(message.unwrap_or_else(|| match total {
                    Some(total) => format!("{progress} of {total}"),
                    None => format!("{progress}"),
                }))
            }
        }
    }
    fn wants_progress(&self) -> bool {
        match self.reporter() {
            Reporter::Request(link) => link.wants_progress(),
            Reporter::Task(_) => true,
        }
    }
    fn log(&self, level: Level, logger: &str, data: Value) {
        if let Reporter::Request(link) = self.reporter() {
            link.log(level, logger, data);
        }
    }
    fn event(&self, logger: &str, event: Value) {
        if let Reporter::Request(link) = self.reporter() {
            link.event(logger, event);
        }
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
