//! Test fixture plugin for fault injection. Each tool misbehaves in one way
//! so the end-to-end tests can check that the host contains it: the call
//! fails, the host keeps serving.

use plugin_sdk::process::{self, RunRequest, Status};
use plugin_sdk::pty::{self, SpawnRequest};
use plugin_sdk::{McpTool, ToolError, ToolOutput, structured_output, text_output};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Any arguments at all.
type Anything = Map<String, Value>;

struct FaultLoop;
impl McpTool for FaultLoop {
    const NAME: &'static str = "fault_loop";
    const DESCRIPTION: &'static str = "Loops forever.";
    type Args = Anything;
    fn call(_: Anything) -> Result<ToolOutput, ToolError> {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}

struct FaultTrap;
impl McpTool for FaultTrap {
    const NAME: &'static str = "fault_trap";
    const DESCRIPTION: &'static str = "Traps (unreachable).";
    type Args = Anything;
    fn call(_: Anything) -> Result<ToolOutput, ToolError> {
        #[cfg(target_arch = "wasm32")]
        core::arch::wasm32::unreachable();
        // Natively (its unit test only looks at the declarations).
        #[cfg(not(target_arch = "wasm32"))]
        std::process::abort();
    }
}

struct FaultOom;
impl McpTool for FaultOom {
    const NAME: &'static str = "fault_oom";
    const DESCRIPTION: &'static str = "Allocates until memory runs out.";
    type Args = Anything;
    fn call(_: Anything) -> Result<ToolOutput, ToolError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }
}

struct Noop;
impl McpTool for Noop {
    const NAME: &'static str = "noop";
    const DESCRIPTION: &'static str = "Returns its arguments at once.";
    type Args = Anything;
    fn call(args: Anything) -> Result<ToolOutput, ToolError> {
        Ok(text_output(Value::Object(args).to_string()))
    }
}

struct FaultHuge;
impl McpTool for FaultHuge {
    const NAME: &'static str = "fault_huge";
    const DESCRIPTION: &'static str = "Answers with `bytes` bytes of text.";
    type Args = Anything;
    fn call(args: Anything) -> Result<ToolOutput, ToolError> {
        let bytes = args.get("bytes").and_then(Value::as_u64).unwrap_or(0);
        Ok(text_output("x".repeat(bytes as usize)))
    }
}

struct FaultIo;
impl McpTool for FaultIo {
    const NAME: &'static str = "fault_io";
    const DESCRIPTION: &'static str = "Opens `path` and fails with the I/O error as WASI gave it.";
    type Args = Anything;
    fn call(args: Anything) -> Result<ToolOutput, ToolError> {
        let path = args.get("path").and_then(Value::as_str).unwrap_or("/");
        match std::fs::File::open(path) {
            Ok(_) => Ok(text_output("opened")),
            Err(e) => Err(ToolError::new(
                "io_failed",
                format!("cannot open {path}: {e}"),
            )),
        }
    }
}

struct DottedEcho;
impl McpTool for DottedEcho {
    const NAME: &'static str = "dotted.echo";
    const DESCRIPTION: &'static str = "Like noop, with a dotted name.";
    type Args = Anything;
    fn call(args: Anything) -> Result<ToolOutput, ToolError> {
        Noop::call(args)
    }
}

