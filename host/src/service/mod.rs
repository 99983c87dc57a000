//! The host's one entry point for tool calls, shared by the MCP front and
//! the `host call` command: look the tool up, validate the arguments, run
//! the plugin, turn whatever happened into a reply, and log one record per
//! call.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::background::Background;
use crate::bindings::{Filled, ListedContents, Reference, Resource, ToolError};
use crate::caps::content::Attached;
use crate::caps::notify::Change;
use crate::catalog::{Catalog, Loader, Plugin, ToolDef};
use crate::client::{ClientLink, EventTracker, Level};
use crate::runtime::{self, CallFailure};
use crate::store::{CallContext, new_trace_id};

mod reply;
mod start;
pub use reply::Reply;
use reply::{busy_reply, finish, reply_code, reply_from};

pub struct Service {
    pub loader: Loader,
    catalog: RwLock<Arc<Catalog>>,
    /// Whether `catalog` is loaded, not only listed (see
    /// [`Service::start_listed`]).
    loaded: tokio::sync::watch::Sender<bool>,
    pub background: Background,
    /// Cancelled when the host shuts down: every call in flight ends as on
    /// an MCP cancellation (its processes killed).
    shutdown: CancellationToken,
    /// The calls in flight, so a shutdown can wait for their ends.
    in_flight: TaskTracker,
    /// Held by a reload: one that a plugin asked for and one the folder's
    /// watcher started must not each serve a catalog made without the
    /// other's plugins.
    reloading: tokio::sync::Mutex<()>,
}

impl Service {
    fn new(loader: Loader, catalog: Catalog, loaded: bool) -> Service {
        Service {
            loader,
            catalog: RwLock::new(Arc::new(catalog)),
            loaded: tokio::sync::watch::Sender::new(loaded),
            background: Background::default(),
            shutdown: CancellationToken::new(),
            in_flight: TaskTracker::new(),
            reloading: tokio::sync::Mutex::new(()),
        }
    }

    /// Told each time a reload changes the served tools, and each time a
    /// plugin says its resources changed.
    pub fn on_changes(&self) -> tokio::sync::broadcast::Receiver<Change> {
        self.loader.changes.subscribe()
    }

    /// Count something as in flight until the token is dropped: a
    /// shutdown waits for it (the MCP front holds one until a call's last
    /// notification is sent).
    pub fn track(&self) -> tokio_util::task::task_tracker::TaskTrackerToken {
        self.in_flight.token()
    }

    /// The first log line of a serving host: what it serves, and `at`
    /// which transport (`on stdio`, `at http://…/mcp`).
    pub fn log_serving(&self, at: &str) {
        let catalog = self.catalog();
        tracing::info!(
            plugins = catalog.plugins.len(), tools = catalog.served_tools().len(), problems = catalog.problems.len(),
            loading = catalog.listed.len(), dir = %self.loader.plugins_dir.display(), "serving MCP {at}"
        );
    }

    /// Resolves when a shutdown begins: long waits for the client (a
    /// subscription stream) end then, so that they can be answered.
    pub async fn stopping(&self) {
        self.shutdown.cancelled().await;
    }

