//! `client`: asking the MCP client from inside a call — elicitation (a
//! question for the person) and sampling (a completion from its model).
//!
//! The request is built and checked here, as MCP has it; the call's link
//! ([`crate::client::ClientLink::ask`]) sends it to whoever made the call,
//! and the wait ends with the answer, the call's deadline or its
//! cancellation (the guest is not running meanwhile, so the epoch deadline
//! cannot end it).

// Sampling is deprecated by SEP-2577 but is what today's clients speak;
// the issue asks for it.
#![allow(deprecated)]

use std::future::Future;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rmcp::model::{CreateMessageRequestParams, ElicitationAction};
use serde_json::{Value, json};

use crate::bindings::Refusal;
use crate::bindings::mcphost::plugin::client::{
    Action, Answer as WitAnswer, AskError, Elicited, FormRequest, Host, Question, Role, Root,
    Sampled, SamplingContent, SamplingRequest, UrlRequest,
};
use crate::bindings::mcphost::plugin::content::Media;
use crate::client::{Answer, Question as McpQuestion, Unasked, unanswered};
use crate::store::CallState;

impl Host for CallState {
    async fn elicit_form(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> Result<Elicited, Refusal<AskError>> {
        let form = Question::Form(FormRequest {
            message,
            requested_schema,
        });
        match self.ask_one("form", form).await? {
            WitAnswer::Elicited(elicited) => Ok(elicited),
            _ => Err(unexpected()),
        }
    }

    async fn elicit_url(
        &mut self,
        message: String,
        url: String,
    ) -> Result<Action, Refusal<AskError>> {
        match self
            .ask_one("url", Question::Url(UrlRequest { message, url }))
            .await?
        {
            WitAnswer::Elicited(elicited) => Ok(elicited.action),
            _ => Err(unexpected()),
        }
    }

    async fn sample(&mut self, request: SamplingRequest) -> Result<Sampled, Refusal<AskError>> {
        match self.ask_one("sample", Question::Sample(request)).await? {
            WitAnswer::Sampled(sampled) => Ok(sampled),
            _ => Err(unexpected()),
        }
    }

    async fn ask(
        &mut self,
        questions: Vec<(String, Question)>,
    ) -> Result<Vec<Result<WitAnswer, AskError>>, Refusal<AskError>> {
        let mut names = std::collections::HashSet::new();
        for (name, _) in &questions {
            let valid = (1..=64).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !valid || !names.insert(name.as_str()) {
                return Err(AskError::Invalid(format!(
                    "question name `{name}` is not 1-64 of a-z, A-Z, 0-9, `_`, `-`, or is given twice"
                ))
                .into());
            }
        }
        let questions = questions
            .into_iter()
            .map(|(name, q)| Ok((name, mcp_question(q)?)))
            .collect::<Result<Vec<_>, AskError>>()?;
        self.asking(questions).await
    }

    fn convert_ask_error(&mut self, err: Refusal<AskError>) -> wasmtime::Result<AskError> {
        err.into_wit()
    }
}

impl CallState {
    /// One question, its answer or why there is none.
    async fn ask_one(
        &mut self,
        name: &str,
        question: Question,
    ) -> Result<WitAnswer, Refusal<AskError>> {
        let question = mcp_question(question)?;
        let mut answers = self.asking(vec![(name.to_string(), question)]).await?;
        Ok(answers.pop().ok_or_else(unexpected)??)
    }

    /// Send the questions through the call's link once the policy allows
    /// it, and wait for the answers within the call's life. (The future
    /// owns what it needs: the store's state is not `Sync`.)
    fn asking(
        &self,
        questions: Vec<(String, McpQuestion)>,
    ) -> impl Future<Output = Result<Vec<Result<WitAnswer, AskError>>, Refusal<AskError>>> + Send + 'static
    {
        let granted = self.grants.require("client").map_err(AskError::Denied);
        let count = questions.len();
        let asking = granted.is_ok().then(|| self.call.client.ask(questions));
        let cancel = self.call.cancel.clone();
        let deadline = tokio::time::Instant::from_std(self.call.deadline);
        let late = format!(
            "the call's {} ms deadline passed while it waited for the client's answer: \
             raise `limits.timeout_ms` for plugin `{}` if people need longer",
            self.grants.timeout_ms, self.grants.plugin
        );
        async move {
            granted?;
            let answers = tokio::select! {
                answers = asking.expect("asked when granted") => answers,
                () = cancel.cancelled() => unanswered(count, Unasked::Failed(
                    "the call was cancelled while it waited for the client's answer".into(),
                )),
                () = tokio::time::sleep_until(deadline) => unanswered(count, Unasked::Failed(late)),
            };
            Ok(answers
                .into_iter()
                .map(|answer| match answer {
                    Ok(answer) => wit_answer(answer),
                    Err(Unasked::Unsupported(why)) => Err(AskError::Unsupported(why)),
                    Err(Unasked::Failed(why)) => Err(AskError::Failed(why)),
                })
                .collect())
        }
    }
}

/// A plugin's question as MCP has it, checked.
fn mcp_question(question: Question) -> Result<McpQuestion, AskError> {
    Ok(match question {
        Question::Form(form) => {
            let schema: Value = serde_json::from_str(&form.requested_schema)
                .map_err(|e| AskError::Invalid(format!("requested-schema is not JSON: {e}")))?;
            let params =
                json!({"mode": "form", "message": form.message, "requestedSchema": schema});
            McpQuestion::Elicit(params_of(params)?)
        }
        Question::Url(UrlRequest { message, url }) => {
            let web = url.starts_with("https://") || url.starts_with("http://");
            if !web || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(AskError::Invalid(format!(
                    "`{url}` is not an http or https URL without spaces: give the page the person should open"
                )));
            }
            let params = json!({
                "mode": "url",
                "message": message,
                "url": url,
                "elicitationId": uuid::Uuid::new_v4().to_string(),
            });
            McpQuestion::Elicit(params_of(params)?)
        }
        Question::Sample(request) => McpQuestion::Sample(sampling_params(request)?),
        Question::Roots => McpQuestion::Roots,
    })
}

