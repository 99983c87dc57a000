//! Test harness: a scratch environment (plugins folder, config, cache,
//! workspace), the real `host serve --stdio` binary, and rmcp's client
//! speaking MCP to it while recording every notification.

// MCP logging is deprecated by SEP-2577; the host still sends it.
#![allow(deprecated)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientConfig, ClientRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, RequestMetaObject,
    ResourceUpdatedNotificationParam, ServerResult, Tool,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, RequestHandle, RoleClient,
    RunningService,
};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::{Mutex, mpsc};

/// Where the plugins were built (scripts/build-plugins).
pub fn built_plugin(name: &str) -> PathBuf {
    let dir = std::env::var_os("MCP_TEST_WASM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/wasm32-wasip2/release")
        });
    let path = dir.join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: build the plugins first with scripts/build-plugins (or set MCP_TEST_WASM_DIR)",
        path.display()
    );
    path
}

/// A result's text content, all of it.
pub fn text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// Whether `program` is on PATH. Under CI=true a missing one fails the
/// test; elsewhere the test says what it skipped and returns false.
pub fn require_program(program: &str, how_to_get: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()));
    if !found {
        skip(&format!("`{program}` is not on PATH; {how_to_get}"));
    }
    found
}

/// A test that cannot run here: a failure under CI=true (which installs
/// everything), elsewhere a skip that says why on the test's output and,
/// when `MCP_TEST_SKIPS` names a file, in that file (scripts/test lists
/// them at the end: cargo counts a skipped test as passed).
pub fn skip(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true, yet {why}"
    );
    eprintln!("SKIPPED: {why}");
    if let Some(file) = std::env::var_os("MCP_TEST_SKIPS") {
        use std::io::Write;
        let test = std::thread::current().name().unwrap_or("?").to_string();
        let line = format!("{test}: {why}\n");
        // One write per line: tests skip from several threads at once.
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

pub struct Env {
    pub dir: tempfile::TempDir,
    pub plugins: PathBuf,
    pub workspace: PathBuf,
    pub cache: PathBuf,
    pub config: PathBuf,
    /// Extra environment variables for the host process.
    pub host_vars: Vec<(String, String)>,
}

impl Env {
    /// A scratch environment with the named built plugins and a user config.
    pub fn new(plugins: &[&str], config: &str) -> Env {
        Env::new_in(&std::env::temp_dir(), plugins, config)
    }

    /// The same, in a new folder of `parent`.
    pub fn new_in(parent: &Path, plugins: &[&str], config: &str) -> Env {
        let dir = tempfile::tempdir_in(parent).unwrap();
        let root = dir.path().to_path_buf();
        let env = Env {
            plugins: root.join("plugins"),
            workspace: root.join("workspace"),
            cache: root.join("cache"),
            config: root.join("config.toml"),
            host_vars: Vec::new(),
            dir,
        };
        std::fs::create_dir_all(&env.plugins).unwrap();
        std::fs::create_dir_all(&env.workspace).unwrap();
        std::fs::write(&env.config, config).unwrap();
        for name in plugins {
            env.add_plugin(name, name);
        }
        env
    }

    pub fn add_plugin(&self, built: &str, as_name: &str) {
        let to = self.plugins.join(format!("{as_name}.wasm"));
        let tmp = self.dir.path().join(format!("{as_name}.wasm.tmp"));
        std::fs::copy(built_plugin(built), &tmp).unwrap();
        std::fs::rename(tmp, to).unwrap();
    }

    pub fn stderr_log(&self) -> PathBuf {
        self.dir.path().join("host-stderr.log")
    }

    /// How often the host has logged `needle` so far.
    pub fn logged(&self, needle: &str) -> usize {
        std::fs::read_to_string(self.stderr_log())
            .unwrap_or_default()
            .matches(needle)
            .count()
    }

    /// The pid of the watchdog of the host `host_pid` (which logs it at
    /// start, before anything else).
    pub fn watchdog_of(&self, host_pid: u32) -> Option<i32> {
        let log = std::fs::read_to_string(self.stderr_log()).unwrap_or_default();
        log.lines()
            .filter(|l| l.contains("watchdog started"))
            .find(|l| l.contains(&format!(" instance={host_pid}.")))?
            .split_once(" pid=")?
            .1
            .split(' ')
            .next()?
            .parse()
            .ok()
    }

    /// Wait until the host has logged `needle` at least `times` times. The
    /// cap is generous: a loaded machine is slow, not wrong.
    pub async fn wait_for_log(&self, needle: &str, times: usize) {
        let cap = Duration::from_secs(180);
        tokio::time::timeout(cap, async {
            while self.logged(needle) < times {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the host did not log {needle:?} {times} times within {cap:?}"));
    }

    /// `host <args>` with this environment's folders.
    pub fn host(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = self.host_without_config(args);
        cmd.arg("--config").arg(&self.config);
        cmd
    }

    /// The same with no `--config`: the user's default one (under
    /// `$XDG_CONFIG_HOME`) is read, if any.
    pub fn host_without_config(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_host"));
        cmd.args(args)
            .arg("--plugins")
            .arg(&self.plugins)
            .arg("--cache-dir")
            .arg(&self.cache)
            .arg("--workspace")
            .arg(&self.workspace)
            .env("MCP_SERVER_LOG", "debug")
            // No sentence model unless a test gives one (`with_model`):
            // embedding a corpus would cost every Godot test CPU time.
            .env("MCP_HOST_EMBEDDING_MODEL", "none")
            .envs(self.host_vars.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// Start `host serve --stdio` and connect an MCP client to it.
    pub async fn start(&self) -> Client {
        self.start_with(&[]).await
    }

    /// The same with extra `serve` options.
    pub async fn start_with(&self, options: &[&str]) -> Client {
        self.start_answering(options, Answers::default()).await
    }

    /// The same with a client that answers the host's questions so.
    pub async fn start_answering(&self, options: &[&str], answers: Answers) -> Client {
        let args: Vec<&str> = ["serve", "--stdio"]
            .iter()
            .chain(options)
            .copied()
            .collect();
        self.serve(self.host(&args), answers).await
    }

    /// `host serve --stdio` with no `--config` and `config_home` as
    /// `$XDG_CONFIG_HOME`.
    pub async fn start_with_default_config(&self, config_home: &Path) -> Client {
        let mut host = self.host_without_config(&["serve", "--stdio"]);
        host.env("XDG_CONFIG_HOME", config_home);
        self.serve(host, Answers::default()).await
    }

    /// A client of `host`, any command serving MCP on stdio (its stderr
    /// goes to this environment's log).
    pub async fn serve_command(&self, host: tokio::process::Command) -> Client {
        self.serve(host, Answers::default()).await
    }

    /// A client of `host`, a `host serve --stdio` command.
    async fn serve(&self, host: tokio::process::Command, answers: Answers) -> Client {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stderr_log())
            .unwrap();
        let (transport, _) = TokioChildProcess::builder(host)
            .stderr(Stdio::from(stderr))
            .spawn()
            .unwrap();
        let pid = transport.id().expect("host pid");
        Client::answering(transport, ClientLifecycleMode::Initialize, pid, answers).await
    }

    /// Start `host serve --http 127.0.0.1:0` with extra options; it is
    /// ready once it has logged its URL.
    pub async fn start_http(&self, options: &[&str]) -> HttpHost {
        // The HTTP clients of the tests are reqwest's, whose rustls (the
        // host's `host install` enables it) needs a process-wide provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let args: Vec<&str> = ["serve", "--http", "127.0.0.1:0"]
            .iter()
            .chain(options)
            .copied()
            .collect();
        let mut child = self
            .host(&args)
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().expect("host pid");
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut log = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stderr_log())
            .await
            .unwrap();
        let url = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                log.write_all(format!("{line}\n").as_bytes()).await.unwrap();
                if let Some(at) = line.find("serving MCP at ") {
                    let url = &line[at + "serving MCP at ".len()..];
                    return url.split_whitespace().next().unwrap().to_string();
                }
            }
            panic!(
                "the host ended before serving: {}",
                self.stderr_log().display()
            )
        })
        .await
        .expect("the host serves HTTP within 120 s");
        // The rest of its log goes where the stdio host's does.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = log.write_all(format!("{line}\n").as_bytes()).await;
            }
        });
        HttpHost { child, url, pid }
    }
}

