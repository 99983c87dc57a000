//! The fallback for a CLI without `-p`/`--model`: a terminal session.
//! Start `copilot` on a pseudo-terminal, get past the first screens (the
//! folder-trust question: Enter accepts it), send `/model <name>`, then the
//! input, and take what it prints before the next prompt as the answer.
//! The whole session shares the request's 30 s; at the end (or on any
//! failure) the session is closed and its process tree killed.

use std::time::Instant;

use plugin_sdk::ToolError;
use plugin_sdk::pty::{self, PtyError, Session, SpawnRequest};
use plugin_sdk::text::strip_ansi;
use serde_json::json;

use crate::{Answer, PROGRAM, auth_error, not_started, timeout};

/// The CLI's prompt: `>`, `❯` or `›` alone at the end of what it printed.
const PROMPT: &str =
    r"(?:^|\n)[ \t]*(?:\x1b\[[0-9;?]*[A-Za-z])*[>❯›][ \t]*(?:\x1b\[[0-9;?]*[A-Za-z])*$";
/// The first screen may ask whether to trust the folder.
const FIRST_SCREEN: &str = r"(?i)trust|(?:^|\n)[ \t]*[>❯›][ \t]*$";

struct Deadline(Instant, u64);

impl Deadline {
    fn left(&self) -> Result<u64, ToolError> {
        let left = self.1.saturating_sub(self.0.elapsed().as_millis() as u64);
        if left == 0 { Err(timeout()) } else { Ok(left) }
    }
}

pub fn chat(input: &str, model: &str, budget_ms: u64) -> Result<Answer, ToolError> {
    let deadline = Deadline(Instant::now(), budget_ms);
    let workspace = plugin_sdk::workspace();
    let session = pty::spawn(&SpawnRequest {
        program: PROGRAM.into(),
        args: Vec::new(),
        cwd: workspace,
        env: vec![("NO_COLOR".into(), "1".into())],
        rows: 50,
        cols: 200,
    })
    .map_err(pty_error)?;
    let reply = converse(&session, input, model, &deadline);
    let status = session.close();
    Ok(Answer {
        stdout: reply?,
        stderr: String::new(),
        exit_code: status.exit_code.or(Some(0)),
        mode: "tty",
        truncated: false,
        duration_ms: deadline.0.elapsed().as_millis() as u64,
        model: model.to_string(),
        omitted_bytes: Default::default(),
        refused: None,
    })
}

/// The conversation up to the answer; the answer's text.
fn converse(
    session: &Session,
    input: &str,
    model: &str,
    deadline: &Deadline,
) -> Result<String, ToolError> {
    let mut seen = String::new();
    let first = expect(session, FIRST_SCREEN, deadline, &mut seen, Login::Checked)?;
    if first.to_ascii_lowercase().contains("trust") {
        session.write("\r").map_err(pty_error)?;
        expect(session, PROMPT, deadline, &mut seen, Login::Checked)?;
    }
    session
        .write(&format!("/model {model}\r"))
        .map_err(pty_error)?;
    expect(session, PROMPT, deadline, &mut seen, Login::Checked)?;
    // One line: a newline would submit early.
    let line = input.replace(['\r', '\n'], " ");
    session.write(&format!("{line}\r")).map_err(pty_error)?;
    // From here the screen holds the prompt and the model's answer: what
    // they say about logging in is not the CLI's own state (issue 54).
    let reply = expect(session, PROMPT, deadline, &mut seen, Login::NotRead)?;
    let _ = session.write("/exit\r");
    Ok(answer_text(&reply, &line))
}

/// Whether what the CLI shows is read for its login state: only before
/// the prompt is typed, while every word on the screen is the CLI's own.
#[derive(Clone, Copy, PartialEq)]
enum Login {
    Checked,
    NotRead,
}

/// Read until `pattern`; the CLI exiting (or, before the prompt is typed,
/// saying it is not logged in) ends the conversation with the matching
/// error.
fn expect(
    session: &Session,
    pattern: &str,
    deadline: &Deadline,
    seen: &mut String,
    login: Login,
) -> Result<String, ToolError> {
    let read = session
        .read_until(Some(pattern), deadline.left()?)
        .map_err(pty_error)?;
    seen.push_str(&read.text);
    if login == Login::Checked
        && let Some(e) = auth_error(seen)
    {
        return Err(e);
    }
    if read.matched {
        return Ok(read.text);
    }
    match read.exited {
        Some(status) => Err(ToolError::new(
            "copilot_failed",
            format!("copilot ended the terminal session early ({})", plugin_sdk::exit_text(status.exit_code)),
        )
        .with_details(json!({"output": strip_ansi(seen), "remediation": "read output: it is copilot's own message"}))),
        None => Err(timeout()),
    }
}

/// The reply without the echoed input, the trailing prompt and escapes.
fn answer_text(reply: &str, sent: &str) -> String {
    let clean = strip_ansi(reply).replace('\r', "");
    let mut lines: Vec<&str> = clean.lines().collect();
    if lines.first().is_some_and(|l| l.trim() == sent.trim()) {
        lines.remove(0);
    }
    while lines
        .last()
        .is_some_and(|l| l.trim().is_empty() || matches!(l.trim(), ">" | "❯" | "›"))
    {
        lines.pop();
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

fn pty_error(e: PtyError) -> ToolError {
    match e {
        PtyError::TtyUnavailable(why) => ToolError::new("tty_unavailable", why).with_details(json!({
            "remediation": "the installed copilot needs a terminal (it has no -p) and this host cannot open one: \
                            update the CLI (`npm install -g @github/copilot`) or run the host where /dev/ptmx works",
        })),
        PtyError::SpawnFailed(why) => not_started(&why),
        PtyError::Denied(why) => ToolError::new("denied", why),
        PtyError::Invalid(why) => ToolError::new("copilot_failed", why),
        PtyError::Cancelled => ToolError::new("cancelled", "the call was cancelled; copilot was stopped"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_loses_echo_prompt_and_escapes() {
        let reply = "hello there\r\n\x1b[1mAnswer\x1b[0m: hi\r\nsecond line\r\n> ";
        assert_eq!(
            answer_text(reply, "hello there"),
            "Answer: hi\nsecond line\n"
        );
    }

    #[test]
    fn prompts_are_recognised() {
        let prompt = regex_lite::Regex::new(PROMPT).unwrap();
        assert!(prompt.is_match("Model set\r\n> "));
        assert!(prompt.is_match("> "));
        assert!(prompt.is_match("x\n❯ "));
        assert!(!prompt.is_match("> 1. Yes, proceed\r\n  2. No\r\n"));
        assert!(!prompt.is_match("a > b"));
    }
}
