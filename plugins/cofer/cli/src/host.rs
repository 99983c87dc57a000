//! The environment tools, called through the user's own host (`host call`):
//! the same plugin, policy and engines an agent's calls get, so what the
//! person does by hand is what an agent's call would do (a command's work
//! committed, a destroy complete), never a second implementation of it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// The `host` program and the repository the calls are about.
pub struct Host {
    program: PathBuf,
    repo: PathBuf,
}

/// What a tool answered.
pub struct Answer {
    /// The structured result, else the text read as JSON, else the text.
    pub value: Value,
    pub text: String,
}

impl Host {
    /// `$COFER_HOST`, else the `host` installed beside this `cofer`, else
    /// the one on PATH.
    pub fn find(repo: &Path) -> Host {
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| {
                Some(
                    exe.parent()?
                        .join(format!("host{}", std::env::consts::EXE_SUFFIX)),
                )
            })
            .filter(|p| p.is_file());
        let program = std::env::var_os("COFER_HOST")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or(beside)
            .unwrap_or_else(|| PathBuf::from("host"));
        Host {
            program,
            repo: repo.to_path_buf(),
        }
    }

    /// Call `tool` with `args` plus the repository as
    /// `environment_source`; a tool error becomes this command's error,
    /// with the tool's own message and hint.
    pub fn call(&self, tool: &str, mut args: Value) -> Result<Answer> {
        args["environment_source"] = json!(self.repo.to_string_lossy());
        // The host's workspace is the repository: its default COFER_ROOT.
        let out = Command::new(&self.program)
            .args(["call", tool, &args.to_string(), "--workspace"])
            .arg(&self.repo)
            .output()
            .with_context(|| {
                format!(
                    "cannot run the MCP host `{}`: install it beside `cofer` or on PATH, or set COFER_HOST to it",
                    self.program.display()
                )
            })?;
        let reply: Value = match serde_json::from_slice(&out.stdout) {
            Ok(reply) => reply,
            Err(_) => bail!(
                "the host could not call {tool}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        };
        // `host call` prints the host's reply: `is_error`, `text`, `structured`.
        let text = reply["text"].as_str().unwrap_or_default().to_string();
        if reply["is_error"].as_bool() == Some(true) {
            bail!("{}", said(&text, &reply["structured"]));
        }
        let value = match &reply["structured"] {
            Value::Null => serde_json::from_str(&text).unwrap_or_else(|_| json!(text)),
            structured => structured.clone(),
        };
        Ok(Answer { value, text })
    }
}

/// A tool error for a person: its sentence and what to do.
fn said(text: &str, fields: &Value) -> String {
    let sentence = text.lines().next().unwrap_or(text);
    let hint = [fields, &fields["details"], &fields["error"]]
        .into_iter()
        .find_map(|f| f["remediation"].as_str().or(f["hint"].as_str()));
    match hint {
        Some(hint) => format!("{sentence}\n  what to do: {hint}"),
        None => sentence.to_string(),
    }
}