struct Chatty;
impl McpTool for Chatty {
    const NAME: &'static str = "chatty";
    const DESCRIPTION: &'static str = "Logs, reports progress and relays an event.";
    type Args = Anything;
    fn call(_: Anything) -> Result<ToolOutput, ToolError> {
        plugin_sdk::log::log(plugin_sdk::log::Level::Info, "hello from chatty");
        plugin_sdk::log::log(
            plugin_sdk::log::Level::Debug,
            "too quiet to reach the client",
        );
        plugin_sdk::notify::progress(0.5, Some(1.0), Some("half way"));
        plugin_sdk::notify::event("step", r#"{"toolCallId": "t1"}"#);
        Ok(text_output("done"))
    }
}

/// What the plugin's environment holds: how tests see which variables
/// (and secrets) reach a plugin.
struct EnvVar;

#[derive(Deserialize, JsonSchema)]
struct EnvVarArgs {
    name: String,
}

impl McpTool for EnvVar {
    const NAME: &'static str = "env_var";
    const DESCRIPTION: &'static str =
        "The value of one of the plugin's environment variables, or `(unset)`.";
    type Args = EnvVarArgs;
    fn call(args: EnvVarArgs) -> Result<ToolOutput, ToolError> {
        Ok(text_output(
            std::env::var(&args.name).unwrap_or_else(|_| "(unset)".into()),
        ))
    }
}

struct Spawn;

#[derive(Deserialize, JsonSchema)]
struct SpawnArgs {
    program: String,
    /// Where the run's full output goes (the process capability's log).
    log_path: Option<String>,
}

impl McpTool for Spawn {
    const NAME: &'static str = "spawn";
    const DESCRIPTION: &'static str =
        "Runs a program through the process capability; returns how it ended.";
    type Args = SpawnArgs;
    fn call(args: SpawnArgs) -> Result<ToolOutput, ToolError> {
        let mut request = RunRequest::new(args.program, ".")
            .timeout_ms(5_000)
            .tail_bytes(4096);
        if let Some(path) = args.log_path {
            request = request.log_path(path);
        }
        let result = process::run(&request)?;
        let status = match result.status {
            Status::Exited => "exited",
            Status::Timeout => "timeout",
            Status::NoOutput => "no_output",
            Status::SpawnFailed => "spawn_failed",
            Status::Cancelled => "cancelled",
        };
        Ok(structured_output(&json!({
            "status": status,
            "exit_code": result.exit_code,
            "error": result.error,
        })))
    }
}

struct ReadProgram;

#[derive(Deserialize, JsonSchema)]
struct ReadProgramArgs {
    program: String,
}

impl McpTool for ReadProgram {
    const NAME: &'static str = "read_program";
    const DESCRIPTION: &'static str =
        "Reads the first 4 KiB of a program through the process capability, as text.";
    type Args = ReadProgramArgs;
    fn call(args: ReadProgramArgs) -> Result<ToolOutput, ToolError> {
        let bytes = process::read_program(&args.program, 0, 4096)?;
        Ok(text_output(String::from_utf8_lossy(&bytes).into_owned()))
    }
}

struct PtyScript;

#[derive(Deserialize, JsonSchema)]
struct PtyArgs {
    program: String,
    #[serde(default)]
    args: Vec<String>,
    rows: Option<u16>,
    cols: Option<u16>,
    /// Each: `resize` [rows, cols], then `write` text, then a read when
    /// `expect` is there (a pattern, or null to read to the exit).
    steps: Vec<Map<String, Value>>,
    close: Option<bool>,
}

impl McpTool for PtyScript {
    const NAME: &'static str = "pty_script";
    const DESCRIPTION: &'static str = "Drives a program on a pseudo-terminal through the pty capability: spawn, then each step \
        (write, read until a pattern, resize), then close. Returns every read and the exit status.";
    type Args = PtyArgs;
    fn call(args: PtyArgs) -> Result<ToolOutput, ToolError> {
        let session = pty::spawn(&SpawnRequest {
            program: args.program,
            args: args.args,
            cwd: ".".into(),
            env: vec![],
            rows: args.rows.unwrap_or(24),
            cols: args.cols.unwrap_or(80),
        })?;
        let mut reads = Vec::new();
        // Each step: resize, then write, then read (a resize after the write
        // would race the program reading the line and asking for its size).
        for step in &args.steps {
            if let Some(size) = step.get("resize").and_then(Value::as_array) {
                let dim = |i: usize| size[i].as_u64().unwrap() as u16;
                session.resize(dim(0), dim(1))?;
            }
            if let Some(text) = step.get("write").and_then(Value::as_str) {
                session.write(text)?;
            }
            if let Some(expect) = step.get("expect") {
                let timeout = step.get("timeout_ms").and_then(Value::as_u64);
                let read = session.read_until(expect.as_str(), timeout.unwrap_or(5_000))?;
                reads.push(json!({
                    "text": read.text, "matched": read.matched,
                    "exit_code": read.exited.as_ref().and_then(|e| e.exit_code),
                }));
            }
        }
        let end = if args.close.unwrap_or(true) {
            let status = session.close();
            json!({"exit_code": status.exit_code, "signal": status.signal})
        } else {
            json!(null)
        };
        Ok(text_output(json!({"reads": reads, "end": end}).to_string()))
    }
}

/// A hostile plugin's file operations, one after another: each answered
/// `ok` or with the error WASI gave (issue 70: git's own files).
struct FaultFs;
impl McpTool for FaultFs {
    const NAME: &'static str = "fault_fs";
    const DESCRIPTION: &'static str = "Runs file operations (`steps`: {op: append|write|mkdir|rename|link|remove|rmdir, path, to, text}) and answers each one's outcome.";
    type Args = Anything;
    fn call(args: Anything) -> Result<ToolOutput, ToolError> {
        use std::io::Write;
        let steps = args
            .get("steps")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut said = Vec::new();
        for step in steps {
            let field = |name: &str| {
                step.get(name)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let (path, to, text) = (field("path"), field("to"), field("text"));
            let done = match field("op").as_str() {
                "append" => std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&path)
                    .and_then(|mut f| f.write_all(text.as_bytes())),
                "write" => std::fs::write(&path, &text),
                "mkdir" => std::fs::create_dir_all(&path),
                "rename" => std::fs::rename(&path, &to),
                "link" => std::fs::hard_link(&path, &to),
                "remove" => std::fs::remove_file(&path),
                "rmdir" => std::fs::remove_dir_all(&path),
                other => Err(std::io::Error::other(format!("no op `{other}`"))),
            };
            said.push(match done {
                Ok(()) => "ok".to_string(),
                Err(e) => e.to_string(),
            });
        }
        Ok(structured_output(&json!({ "steps": said })))
    }
}

plugin_sdk::export! {
    tools: [FaultLoop, FaultTrap, FaultOom, FaultHuge, FaultIo, FaultFs, Noop, Chatty, DottedEcho, PtyScript, Spawn, EnvVar, ReadProgram],
}
