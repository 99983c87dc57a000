//! The MCP methods of a session ([`McpFront`]): what rmcp calls for each
//! request and notification.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
    CompleteRequestParams, CompleteResult, CompletionInfo, CustomRequest, CustomResult,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetTaskParams, GetTaskResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Reference, Resource, ResourceContents, ResourceTemplate,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{
    NotificationContext, RequestContext, RoleServer, SubscriptionContext, SubscriptionSendError,
};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::Value;

use crate::bindings::Reference as PluginReference;
use crate::bindings::mcphost::plugin::content::ResourceBody;
use crate::caps::notify::Change;

use super::link::{Levels, McpLink, level_of};
use super::rounds::{self, Lateness, Outcome, Round};
use super::tasks;
use super::{
    LIST_TTL_MS, McpFront, asked_error, forward_changes, gave_up_unsupported, held_for_reading,
    missing_capabilities, served_tool, to_result,
};
use crate::catalog::TaskSupport;

impl ServerHandler for McpFront {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_prompts()
            .enable_completions()
            .enable_logging()
            .enable_tasks()
            .build();
        // Views (MCP Apps): served to clients that declare the extension.
        capabilities
            .extensions
            .get_or_insert_default()
            .insert(crate::views::EXTENSION.into(), Default::default());
        ServerConfig::new(capabilities)
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
            .loaded()
            .await
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
        let mut resources: Vec<Resource> = listed
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
        if crate::views::wanted(context.client_capabilities().as_ref()) {
            let catalog = self.service.loaded().await;
            for (uri, view) in catalog.views() {
                let mut resource = Resource::new(uri, view.name.clone());
                resource.title = Some(view.title.clone());
                resource.mime_type = Some(crate::views::MIME_TYPE.into());
                resources.push(resource);
            }
        }
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
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let catalog = self.service.catalog();
        let views = crate::views::wanted(context.client_capabilities().as_ref());
        let tools = catalog
            .served_tools()
            .into_iter()
            .map(|(name, def)| {
                let mut tool = served_tool(name, def);
                if let Some(uri) = def.view.as_ref().filter(|_| views) {
                    tool.meta
                        .get_or_insert_default()
                        .insert("ui".into(), serde_json::json!({ "resourceUri": uri }));
                }
                tool
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools).with_ttl_ms(LIST_TTL_MS))
    }

    /// The tool as listed: rmcp checks a call's `Mcp-Param-*` headers
    /// against the `x-mcp-header` properties of its input schema (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        Some(served_tool(name, self.service.catalog().tool_def(name)?))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let catalog = self.service.loaded().await;
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
        let catalog = self.service.loaded().await;
        let prompts = catalog
            .plugins
            .iter()
            .flat_map(|p| &p.prompts)
            .map(super::prompts::listed)
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
                .in_rounds(what, state, given, get, &link, &context, None)
                .await?
            {
                Round::Done(Outcome::Prompt(filled), _) => filled,
                Round::Done(Outcome::Call(_), _) | Round::Late(_) => {
                    unreachable!("a prompt's round, with no grace")
                }
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
            .loaded()
            .await
            .prompts
            .get(&request.name)
            .and_then(|p| p.scheme.clone());
        let messages =
            super::prompts::messages(filled.messages, own_scheme.as_deref()).map_err(|e| {
                McpError::internal_error(
                    format!("the plugin's prompt is malformed: {e:?}"),
                    Some(data("invalid_plugin_output")),
                )
            })?;
        let mut result = GetPromptResult::new(messages);
        result.description = filled.description;
        Ok(result.into())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if request.uri.starts_with("ui://") {
            let catalog = self.service.loaded().await;
            let view = catalog.view(&request.uri).ok_or_else(|| {
                McpError::resource_not_found(
                    format!("no view `{}`: resources/list names the views", request.uri),
                    None,
                )
            })?;
            let mut contents = ResourceContents::text(view.html.clone(), request.uri.clone())
                .with_mime_type(crate::views::MIME_TYPE);
            if let ResourceContents::TextResourceContents { meta, .. } = &mut contents {
                *meta = serde_json::from_value(crate::views::resource_meta()).ok();
            }
            return Ok(ReadResourceResult::new(vec![contents]).into());
        }
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
        // A tool that may run long runs as a task for a client that takes
        // them (2026-07-28 requests only: older revisions have no tasks).
        let tasks = self
            .service
            .loaded_for(&name)
            .await
            .tool(&name)
            .map_or(TaskSupport::Never, |(_, tool)| tool.tasks);
        let takes_tasks = per_request
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        if tasks == TaskSupport::Required && !takes_tasks {
            link.close().await;
            return Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        // A tool that is always a task asks its questions in rounds first,
        // then works as the task; one that may be a task becomes one when
        // it is slow or asks (a person may be slow to answer).
        let late = (tasks != TaskSupport::Never && takes_tasks).then_some(Lateness {
            after: tasks::GRACE,
            when_asking: tasks == TaskSupport::Optional,
        });
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
                .in_rounds(what, state.as_deref(), given, call, &link, &context, late)
                .await?
            {
                Round::Late(running) => {
                    link.close().await;
                    let client = tasks::client_of(&context);
                    return Ok(self.unfinished.tasks.adopt(running, client)?.into());
                }
                Round::Done(Outcome::Call(Some(reply)), _) if tasks == TaskSupport::Required => {
                    link.close().await;
                    let client = tasks::client_of(&context);
                    return Ok(self.unfinished.tasks.ended(reply, client)?.into());
                }
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
            let why = match self.service.catalog().hidden.get(name.as_ref()) {
                Some(why) => format!("tool `{name}` is hidden: {why}"),
                None => {
                    format!("unknown tool `{name}`: tools/list shows the tools this host serves")
                }
            };
            return Err(McpError::invalid_params(why, None));
        };
        Ok(held_for_reading(to_result(reply), &context).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let client = tasks::client_of(&context);
        self.unfinished.tasks.get(&request.task_id, &client)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let client = tasks::client_of(&context);
        self.unfinished
            .tasks
            .update(&request.task_id, &client, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let client = tasks::client_of(&context);
        self.unfinished.tasks.cancel(&request.task_id, &client)
    }

    /// A request rmcp could not read as any MCP method's: an MCP method
    /// whose params do not fit is invalid params, naming what to fix.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(super::malformed::refusal(&request))
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