    /// Take no more calls, cancel those in flight (their process trees are
    /// killed as on an MCP cancellation) and wait, at most `limit`, for
    /// them to end.
    pub async fn shut_down(&self, limit: Duration) {
        self.in_flight.close();
        self.shutdown.cancel();
        self.background.stop().await;
        if tokio::time::timeout(limit, self.in_flight.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                left = self.in_flight.len(),
                "calls still ending at shutdown"
            );
        }
    }

    /// What is served now: while the plugins load, only their listed tools.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().expect("catalog lock").clone()
    }

    /// What is served once the plugins are loaded.
    pub async fn loaded(&self) -> Arc<Catalog> {
        let _ = self.loaded.subscribe().wait_for(|loaded| *loaded).await;
        self.catalog()
    }

    /// What is served once the plugin of tool `exposed` is loaded (or all
    /// are, when no loaded plugin serves it).
    pub async fn loaded_for(&self, exposed: &str) -> Arc<Catalog> {
        let catalog = self.catalog();
        if catalog.tool(exposed).is_some() {
            return catalog;
        }
        let mut changes = self.loaded.subscribe();
        loop {
            let catalog = self.catalog();
            if catalog.tool(exposed).is_some() || *changes.borrow_and_update() {
                return catalog;
            }
            if changes.changed().await.is_err() {
                return self.catalog();
            }
        }
    }

    /// Reload the plugins folder; true when the served tools changed.
    pub async fn reload(&self) -> bool {
        self.reload_against(None).await
    }

    /// Serve what the plugins say their tools are now, when they say it
    /// changed (`notify.tools-changed`), for as long as the service is.
    pub fn relist_when_asked(self: &Arc<Self>) {
        let Some(mut asked) = self.loader.relisted.lock().expect("relist lock").take() else {
            return;
        };
        let service = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(plugin) = asked.recv().await {
                let Some(service) = service.upgrade() else {
                    return;
                };
                let changed = service.reload_against(Some(&plugin)).await;
                tracing::info!(%plugin, changed, "tools listed again, as the plugin asked");
            }
        });
    }

    /// Reload the plugins folder, `relisted` (a plugin's name) asked for its
    /// tools again even if its file is the same.
    async fn reload_against(&self, relisted: Option<&str>) -> bool {
        self.reload_from(|old| match relisted {
            Some(plugin) => Arc::new(old.without(plugin)),
            None => old.clone(),
        })
        .await
    }

    /// The config file changed: read it again and load every plugin anew
    /// under it (grants, filters); whether the served tools changed. A
    /// config that does not load changes nothing.
    pub async fn reconfigure(&self) -> anyhow::Result<bool> {
        self.loader.reconfigure()?;
        Ok(self.reload_from(|_| Arc::new(Catalog::default())).await)
    }

    /// Reload the plugins folder, reusing the plugins of `previous(old)`.
    async fn reload_from(&self, previous: impl FnOnce(&Arc<Catalog>) -> Arc<Catalog>) -> bool {
        let _one_at_a_time = self.reloading.lock().await;
        let old = self.loaded().await;
        let previous = previous(&old);
        let new = Arc::new(self.loader.load_all(&previous).await);
        let changed = old.fingerprint() != new.fingerprint();
        *self.catalog.write().expect("catalog lock") = new.clone();
        self.background.sync(&new);
        if changed {
            let _ = self.loader.changes.send(Change::Tools);
        }
        changed
    }

    /// Take out of `arguments` what client `client` adds to every call on
    /// its own (issue 39: Gemini CLI's `wait_for_previous`, which its
    /// prompt has the model set), unless the tool declares it: such a call
    /// was refused as an unexpected argument, while a typo still is.
    pub fn drop_injected(
        &self,
        exposed: &str,
        client: Option<&str>,
        arguments: &mut Map<String, Value>,
    ) {
        let Some(client) = client.map(str::to_lowercase) else {
            return;
        };
        // Also while the plugins load: the call is taken then, and waits.
        let catalog = self.catalog();
        let Some(tool) = catalog.tool_def(exposed) else {
            return;
        };
        let declared = |key: &str| {
            tool.input_schema
                .get("properties")
                .and_then(|p| p.get(key))
                .is_some()
        };
        for (who, keys) in INJECTED {
            for key in keys.iter().filter(|_| client.contains(who)) {
                if !declared(key) && arguments.remove(*key).is_some() {
                    static SAID: std::sync::Mutex<Vec<&str>> = std::sync::Mutex::new(Vec::new());
                    let mut said = SAID.lock().expect("said lock");
                    if !said.contains(key) {
                        said.push(key);
                        tracing::info!(tool = %exposed, client = %client, argument = %key,
                            "dropped an argument this client adds to every tool call (said once)");
                    }
                }
            }
        }
    }

    /// Run a tool. `None` when no plugin serves `exposed`.
    pub async fn call(
        &self,
        exposed: &str,
        arguments: Map<String, Value>,
        client: Arc<dyn ClientLink>,
        cancel: CancellationToken,
    ) -> Option<Reply> {
        let catalog = self.loaded_for(exposed).await;
        let (plugin, tool) = catalog.tool(exposed)?;
        let _in_flight = self.in_flight.token();
        let started = Instant::now();
        let trace_id = new_trace_id();
        let arguments = Value::Object(arguments);
        // A tool names the boolean argument that makes a call run in the
        // background (`x-background-flag` in its input schema).
        let mode = match tool.input_schema.get("x-background-flag") {
            Some(Value::String(flag)) if arguments.get(flag) == Some(&Value::Bool(true)) => {
                "background"
            }
            _ => "foreground",
        };
        tracing::debug!(target: "call", plugin = %plugin.name, tool = %exposed, %trace_id, "tool call started");
        // The call's own cancellation, or the host's shutdown.
        let call_cancel = self.shutdown.child_token();
        // Every value this plugin's commands may have been given, by this
        // process or an earlier one, is known before anything of the call
        // goes out (its log lines and progress included).
        crate::secret_refs::know_all(&plugin.grants).await;
        let linked = {
            let call_cancel = call_cancel.clone();
            async move {
                cancel.cancelled().await;
                call_cancel.cancel();
                std::future::pending::<()>().await
            }
        };
        let run = run_call(
            plugin,
            tool,
            exposed,
            &arguments,
            client,
            call_cancel,
            &trace_id,
        );
        let reply = tokio::select! {
            biased;
            reply = run => reply,
            _ = linked => unreachable!("the link never ends"),
        };
        if self.shutdown.is_cancelled() {
            tracing::warn!(plugin = %plugin.name, tool = %exposed, "call cancelled: the host is shutting down");
        }
        let reply = reply.scrubbed().fitted_to(tool.checks().output.as_ref());
        Some(finish(
            &plugin.name,
            exposed,
            mode,
            started,
            &trace_id,
            reply,
        ))
    }
}

