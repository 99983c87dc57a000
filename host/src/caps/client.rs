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
    Action, AskError, Elicited, Host, Role, Sampled, SamplingContent, SamplingRequest,
};
use crate::bindings::mcphost::plugin::content::Media;
use crate::client::{Answer, Question, Unasked};
use crate::store::CallState;

impl Host for CallState {
    async fn elicit_form(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> Result<Elicited, Refusal<AskError>> {
        let schema: Value = serde_json::from_str(&requested_schema)
            .map_err(|e| AskError::Invalid(format!("requested-schema is not JSON: {e}")))?;
        let params = json!({"mode": "form", "message": message, "requestedSchema": schema});
        let answer = self.ask(Question::Elicit(params_of(params)?)).await?;
        let Answer::Elicited(result) = answer else {
            return Err(unexpected());
        };
        let content = match result.action {
            ElicitationAction::Accept => result.content.map(|c| c.to_string()),
            _ => None,
        };
        Ok(Elicited {
            action: action(result.action),
            content,
        })
    }

    async fn elicit_url(
        &mut self,
        message: String,
        url: String,
    ) -> Result<Action, Refusal<AskError>> {
        let web = url.starts_with("https://") || url.starts_with("http://");
        if !web || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(AskError::Invalid(format!(
                "`{url}` is not an http or https URL without spaces: give the page the person should open"
            ))
            .into());
        }
        let params = json!({
            "mode": "url",
            "message": message,
            "url": url,
            "elicitationId": uuid::Uuid::new_v4().to_string(),
        });
        match self.ask(Question::Elicit(params_of(params)?)).await? {
            Answer::Elicited(result) => Ok(action(result.action)),
            Answer::Sampled(_) => Err(unexpected()),
        }
    }

    async fn sample(&mut self, request: SamplingRequest) -> Result<Sampled, Refusal<AskError>> {
        if request.messages.is_empty() || request.max_tokens == 0 {
            return Err(AskError::Invalid(
                "a sampling request needs at least one message and max-tokens above 0".into(),
            )
            .into());
        }
        if let Some(t) = request.temperature.filter(|t| !(0.0..=1.0).contains(t)) {
            return Err(AskError::Invalid(format!("temperature {t} is outside 0.0 to 1.0")).into());
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
        let params: CreateMessageRequestParams = params_of(params)?;
        let Answer::Sampled(result) = self.ask(Question::Sample(params)).await? else {
            return Err(unexpected());
        };
        // The answer as MCP JSON: its content is one block or several.
        let answer = serde_json::to_value(&result).map_err(|e| AskError::Failed(e.to_string()))?;
        let content = match &answer["content"] {
            Value::Array(blocks) => blocks.iter().find_map(content_of),
            block => content_of(block),
        }
        .ok_or_else(|| {
            AskError::Failed("the client's model answered with no text, image or audio".into())
        })?;
        Ok(Sampled {
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

    fn convert_ask_error(&mut self, err: Refusal<AskError>) -> wasmtime::Result<AskError> {
        err.into_wit()
    }
}

impl CallState {
    /// Send `question` through the call's link once the policy allows it,
    /// and wait for the answer within the call's life. (The future owns
    /// what it needs: the store's state is not `Sync`.)
    fn ask(
        &self,
        question: Question,
    ) -> impl Future<Output = Result<Answer, Refusal<AskError>>> + Send + 'static {
        let granted = self.grants.require("client").map_err(AskError::Denied);
        let asking = granted.is_ok().then(|| self.call.client.ask(question));
        let cancel = self.call.cancel.clone();
        let deadline = tokio::time::Instant::from_std(self.call.deadline);
        let late = format!(
            "the call's {} ms deadline passed while it waited for the client's answer: \
             raise `limits.timeout_ms` for plugin `{}` if people need longer",
            self.grants.timeout_ms, self.grants.plugin
        );
        async move {
            granted?;
            let answer = tokio::select! {
                answer = asking.expect("asked when granted") => answer,
                () = cancel.cancelled() => Err(Unasked::Failed(
                    "the call was cancelled while it waited for the client's answer".into(),
                )),
                () = tokio::time::sleep_until(deadline) => Err(Unasked::Failed(late)),
            };
            answer.map_err(|unasked| {
                Refusal::Answer(match unasked {
                    Unasked::Unsupported(why) => AskError::Unsupported(why),
                    Unasked::Failed(why) => AskError::Failed(why),
                })
            })
        }
    }
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
