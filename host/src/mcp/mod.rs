//! The MCP front: rmcp's server handler, one per session (stdio has one,
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

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    CompletionInfo, ContentBlock, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    Implementation, InputResponses, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference,
    Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams,
};
use rmcp::service::{
    NotificationContext, RequestContext, RoleServer, SubscriptionContext, SubscriptionSendError,
};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::bindings::Reference as PluginReference;
use crate::bindings::exports::mcphost::plugin::prompts::Role as PluginRole;
use crate::bindings::mcphost::plugin::content::ResourceBody;
use crate::caps::notify::Change;
use crate::client::Level;

mod link;
mod rounds;
pub mod unread;

use crate::service::{AskFailure, Reply, Service};
use link::{Levels, McpLink, level_of};
pub use rounds::Rounds;
use rounds::{Outcome, Round};

/// How long a client may keep a list without asking again: lists change
/// only when plugins do, and subscribers hear of that at once.
const LIST_TTL_MS: u64 = 60_000;

#[derive(Clone)]
pub struct McpFront {
    service: Arc<Service>,
    /// Tool calls waiting for a 2026-07-28 client's answer.
    rounds: Arc<Rounds>,
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
    pub fn new(service: Arc<Service>, rounds: Arc<Rounds>) -> Self {
        let session = CancellationToken::new();
        McpFront {
            service,
            rounds,
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
    async fn in_rounds(
        &self,
        what: String,
        state: Option<&str>,
        given: Option<InputResponses>,
        run: rounds::Run,
        link: &Arc<McpLink>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Round, McpError> {
        let capabilities = context.meta.client_capabilities();
        let running = match state {
            Some(state) => {
                self.rounds
                    .resume(&what, state, given.as_ref(), link.clone(), capabilities)?
            }
            None => self
                .rounds
                .start(what, run, link.clone(), capabilities, given),
        };
        Ok(running.round(&self.rounds, &context.ct).await)
    }

    /// The MCP `instructions`: one line on what serves the tools, then each
    /// plugin's own instructions under its name.
    fn instructions(&self) -> String {
        let mut text = String::from(
            "Tools are served by sandboxed WebAssembly plugins; each tool's description says what it does.",
        );
        for plugin in &self.service.catalog().plugins {
            if let Some(theirs) = &plugin.instructions {
                text.push_str(&format!("\n\n## {}\n\n{theirs}", plugin.name));
            }
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

impl ServerHandler for McpFront {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .enable_prompts()
                .enable_completions()
                .enable_logging()
                .build(),
        )
        .with_server_info(Implementation::new(
            "mcp-wasm-host",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(self.instructions())
    }

    /// MCP 2026-07-28 clients hear of changes through `subscriptions/listen`:
    /// the tool list, resource lists, and the resources they name.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = Some(true);
        accepted.resources_list_changed = Some(true);
        accepted.resource_subscriptions = requested.resource_subscriptions.clone();
        Some(accepted)
    }

    /// A session of MCP before 2026-07-28 began: it hears of list changes
    /// unasked, and of the resources it subscribed to, as those revisions
    /// have it.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let changes = self.service.on_changes();
        let session = self.session.clone();
        let subscribed = self.subscribed.clone();
        let peer = context.peer;
        tokio::spawn(async move {
            forward_changes(changes, session.cancelled(), |change| {
                let peer = peer.clone();
                let wanted = match &change {
                    Change::Resource(uri) => {
                        subscribed.lock().expect("subscriptions lock").contains(uri)
                    }
                    _ => true,
                };
                async move {
                    let sent = match change {
                        _ if !wanted => return true,
                        Change::Tools => peer.notify_tool_list_changed().await,
                        Change::Resources => peer.notify_resource_list_changed().await,
                        Change::Resource(uri) => {
                            peer.notify_resource_updated(
                                rmcp::model::ResourceUpdatedNotificationParam::new(uri),
                            )
                            .await
                        }
                    };
                    sent.is_ok()
                }
            })
            .await;
        });
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let ended = async {
            tokio::select! {
                () = context.cancelled() => {}
                () = self.service.stopping() => {}
            }
        };
        forward_changes(self.service.on_changes(), ended, |change| {
            let sink = context.sink().clone();
            async move {
                let sent = match change {
                    Change::Tools => sink.notify_tool_list_changed().await,
                    Change::Resources => sink.notify_resource_list_changed().await,
                    Change::Resource(uri) => sink.notify_resource_updated(uri).await,
                };
                // A resource the client did not name is not for it.
                matches!(
                    sent,
                    Ok(()) | Err(SubscriptionSendError::NotificationNotAccepted(_))
                )
            }
        })
        .await;
        Ok(())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if self
            .service
            .catalog()
            .resource_plugin(&request.uri)
            .is_none()
        {
            return Err(McpError::resource_not_found(
                format!(
                    "no plugin serves `{}`: resources/list and resources/templates/list show what is served",
                    request.uri
                ),
                None,
            ));
        }
        self.subscribed
            .lock()
            .expect("subscriptions lock")
            .insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribed
            .lock()
            .expect("subscriptions lock")
            .remove(&request.uri);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let link = McpLink::new(&context, None, self.levels(&context));
        let listed = self.service.list_resources(link.clone()).await;
        link.close().await;
        let resources = listed
            .into_iter()
            .map(|r| {
                let mut resource = Resource::new(r.uri, r.name);
                resource.title = r.title;
                resource.description = r.description;
                resource.mime_type = r.mime_type;
                resource.size = r.size;
                resource
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources).with_ttl_ms(LIST_TTL_MS))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let reference = match request.r#ref {
            Reference::Prompt(p) => PluginReference::Prompt(p.name),
            Reference::Resource(r) => PluginReference::ResourceTemplate(r.uri),
            _ => {
                return Err(McpError::invalid_params(
                    "completion is offered for prompts (`ref/prompt`) and resource templates (`ref/resource`)",
                    None,
                ));
            }
        };
        let given = request
            .context
            .and_then(|c| c.arguments)
            .unwrap_or_default()
            .into_iter()
            .collect();
        let link = McpLink::new(&context, None, self.levels(&context));
        let values = self
            .service
            .complete(
                reference,
                &request.argument.name,
                &request.argument.value,
                given,
                link.clone(),
            )
            .await;
        link.close().await;
        let mut values = values.map_err(|f| {
            let data = serde_json::json!({ "code": f.code });
            asked_error(f, data, McpError::invalid_params)
        })?;
        let total = values.len();
        values.truncate(CompletionInfo::MAX_VALUES);
        let mut info = CompletionInfo::new(values).expect("cut to the maximum");
        info.total = Some(total as u32);
        info.has_more = Some(total > CompletionInfo::MAX_VALUES);
        Ok(CompleteResult::new(info))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let catalog = self.service.catalog();
        let tools = catalog
            .tools
            .iter()
            .map(|(name, (plugin, i))| served_tool(name, &plugin.tools[*i]))
            .collect();
        Ok(ListToolsResult::with_all_items(tools).with_ttl_ms(LIST_TTL_MS))
    }

    /// The tool as listed: rmcp checks a call's `Mcp-Param-*` headers
    /// against the `x-mcp-header` properties of its input schema (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let catalog = self.service.catalog();
        let (plugin, i) = catalog.tools.get(name)?;
        Some(served_tool(name, &plugin.tools[*i]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let catalog = self.service.catalog();
        let templates = catalog
            .plugins
            .iter()
            .flat_map(|p| &p.templates)
            .map(|t| {
                ResourceTemplate::new(t.uri_template.clone(), t.name.clone())
                    .with_description(t.description.clone())
                    .with_mime_type(t.mime_type.clone())
            })
            .collect();
        Ok(ListResourceTemplatesResult::with_all_items(templates).with_ttl_ms(LIST_TTL_MS))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let catalog = self.service.catalog();
        let prompts = catalog
            .plugins
            .iter()
            .flat_map(|p| &p.prompts)
            .map(|p| {
                let mut prompt = Prompt::new(
                    p.name.clone(),
                    p.description.clone(),
                    Some(
                        p.arguments
                            .iter()
                            .map(|a| {
                                let mut arg = PromptArgument::new(a.name.clone());
                                arg.description = a.description.clone();
                                arg.required = Some(a.required);
                                arg
                            })
                            .collect(),
                    ),
                );
                prompt.title = p.title.clone();
                prompt
            })
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts).with_ttl_ms(LIST_TTL_MS))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let arguments = request
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(text) => (k, text),
                other => (k, other.to_string()),
            })
            .collect();
        let levels = self.levels(&context);
        let per_request = matches!(levels, Levels::Request(_));
        let link = McpLink::new(&context, None, levels);
        let filled = if per_request {
            // 2026-07-28: a prompt's questions are asked in rounds too.
            let what = format!("prompts/get {}", request.name);
            let (service, name) = (self.service.clone(), request.name.clone());
            let get: rounds::Run = Box::new(move |relay, _| {
                Box::pin(async move {
                    Outcome::Prompt(service.get_prompt(&name, arguments, relay).await)
                })
            });
            let state = request.request_state.as_deref();
            let given = request.input_responses.clone();
            match self
                .in_rounds(what, state, given, get, &link, &context)
                .await?
            {
                Round::Done(Outcome::Prompt(filled), _) => filled,
                Round::Done(Outcome::Call(_), _) => unreachable!("a prompt's round"),
                Round::Asks(input_required) => {
                    link.close().await;
                    return Ok(input_required.into());
                }
            }
        } else {
            self.service
                .get_prompt(&request.name, arguments, link.clone())
                .await
        };
        link.close().await;
        let data = |code: &str| serde_json::json!({ "code": code, "prompt": request.name });
        // An unknown prompt name is invalid params, as the protocol has it.
        let filled = filled.map_err(|f| {
            let data = data(&f.code);
            asked_error(f, data, McpError::invalid_params)
        })?;
        let own_scheme = self
            .service
            .catalog()
            .prompts
            .get(&request.name)
            .and_then(|p| p.scheme.clone());
        let mut messages = Vec::with_capacity(filled.messages.len());
        for m in filled.messages {
            let content =
                crate::caps::content::to_mcp(m.content, own_scheme.as_deref()).map_err(|e| {
                    McpError::internal_error(
                        format!("the plugin's prompt is malformed: {e:?}"),
                        Some(data("invalid_plugin_output")),
                    )
                })?;
            let role = match m.role {
                PluginRole::User => Role::User,
                PluginRole::Assistant => Role::Assistant,
            };
            messages.push(PromptMessage::new(role, content));
        }
        let mut result = GetPromptResult::new(messages);
        result.description = filled.description;
        Ok(result.into())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let link = McpLink::new(&context, None, self.levels(&context));
        let read = self.service.read_resource(&request.uri, link.clone()).await;
        link.close().await;
        let c = read.map_err(|f| {
            let data = serde_json::json!({ "code": f.code, "uri": request.uri });
            asked_error(f, data, McpError::resource_not_found)
        })?;
        let contents = match c.body {
            ResourceBody::Text(text) => ResourceContents::text(text, c.uri),
            ResourceBody::Blob(data) => ResourceContents::blob(BASE64.encode(&data), c.uri),
        };
        let contents = match c.mime_type {
            Some(mime) => contents.with_mime_type(mime),
            None => contents,
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // A shutdown waits for this until the call's notifications are out.
        let _in_flight = self.service.track();
        let levels = self.levels(&context);
        let per_request = matches!(levels, Levels::Request(_));
        let link = McpLink::new(&context, context.meta.get_progress_token(), levels);
        let name = request.name.clone();
        let client = context
            .meta
            .client_info()
            .map(|info| info.name)
            .or_else(|| context.peer.peer_info().map(|p| p.client_info.name.clone()));
        let mut request = request;
        let mut arguments = request.arguments.take().unwrap_or_default();
        self.service
            .drop_injected(&name, client.as_deref(), &mut arguments);
        request.arguments = Some(arguments);
        let reply = if per_request {
            // 2026-07-28: a question ends the round with `input_required`.
            let what = format!("tools/call {name}");
            let state = request.request_state.clone();
            let given = request.input_responses.clone();
            let service = self.service.clone();
            let arguments = request.arguments.unwrap_or_default();
            let call: rounds::Run = Box::new(move |relay, cancel| {
                Box::pin(async move {
                    Outcome::Call(service.call(&request.name, arguments, relay, cancel).await)
                })
            });
            match self
                .in_rounds(what, state.as_deref(), given, call, &link, &context)
                .await?
            {
                // The plugin gave up for want of what the client lacks: MCP
                // has an error for that.
                Round::Done(Outcome::Call(Some(reply)), needed)
                    if gave_up_unsupported(&reply) && !needed.is_empty() =>
                {
                    link.close().await;
                    return Err(missing_capabilities(needed));
                }
                Round::Done(Outcome::Call(reply), _) => reply,
                Round::Done(Outcome::Prompt(_), _) => unreachable!("a tool call's round"),
                Round::Asks(input_required) => {
                    link.close().await;
                    return Ok(input_required.into());
                }
            }
        } else {
            self.service
                .call(
                    &request.name,
                    request.arguments.unwrap_or_default(),
                    link.clone(),
                    context.ct.clone(),
                )
                .await
        };
        // Everything the call sent goes out before its response.
        link.close().await;
        let Some(reply) = reply else {
            return Err(McpError::invalid_params(
                format!("unknown tool `{name}`: tools/list shows the tools this host serves"),
                None,
            ));
        };
        Ok(held_for_reading(to_result(reply), &context).into())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.min_level.lock().expect("level lock") = level_of(request.level);
        Ok(())
    }
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
    match ledger.hold(bytes) {
        Ok(()) => result,
        Err(waiting) => to_result(Reply::error(
            "clients_not_reading",
            &format!(
                "this result ({bytes} bytes) is dropped: {} MiB of earlier answers still wait for \
                 HTTP clients that have not read them (the most the host keeps is {} MiB); read \
                 those responses, or end the connections that stopped reading",
                waiting >> 20,
                unread::MAX_UNREAD_BYTES >> 20
            ),
            true,
            serde_json::Map::new(),
        )),
    }
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