/// One call of `tool`: its arguments checked, a turn among the plugin's
/// calls, the plugin run, and the promised `call_end` event.
async fn run_call(
    plugin: &Plugin,
    tool: &ToolDef,
    exposed: &str,
    arguments: &Value,
    client: Arc<dyn ClientLink>,
    cancel: CancellationToken,
    trace_id: &str,
) -> Reply {
    let arguments = &*crate::schema::without_null_optionals(&tool.input_schema, arguments);
    if let Err(problems) = tool.checks().input.check(arguments) {
        let summary: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
        let mut details = Map::new();
        details.insert("problems".into(), json!(problems));
        details.insert("trace_id".into(), json!(trace_id));
        // A tool may name its own code for bad arguments (`x-error-code`
        // in its input schema), e.g. a seed's `INVALID_ARGUMENT`.
        let code = tool
            .input_schema
            .get("x-error-code")
            .and_then(Value::as_str)
            .unwrap_or("invalid_request");
        let message = format!(
            "arguments of `{exposed}` do not match its input schema: {}",
            summary.join("; ")
        );
        return Reply::error(code, &message, false, details);
    }
    // After a (re)load, the plugin's first refresh brings its data up to
    // date (e.g. an index of files changed while the host was down).
    tokio::select! {
        biased;
        _ = cancel.cancelled() => {
            return reply_from(Err(CallFailure::Cancelled), false, trace_id);
        }
        () = plugin.first_refresh_done(Duration::from_millis(plugin.grants.timeout_ms)) => {}
    }
    // Wait for a turn (or be told the plugin is busy) before the deadline
    // starts; a client following progress hears that the call is queued.
    let queued = |place: usize| {
        client.progress(
            0.0,
            None,
            Some(format!(
                "queued: plugin `{}` is running {} calls; this call is number {place} in line",
                plugin.name, plugin.grants.concurrency
            )),
        )
    };
    let _turn = tokio::select! {
        biased;
        _ = cancel.cancelled() => {
            return reply_from(Err(CallFailure::Cancelled), false, trace_id);
        }
        turn = plugin.gate.enter(&plugin.name, queued) => match turn {
            Ok(turn) => turn,
            Err(busy) => return busy_reply(&busy, trace_id),
        },
    };
    let tracker = Arc::new(EventTracker::new(client));
    let call = CallContext::new(&tool.name, plugin.grants.timeout_ms, tracker.clone())
        .traced(trace_id, cancel)
        .announcing(&plugin.announcer);
    let attached = Attached::default();
    let call = call.with(attached.clone());
    let outcome = runtime::call_tool(
        &plugin.prepared,
        plugin.grants.clone(),
        call,
        &tool.name,
        &arguments.to_string(),
    )
    .await;
    let mut reply = reply_from(outcome, tool.output_schema.is_some(), trace_id);
    reply.content = attached.take();
    if tracker.relayed() {
        // The promised last event, whatever happened to the call. Without a
        // progress token events go as `info` log records; a failed call's
        // end goes as an `error` one, so a client that asked for errors
        // only still hears how its stream ended.
        let outcome = reply_code(&reply);
        let end = json!({"event": "call_end", "tool": tool.name, "trace_id": trace_id,
                         "data": {"outcome": outcome, "is_error": reply.is_error}});
        if reply.is_error && !tracker.wants_progress() {
            tracker.log(Level::Error, &plugin.name, end);
        } else {
            tracker.event(&plugin.name, end);
        }
    }
    reply
}