/// A host serving MCP over HTTP, killed when dropped.
pub struct HttpHost {
    pub child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    pub pid: u32,
}

impl HttpHost {
    /// An MCP client over Streamable HTTP: a session of 2025-11-25 with
    /// `Initialize`, stateless 2026-07-28 with `Discover`.
    pub async fn connect(&self, lifecycle: ClientLifecycleMode, token: Option<&str>) -> Client {
        self.connect_answering(lifecycle, token, Answers::default())
            .await
    }

    /// The same with a client that answers the host's questions so.
    pub async fn connect_answering(
        &self,
        lifecycle: ClientLifecycleMode,
        token: Option<&str>,
        answers: Answers,
    ) -> Client {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.as_str());
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        Client::answering(transport, lifecycle, self.pid, answers).await
    }

    /// The server's base address, `http://127.0.0.1:PORT`.
    pub fn base(&self) -> &str {
        self.url.trim_end_matches("/mcp")
    }
}

/// A notification the client received (payloads kept for failure output).
#[derive(Debug, Clone)]
#[allow(dead_code)]
pub enum Note {
    Progress(ProgressNotificationParam),
    Log(LoggingMessageNotificationParam),
    ToolListChanged,
    ResourceListChanged,
    ResourceUpdated(ResourceUpdatedNotificationParam),
    /// A question the host asked (elicitation or sampling params as JSON).
    Asked(Value),
}