fn sampling_params(request: SamplingRequest) -> Result<CreateMessageRequestParams, AskError> {
    if request.messages.is_empty() || request.max_tokens == 0 {
        return Err(AskError::Invalid(
            "a sampling request needs at least one message and max-tokens above 0".into(),
        ));
    }
    if let Some(t) = request.temperature.filter(|t| !(0.0..=1.0).contains(t)) {
        return Err(AskError::Invalid(format!(
            "temperature {t} is outside 0.0 to 1.0"
        )));
    }
    let messages: Vec<Value> = request
        .messages
        .into_iter()
        .map(|m| json!({"role": role_name(m.role), "content": content_json(m.content)}))
        .collect();
    let mut params = json!({"messages": messages, "maxTokens": request.max_tokens});
    if let Some(system) = request.system_prompt {
        params["systemPrompt"] = system.into();
    }
    if let Some(t) = request.temperature {
        params["temperature"] = t.into();
    }
    if !request.stop_sequences.is_empty() {
        params["stopSequences"] = request.stop_sequences.into();
    }
    if !request.model_hints.is_empty() {
        let hints: Vec<Value> = request
            .model_hints
            .into_iter()
            .map(|name| json!({"name": name}))
            .collect();
        params["modelPreferences"] = json!({"hints": hints});
    }
    params_of(params)
}

/// The client's answer as the plugin sees it.
fn wit_answer(answer: Answer) -> Result<WitAnswer, AskError> {
    Ok(match answer {
        Answer::Elicited(result) => {
            let content = match result.action {
                ElicitationAction::Accept => result.content.map(|c| c.to_string()),
                _ => None,
            };
            WitAnswer::Elicited(Elicited {
                action: action(result.action),
                content,
            })
        }
        Answer::Sampled(result) => {
            // As MCP JSON: its content is one block or several.
            let answer =
                serde_json::to_value(&result).map_err(|e| AskError::Failed(e.to_string()))?;
            let content = match &answer["content"] {
                Value::Array(blocks) => blocks.iter().find_map(content_of),
                block => content_of(block),
            }
            .ok_or_else(|| {
                AskError::Failed("the client's model answered with no text, image or audio".into())
            })?;
            WitAnswer::Sampled(Sampled {
                role: if answer["role"] == "user" {
                    Role::User
                } else {
                    Role::Assistant
                },
                content,
                model: result.model,
                stop_reason: result.stop_reason,
            })
        }
        Answer::Roots(result) => WitAnswer::Roots(
            result
                .roots
                .into_iter()
                .map(|r| Root {
                    uri: r.uri,
                    name: r.name,
                })
                .collect(),
        ),
    })
}

/// MCP request params from their JSON; what does not fit is the plugin's
/// mistake (e.g. a form field that is an object).
fn params_of<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, AskError> {
    serde_json::from_value(params).map_err(|e| {
        AskError::Invalid(format!(
            "not a request MCP allows: {e} (a form's properties are flat: string, number, integer, boolean, or enum)"
        ))
    })
}

fn unexpected() -> Refusal<AskError> {
    AskError::Failed("the client answered a different question".into()).into()
}

fn action(action: ElicitationAction) -> Action {
    match action {
        ElicitationAction::Accept => Action::Accept,
        ElicitationAction::Decline => Action::Decline,
        // Cancel, and any action a later revision adds: not answered.
        _ => Action::Cancel,
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn content_json(content: SamplingContent) -> Value {
    let media = |kind: &str, m: Media| json!({"type": kind, "data": BASE64.encode(&m.data), "mimeType": m.mime_type});
    match content {
        SamplingContent::Text(text) => json!({"type": "text", "text": text}),
        SamplingContent::Image(m) => media("image", m),
        SamplingContent::Audio(m) => media("audio", m),
    }
}

/// A text, image or audio block of a sampling answer.
fn content_of(block: &Value) -> Option<SamplingContent> {
    let media = || {
        Some(Media {
            data: BASE64.decode(block["data"].as_str()?).ok()?,
            mime_type: block["mimeType"].as_str()?.to_string(),
        })
    };
    match block["type"].as_str()? {
        "text" => Some(SamplingContent::Text(block["text"].as_str()?.to_string())),
        "image" => media().map(SamplingContent::Image),
        "audio" => media().map(SamplingContent::Audio),
        _ => None,
    }
}