/// Why a resource could not be read or a prompt filled in.
#[derive(Debug)]
pub struct AskFailure {
    /// The plugin's error code (`not_found`, `invalid_request`, ...) or
    /// the host's (`unknown_scheme`, `plugin_trapped`, ...).
    pub code: String,
    pub message: String,
}

impl Service {
    /// Read a resource from the plugin that serves its URI scheme.
    pub async fn read_resource(
        &self,
        uri: &str,
        client: Arc<dyn ClientLink>,
    ) -> Result<ListedContents, AskFailure> {
        let catalog = self.loaded().await;
        let Some(plugin) = catalog.resource_plugin(uri) else {
            let schemes: Vec<&str> = catalog.schemes.keys().map(String::as_str).collect();
            return Err(AskFailure {
                code: "unknown_scheme".into(),
                message: format!(
                    "no plugin serves `{uri}`; served schemes: {}",
                    schemes.join(", ")
                ),
            });
        };
        ask(plugin, "resources.read", uri, client, async |call| {
            runtime::read_resource(&plugin.prepared, plugin.grants.clone(), call, uri).await
        })
        .await
    }

    /// The resources every plugin with `resource-list` lists now. A
    /// plugin that fails is left out (and logged), not the whole list; a
    /// resource outside the plugin's scheme too.
    pub async fn list_resources(&self, client: Arc<dyn ClientLink>) -> Vec<Resource> {
        let catalog = self.loaded().await;
        let mut all = Vec::new();
        for plugin in &catalog.plugins {
            if plugin.prepared.exports.resource_list.is_none() {
                continue;
            }
            let listed = ask(
                plugin,
                "resource-list.list",
                "",
                client.clone(),
                async |call| {
                    runtime::list_resources(&plugin.prepared, plugin.grants.clone(), call).await
                },
            )
            .await;
            let Ok(listed) = listed else { continue };
            let (ours, strays): (Vec<_>, Vec<_>) = listed.into_iter().partition(|r| {
                let scheme = crate::caps::notify::uri_scheme(&r.uri);
                scheme.is_some() && scheme == plugin.scheme.as_deref()
            });
            for stray in strays {
                tracing::warn!(plugin = %plugin.name, uri = %stray.uri, scheme = ?plugin.scheme, "listed resource left out: not under the plugin's scheme");
            }
            all.extend(ours);
        }
        all
    }