/// How the test client answers the host's questions: `None` leaves the
/// capability undeclared (the client cannot be asked that).
#[derive(Default, Clone)]
pub struct Answers {
    /// Form elicitation (and URL mode when `url`).
    pub elicit: Option<ElicitResult>,
    pub url: bool,
    pub sample: Option<CreateMessageResult>,
    /// Never answer an elicitation (the person walked away).
    pub stall: bool,
    /// The roots the client shares (`None`: it declares no roots).
    pub roots: Option<Vec<String>>,
    /// It takes MCP tasks (the tasks extension of 2026-07-28).
    pub tasks: bool,
}

pub struct Recorder {
    tx: mpsc::UnboundedSender<Note>,
    answers: Answers,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = json!({});
        if self.answers.elicit.is_some() {
            capabilities["elicitation"] = if self.answers.url {
                json!({"form": {}, "url": {}})
            } else {
                json!({"form": {}})
            };
        }
        if self.answers.sample.is_some() {
            capabilities["sampling"] = json!({});
        }
        if self.answers.roots.is_some() {
            capabilities["roots"] = json!({});
        }
        if self.answers.tasks {
            capabilities["extensions"] = json!({"io.modelcontextprotocol/tasks": {}});
        }
        let mut config = ClientConfig::default();
        config.capabilities = serde_json::from_value(capabilities).expect("client capabilities");
        config
    }
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let _ = self
            .tx
            .send(Note::Asked(serde_json::to_value(&request).unwrap()));
        if self.answers.stall {
            std::future::pending::<()>().await;
        }
        self.answers.elicit.clone().ok_or_else(|| {
            rmcp::ErrorData::method_not_found::<rmcp::model::ElicitationCreateRequestMethod>()
        })
    }
    async fn create_message(
        &self,
        request: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, rmcp::ErrorData> {
        let _ = self
            .tx
            .send(Note::Asked(serde_json::to_value(&request).unwrap()));
        self.answers.sample.clone().ok_or_else(|| {
            rmcp::ErrorData::method_not_found::<rmcp::model::CreateMessageRequestMethod>()
        })
    }
    async fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        let roots = self.answers.roots.clone().unwrap_or_default();
        let roots = roots
            .into_iter()
            .map(|uri| json!({"uri": uri}))
            .collect::<Vec<_>>();
        Ok(serde_json::from_value(json!({ "roots": roots })).expect("roots"))
    }
    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.tx.send(Note::ResourceListChanged);
    }
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.tx.send(Note::ResourceUpdated(params));
    }
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.tx.send(Note::Progress(params));
    }
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.tx.send(Note::Log(params));
    }
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.tx.send(Note::ToolListChanged);
    }
}

pub struct Client {
    pub service: RunningService<RoleClient, Recorder>,
    notes: Mutex<mpsc::UnboundedReceiver<Note>>,
    /// The host's process id.
    pub pid: u32,
}

