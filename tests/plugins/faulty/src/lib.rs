//! Test fixture plugin for fault injection. Each tool misbehaves in one way
//! so the end-to-end tests can check that the host contains it: the call
//! fails, the host keeps serving.

use plugin_sdk::{Guest, Tool, ToolError, ToolOutput, tool};
use serde_json::json;

struct Faulty;

impl Guest for Faulty {
    fn list() -> Vec<Tool> {
        let empty = json!({"type": "object", "properties": {}});
        vec![
            tool("fault_loop", "Loops forever.", empty.clone(), None),
            tool("fault_trap", "Traps (unreachable).", empty.clone(), None),
            tool(
                "fault_oom",
                "Allocates until memory runs out.",
                empty.clone(),
                None,
            ),
            tool(
                "noop",
                "Returns its arguments at once.",
                json!({"type": "object"}),
                None,
            ),
            tool(
                "chatty",
                "Logs, reports progress and relays an event.",
                json!({"type": "object"}),
                None,
            ),
            tool(
                "dotted.echo",
                "Like noop, with a dotted name.",
                json!({"type": "object"}),
                None,
            ),
            tool(
                "pty_script",
                "Drives a program on a pseudo-terminal through the pty capability: spawn, then each step \
                 (write, read until a pattern, resize), then close. Returns every read and the exit status.",
                json!({"type": "object", "properties": {
                    "program": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}},
                    "rows": {"type": "integer"}, "cols": {"type": "integer"},
                    "steps": {"type": "array"}, "close": {"type": "boolean"}
                }, "required": ["program", "steps"]}),
                None,
            ),
            tool(
                "spawn",
                "Runs a program through the process capability.",
                json!({"type": "object", "properties": {"program": {"type": "string"}}, "required": ["program"]}),
                None,
            ),
        ]
    }

    fn call(name: String, arguments: String) -> Result<ToolOutput, ToolError> {
        match name.as_str() {
            "fault_loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "fault_trap" => core::arch::wasm32::unreachable(),
            "fault_oom" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "noop" | "dotted.echo" => Ok(ToolOutput {
                text: arguments,
                structured: None,
            }),
            "spawn" => {
                let args: serde_json::Value = serde_json::from_str(&arguments).unwrap();
                let request = plugin_sdk::process::RunRequest {
                    program: args["program"].as_str().unwrap().to_string(),
                    args: vec![],
                    cwd: ".".into(),
                    env: vec![],
                    stdin: None,
                    timeout_ms: 5_000,
                    no_output_timeout_ms: None,
                    tail_bytes: 4096,
                    log_path: None,
                };
                let result = plugin_sdk::process::run(&request)?;
                Ok(ToolOutput {
                    text: format!("{:?}", result.status),
                    structured: None,
                })
            }
            "pty_script" => pty_script(&serde_json::from_str(&arguments).unwrap()),
            "chatty" => {
                plugin_sdk::log::log(plugin_sdk::log::Level::Info, "hello from chatty");
                plugin_sdk::log::log(
                    plugin_sdk::log::Level::Debug,
                    "too quiet to reach the client",
                );
                plugin_sdk::notify::progress(0.5, Some(1.0), Some("half way"));
                plugin_sdk::notify::event("step", r#"{"toolCallId": "t1"}"#);
                Ok(ToolOutput {
                    text: "done".into(),
                    structured: None,
                })
            }
            other => Err(ToolError::new("unknown_tool", other)),
        }
    }
}

fn pty_script(args: &serde_json::Value) -> Result<ToolOutput, ToolError> {
    use plugin_sdk::pty::{self, PtyError, SpawnRequest};
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    let failed = |e: PtyError| ToolError::new("pty_error", format!("{e:?}"));
    let session = pty::spawn(&SpawnRequest {
        program: args["program"].as_str().unwrap().to_string(),
        args: strings(&args["args"]),
        cwd: ".".into(),
        env: vec![],
        rows: args["rows"].as_u64().unwrap_or(24) as u16,
        cols: args["cols"].as_u64().unwrap_or(80) as u16,
    })
    .map_err(failed)?;
    let mut reads = Vec::new();
    // Each step: resize, then write, then read (a resize after the write
    // would race the program reading the line and asking for its size).
    for step in args["steps"].as_array().unwrap() {
        if let Some(size) = step["resize"].as_array() {
            session
                .resize(
                    size[0].as_u64().unwrap() as u16,
                    size[1].as_u64().unwrap() as u16,
                )
                .map_err(failed)?;
        }
        if let Some(text) = step["write"].as_str() {
            session.write(text).map_err(failed)?;
        }
        if step.get("expect").is_some() {
            let timeout = step["timeout_ms"].as_u64().unwrap_or(5_000);
            let read = session
                .read_until(step["expect"].as_str(), timeout)
                .map_err(failed)?;
            reads.push(json!({
                "text": read.text, "matched": read.matched,
                "exit_code": read.exited.as_ref().and_then(|e| e.exit_code),
            }));
        }
    }
    let end = if args["close"].as_bool().unwrap_or(true) {
        let status = session.close();
        json!({"exit_code": status.exit_code, "signal": status.signal})
    } else {
        json!(null)
    };
    Ok(ToolOutput {
        text: json!({"reads": reads, "end": end}).to_string(),
        structured: None,
    })
}

plugin_sdk::export!(Faulty);