    /// Completions for an argument of a prompt or a resource template,
    /// from the plugin that offers it.
    pub async fn complete(
        &self,
        reference: Reference,
        argument: &str,
        value: &str,
        context: Vec<(String, String)>,
        client: Arc<dyn ClientLink>,
    ) -> Result<Vec<String>, AskFailure> {
        let catalog = self.loaded().await;
        let plugin = match &reference {
            Reference::Prompt(name) => catalog.prompts.get(name),
            Reference::ResourceTemplate(template) => catalog
                .plugins
                .iter()
                .find(|p| p.templates.iter().any(|t| t.uri_template == *template)),
        };
        let Some(plugin) = plugin else {
            let what = match &reference {
                Reference::Prompt(name) => format!("prompt `{name}`"),
                Reference::ResourceTemplate(t) => format!("resource template `{t}`"),
            };
            return Err(AskFailure {
                code: "not_found".into(),
                message: format!(
                    "no {what}: prompts/list and resources/templates/list show what is offered"
                ),
            });
        };
        ask(
            plugin,
            "completion.complete",
            argument,
            client,
            async |call| {
                runtime::complete(
                    &plugin.prepared,
                    plugin.grants.clone(),
                    call,
                    &reference,
                    argument,
                    value,
                    &context,
                )
                .await
                .map(Ok)
            },
        )
        .await
    }

    /// Fill in a prompt from the plugin that offers it, once its required
    /// arguments are all there.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Vec<(String, String)>,
        client: Arc<dyn ClientLink>,
    ) -> Result<Filled, AskFailure> {
        let catalog = self.loaded().await;
        let found = catalog
            .prompts
            .get(name)
            .and_then(|plugin| Some((plugin, plugin.prompts.iter().find(|p| p.name == name)?)));
        let Some((plugin, prompt)) = found else {
            let names: Vec<&str> = catalog.prompts.keys().map(String::as_str).collect();
            return Err(AskFailure {
                code: "not_found".into(),
                message: format!("no prompt `{name}`; offered: {}", names.join(", ")),
            });
        };
        let missing: Vec<&str> = prompt
            .arguments
            .iter()
            .filter(|a| a.required && !arguments.iter().any(|(k, _)| *k == a.name))
            .map(|a| a.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(AskFailure {
                code: "invalid_argument".into(),
                message: format!(
                    "prompt `{name}` needs the argument(s) {}",
                    missing.join(", ")
                ),
            });
        }
        ask(plugin, "prompts.get", name, client, async |call| {
            runtime::get_prompt(
                &plugin.prepared,
                plugin.grants.clone(),
                call,
                name,
                &arguments,
            )
            .await
        })
        .await
    }
}

/// Ask `plugin` something other than a tool call (`what` of `target`): a
/// turn among its calls, the plugin run, one log record.
async fn ask<T>(
    plugin: &Plugin,
    what: &str,
    target: &str,
    client: Arc<dyn ClientLink>,
    run: impl AsyncFnOnce(CallContext) -> Result<Result<T, ToolError>, CallFailure>,
) -> Result<T, AskFailure> {
    let _turn = plugin
        .gate
        .enter(&plugin.name, |_| ())
        .await
        .map_err(|busy| AskFailure {
            code: "busy".into(),
            message: busy.to_string(),
        })?;
    let started = Instant::now();
    let call =
        CallContext::new(what, plugin.grants.timeout_ms, client).announcing(&plugin.announcer);
    let trace_id = call.trace_id.clone();
    let result = match run(call).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(AskFailure {
            code: e.code,
            message: e.message,
        }),
        Err(failure) => Err(AskFailure {
            code: failure.code().into(),
            message: format!("{failure} (trace id {trace_id})"),
        }),
    };
    let outcome = result.as_ref().map_or_else(|e| e.code.as_str(), |_| "ok");
    tracing::info!(
        target: "call", plugin = %plugin.name, %what, %target, duration_us = started.elapsed().as_micros() as u64,
        %outcome, %trace_id, "plugin asked"
    );
    result
}

/// Arguments clients add to every tool call on their own, by a word of
/// their `clientInfo.name`; dropped when the tool does not declare them.
const INJECTED: &[(&str, &[&str])] = &[("gemini", &["wait_for_previous"])];