impl Client {
    /// An MCP client over any transport, recording notifications and
    /// answering the host's questions as `answers` says.
    pub async fn answering<T, E, A>(
        transport: T,
        lifecycle: ClientLifecycleMode,
        pid: u32,
        answers: Answers,
    ) -> Client
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let service = Recorder { tx, answers }
            .serve_with_lifecycle(transport, lifecycle)
            .await
            .expect("MCP session with the host");
        Client {
            service,
            notes: Mutex::new(rx),
            pid,
        }
    }
}

pub fn params(name: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name.to_string()).with_arguments(map)
}

impl Client {
    pub async fn tools(&self) -> Vec<Tool> {
        self.service
            .list_tools(None)
            .await
            .expect("tools/list")
            .tools
    }

    pub async fn call(&self, name: &str, args: Value) -> CallToolResult {
        self.service
            .call_tool(params(name, args))
            .await
            .expect("tools/call")
    }

    /// Send a call with a progress token; the handle can cancel it.
    pub async fn start_call(
        &self,
        name: &str,
        args: Value,
        progress_token: &str,
    ) -> RequestHandle<RoleClient> {
        let meta = RequestMetaObject::with_progress_token(rmcp::model::ProgressToken(
            rmcp::model::NumberOrString::String(progress_token.to_string().into()),
        ));
        self.start_call_with_meta(name, args, meta).await
    }

    /// Send a call with this `_meta`; the handle can cancel it.
    pub async fn start_call_with_meta(
        &self,
        name: &str,
        args: Value,
        meta: RequestMetaObject,
    ) -> RequestHandle<RoleClient> {
        let mut p = params(name, args);
        p.meta = Some(meta);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(p));
        self.service
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .expect("send tools/call")
    }

    pub async fn finish(handle: RequestHandle<RoleClient>) -> CallToolResult {
        match handle.await_response().await.expect("tools/call response") {
            ServerResult::CallToolResult(r) => r,
            other => panic!("unexpected response {other:?}"),
        }
    }

    /// Wait for a notification that satisfies `pred`, skipping others.
    /// Whether `notifications/tools/list_changed` arrives within `timeout`.
    pub async fn tools_changed_within(&self, timeout: Duration) -> bool {
        self.wait_note(timeout, |n| matches!(n, Note::ToolListChanged))
            .await
            .is_some()
    }

    /// The names of the tools listed.
    pub async fn tool_names(&self) -> Vec<String> {
        self.tools()
            .await
            .iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    pub async fn wait_note(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&Note) -> bool,
    ) -> Option<Note> {
        let mut rx = self.notes.lock().await;
        tokio::time::timeout(timeout, async {
            while let Some(note) = rx.recv().await {
                if pred(&note) {
                    return Some(note);
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
    }

    /// Every notification received so far.
    pub async fn drain_notes(&self) -> Vec<Note> {
        let mut rx = self.notes.lock().await;
        let mut out = Vec::new();
        while let Ok(note) = rx.try_recv() {
            out.push(note);
        }
        out
    }
}

/// The structured content of a result, which every tool here returns.
/// The result's structure: `structuredContent`, or for an error that does
/// not fit the tool's output schema, the compact JSON under the text's
/// first line (where the host puts it, as a client reads it).
pub fn structured(result: &CallToolResult) -> Value {
    if let Some(value) = &result.structured_content {
        return value.clone();
    }
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    is_error(result)
        .then(|| error_fields(&text))
        .flatten()
        .unwrap_or_else(|| panic!("no structuredContent in {result:?}"))
}

/// An error's fields from its text, where the host puts them when they do
/// not fit the output schema: `code: message` on the first line, the other
/// fields as compact JSON under it.
pub fn error_fields(text: &str) -> Option<Value> {
    let (sentence, rest) = text.split_once('\n')?;
    let mut fields: Value = serde_json::from_str(rest).ok()?;
    let (code, message) = sentence.split_once(": ")?;
    fields["code"] = code.into();
    if fields.get("message").is_none() {
        fields["message"] = message.into();
    }
    Some(fields)
}

pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// Resident and peak resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    (status_kib(pid, "VmRSS:"), status_kib(pid, "VmHWM:"))
}

/// One `kB` field of a process's `/proc/PID/status` (Linux), e.g.
/// `RssAnon:` (its private memory) or `RssFile:` (files it maps, shared).
pub fn status_kib(pid: u32, name: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
}

/// Reset the peak resident memory counter of a process (Linux).
pub fn reset_peak_rss(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

/// Whether a process is gone (or a zombie nobody reaped yet).
pub fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

pub fn run_test_args(runner: &str, extra: Value) -> Value {
    let mut args = json!({
        "runner": runner, "scope": "all",
        "timeout_ms": 120_000, "no_output_timeout_ms": 60_000, "max_output_bytes": 65_536
    });
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    args
}

/// The real Godot class reference (folder with 4.x/ and 3.x/): $GODOT_DOCS,
/// by default ../shared/data/godot-docs beside the repository. Missing is
/// a failure under CI=true and a plain skip elsewhere.
pub fn godot_docs() -> Option<PathBuf> {
    let dir = std::env::var_os("GODOT_DOCS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/godot-docs")
        });
    if dir.join("4.x/classes").is_dir() {
        // The host reports the folders it serves resolved, so tests compare against that.
        return Some(dir.canonicalize().expect("an existing folder resolves"));
    }
    skip(&format!(
        "the Godot docs are not at {}; set GODOT_DOCS to the folder holding 4.x/ and 3.x/ (the Godot class reference)",
        dir.display()
    ));
    None
}

/// A user config that points the Godot plugin at `doc_dir`, its index in
/// the environment's cache.
pub fn godot_config(doc_dir: &Path) -> String {
    format!(
        "[plugins.godot]\nfs.read = [{d:?}]\nvars.GODOT_DOC_DIR = {d:?}\nindex.root = \"${{plugin_cache}}/index\"\n",
        d = doc_dir.display().to_string()
    )
}

/// The same, with the Godot manual ($GODOT_DOCS/manual, the godot-docs
/// rst sources) searched beside it.
pub fn godot_config_with_manual(doc_dir: &Path, manual: &Path) -> String {
    format!(
        "[plugins.godot]\nfs.read = [{d:?}, {m:?}]\nvars.GODOT_DOC_DIR = {d:?}\nvars.GODOT_MANUAL_DIR = {m:?}\nindex.root = \"${{plugin_cache}}/index\"\n",
        d = doc_dir.display().to_string(),
        m = manual.display().to_string()
    )
}

/// The sentence model (scripts/setup-model): $MCP_TEST_EMBEDDING_MODEL
/// (scripts/test sets it, and turns the host's own variable off for every
/// other test), else $MCP_HOST_EMBEDDING_MODEL, else the host's default
/// folder; a skip when missing (a failure under CI=true).
pub fn embedding_model() -> Option<PathBuf> {
    let dir = ["MCP_TEST_EMBEDDING_MODEL", "MCP_HOST_EMBEDDING_MODEL"]
        .iter()
        .filter_map(std::env::var_os)
        .find(|v| v != "none")
        .map(PathBuf::from)
        .or_else(|| Some(dirs_home()?.join(".local/share/mcp-host/models/godot-minilm-l6")))?;
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    skip(&format!(
        "no sentence model in {}; run scripts/setup-model or set MCP_HOST_EMBEDDING_MODEL",
        dir.display()
    ));
    None
}

pub fn dirs_home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

impl Env {
    /// Hosts of this environment embed with the model in `dir`.
    pub fn with_model(&mut self, dir: &Path) {
        self.host_vars
            .push(("MCP_HOST_EMBEDDING_MODEL".into(), dir.display().to_string()));
    }
}

// --- Cofer: git, the cofer command, Podman and its test image.

pub fn cofer_image() -> String {
    std::env::var("COFER_TEST_IMAGE").unwrap_or_else(|_| "localhost/cofer-test:latest".into())
}

/// Podman and the Cofer test image, or a skip (a failure under CI=true).
pub fn podman_ready() -> bool {
    if !require_program(
        "podman",
        "install Podman (`apt-get install podman runc`; .ci/run does)",
    ) {
        return false;
    }
    let present = Command::new("podman")
        .args(["image", "exists", &cofer_image()])
        .env("CONTAINERS_CONF", containers_conf())
        .status()
        .is_ok_and(|s| s.success());
    if !present {
        skip(&format!(
            "the image {} is missing: run scripts/test-image",
            cofer_image()
        ));
    }
    present
}

/// The user's CONTAINERS_CONF, else the repository's (runc, ulimits).
pub fn containers_conf() -> String {
    std::env::var("CONTAINERS_CONF").unwrap_or_else(|_| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../config/containers.conf")
            .to_string_lossy()
            .into_owned()
    })
}

/// The user's git. `COFER_TEST_USER_GIT` tells a test filter that it is not
/// the host's git running it (the host clears git's environment).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("COFER_TEST_USER_GIT", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `cofer` command lives in its own crate (`plugins/cofer/cli`), so
/// it is not this package's binary: `scripts/test` builds it first.
pub fn cofer(dir: &Path, args: &[&str]) -> std::process::Output {
    cofer_command(dir, args).output().unwrap()
}

/// The same, not yet started.
pub fn cofer_command(dir: &Path, args: &[&str]) -> Command {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/cofer");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p cofer-cli` (scripts/test does)",
        bin.display()
    );
    let mut command = Command::new(bin);
    command
        .args(args)
        .current_dir(dir)
        .env("GIT_PAGER", "cat")
        .env("COFER_TEST_USER_GIT", "1");
    command
}

/// `podman args` as the user would run it; its stdout. Without Podman,
/// nothing (a fixture cleaning up after a test that ran without it).
pub fn podman(args: &[&str]) -> String {
    match Command::new("podman")
        .args(args)
        .env("CONTAINERS_CONF", containers_conf())
        .output()
    {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => panic!("podman {args:?}: {e}"),
    }
}

/// An npm-installed CLI the tests run for real: `$var`, else `program` on
/// PATH. Missing is a skip that says how to install it (a failure under
/// CI=true).
pub fn npm_cli(var: &str, program: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os(var).map(PathBuf::from).or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    });
    match found {
        Some(path) if path.exists() => Some(path),
        _ => {
            skip(&format!(
                "no {program}; install it with `npm install --prefix DIR {package}` and set {var}=DIR/node_modules/.bin/{program} (.ci/run does)"
            ));
            None
        }
    }
}

/// Whether the host (by its start-up log) puts runs in cgroups. Without,
/// a test that needs them is skipped visibly (a failure under CI=true).
pub fn require_cgroups(host_log: &str) -> bool {
    if host_log.contains("runs are contained in cgroups") {
        return true;
    }
    skip("the host cannot make cgroups here (cgroup v2 not mounted or not writable)");
    false
}

/// Live processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && !process_gone(pid) {
            found.push(pid);
        }
    }
    found
}

/// `host serve --stdio` spoken to by hand (a line in, a line out), its
/// stderr appended to the env's log. `stdout`: piped to read the answers,
/// or null when only the host's end matters.
pub fn serve_raw(env: &Env, stdout: Stdio) -> tokio::process::Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(env.stderr_log())
        .unwrap();
    env.host(&["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The lines that open an MCP session (initialize, then initialized).
pub fn handshake() -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    format!("{initialize}\n{initialized}\n")
}

/// Send `signal` to the host `pid`; within 2 s no process whose command
/// line contains `needle` may be left.
pub async fn end_host_and_check_gone(pid: u32, signal: nix::sys::signal::Signal, needle: &str) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
    if let Err(left) = gone(needle, Duration::from_secs(2)).await {
        panic!("{signal:?}: `{needle}` outlived the host: {left:?}");
    }
}

/// Wait until no process carries `needle` in its command line (Wine's
/// Windows processes too: they are this machine's); those left after
/// `within`.
pub async fn gone(needle: &str, within: Duration) -> Result<(), Vec<i32>> {
    let start = std::time::Instant::now();
    loop {
        let left = processes_with(needle);
        if left.is_empty() {
            return Ok(());
        }
        if start.elapsed() > within {
            return Err(left);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every file under `dir`.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| {
            if e.path().is_dir() {
                walk(&e.path())
            } else {
                vec![e.path()]
            }
        })
        .collect()
}

/// The stdout of a command that must have succeeded (else its output, in
/// the failure).
pub fn succeeded(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
