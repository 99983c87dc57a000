//! `copilot.chat`: a safe bridge to the GitHub Copilot CLI (seed 000).
//!
//! One request, one `copilot` process: `copilot --prompt=<input> --model
//! <name> --no-color` with stdin closed (the input joined to its option, so
//! it is never read as one), through the host's `process` capability
//! (30 s, tree killed on timeout). If the installed CLI rejects those
//! flags, the same request goes through a pseudo-terminal instead
//! ([`tty`]). Only `input` and `model` are accepted; the input can never
//! become an option or a slash command ([`check_input`]). Which environment
//! variables reach the CLI (tokens, `COPILOT_PROVIDER_*`, `HOME`) is the
//! policy's `process.env`, not code. No preflight: each request finds out
//! for itself and maps what the CLI said to a typed error.

mod models;
mod tty;

use plugin_sdk::process::{self, RunRequest, RunResult, Status};
use plugin_sdk::text::ANSWER_BYTES;
use plugin_sdk::{CapabilityError, Hints, McpTool, TaskSupport, Tool, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The global budget of one request, both paths together (seed FR-009).
pub const TIMEOUT_MS: u64 = 30_000;
/// Raw output kept per request.
const TAIL_BYTES: u64 = 1024 * 1024;
/// Of that, the most stderr keeps (its end: the CLI's last words).
const STDERR_BYTES: usize = 2 * 1024;
const PROGRAM: &str = "copilot";

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-error-code" = "invalid_request"))]
struct Args {
    /// The prompt.
    #[schemars(length(min = 1, max = 100_000))]
    input: String,
    /// Model name, one of config/models.json (default: its `default`).
    model: Option<String>,
}

/// `copilot.chat`.
struct Chat;

impl McpTool for Chat {
    const NAME: &'static str = "copilot.chat";
    // It can run for minutes: a client that takes tasks polls for it.
    const TASKS: TaskSupport = TaskSupport::Optional;
    const TITLE: Option<&'static str> = Some("Ask GitHub Copilot");
    const DESCRIPTION: &'static str = "Ask the GitHub Copilot CLI. Runs `copilot --prompt=<input> --model <model>` non-interactively (a terminal \
        session with `/model` if the CLI lacks those flags) and returns its raw stdout, stderr and exit code.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: true,
        destructive: false,
        idempotent: false,
        open_world: true,
    });
    type Args = Args;

    /// The models of models.json when the tools are listed, named in the
    /// description only: each call reads the file again, so a model added
    /// since is taken at once (an enum in the schema refused it until the
    /// host listed the tools again), and `null` means the default.
    fn when_listed(tool: &mut Tool) {
        let (Ok(models), Ok(mut schema)) = (
            models::load(),
            serde_json::from_str::<Value>(&tool.input_schema),
        ) else {
            return;
        };
        let default = models.default.as_deref().unwrap_or(&models.models[0]);
        schema["properties"]["model"]["description"] = json!(format!(
            "Model name from config/models.json (read at each call); now: {}. Default (omitted or null): {default}.",
            models.models.join(", ")
        ));
        tool.input_schema = schema.to_string();
    }
    fn output_schema() -> Option<Value> {
        Some(output_schema())
    }

    fn call(args: Args) -> Result<ToolOutput, ToolError> {
        let models = models::load()?;
        let model = models.pick(args.model.as_deref())?;
        check_input(&args.input)?;
        let started = std::time::Instant::now();
        let result = run_prompt(&args.input, &model)?;
        let answer = match classify(result, &model)? {
            Flow::Done(answer) => answer,
            Flow::FlagsUnsupported => {
                check_terminal_input(&args.input)?;
                let left = TIMEOUT_MS.saturating_sub(started.elapsed().as_millis() as u64);
                tty::chat(&args.input, &model, left)?
            }
        };
        Ok(plugin_sdk::structured_output(&answer.within_budget()))
    }
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "exit_code": {"type": ["integer", "null"]},
            "mode": {"type": "string", "enum": ["prompt", "tty"]},
            "model": {"type": "string"},
            "truncated": {"type": "boolean", "description": "Whether anything was left out: by the host's 1 MiB tail, or by the answer's 16 KB budget (see omitted_bytes)."},
            "omitted_bytes": {"type": "object", "properties": {"stdout": {"type": "integer"}, "stderr": {"type": "integer"}}, "description": "Bytes left out to keep the answer within 16 KB: the middle of stdout (its start and end are kept, a line in it says where), the start of stderr."},
            "duration_ms": {"type": "integer", "description": "How long the CLI ran."},
            "refused": {"type": "string", "description": "Present when the host's confinement refused one of the CLI's commands a file (Permission denied): what, and the policy key that would grant it."},
        },
        "required": ["stdout", "stderr", "exit_code", "mode", "model"],
    })
}

/// What the CLI answered.
#[derive(serde::Serialize)]
pub struct Answer {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: Option<i32>,
    pub mode: &'static str,
    pub truncated: bool,
    pub duration_ms: u64,
    pub model: String,
    #[serde(skip_serializing_if = "Omitted::is_none")]
    pub omitted_bytes: Omitted,
    /// What the host's confinement refused a command the CLI ran, and the
    /// key that would grant it (issue 71).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// What [`Answer::within_budget`] left out of each stream.
#[derive(serde::Serialize, Default, Debug, PartialEq)]
pub struct Omitted {
    pub stdout: usize,
    pub stderr: usize,
}

impl Omitted {
    fn is_none(&self) -> bool {
        self.stdout == 0 && self.stderr == 0
    }
}

impl Answer {
    /// The answer within [`ANSWER_BYTES`] ([`fit`]).
    pub fn within_budget(mut self) -> Answer {
        self.omitted_bytes = fit(&mut self.stdout, &mut self.stderr);
        self.truncated |= !self.omitted_bytes.is_none();
        self
    }
}

/// Both streams within [`ANSWER_BYTES`]: stderr's end (at least
/// [`STDERR_BYTES`] of it), then stdout's start and end in what is left,
/// three quarters to the start (where an answer says what it is), a line
/// between them saying how much is left out.
pub fn fit(stdout: &mut String, stderr: &mut String) -> Omitted {
    let mut omitted = Omitted::default();
    let stderr_room = STDERR_BYTES.max(ANSWER_BYTES.saturating_sub(stdout.len()));
    if stderr.len() > stderr_room {
        let from = stderr.ceil_char_boundary(stderr.len() - stderr_room);
        omitted.stderr = from;
        stderr.replace_range(..from, "");
    }
    let room = ANSWER_BYTES - stderr.len();
    omitted.stdout = plugin_sdk::text::keep_ends(stdout, room, room * 3 / 4, |n| {
        format!(
            "\n[... {n} bytes of copilot's output left out here, to keep this answer within what \
             clients pass to their model: ask for a shorter answer, or for the part you need ...]\n"
        )
    });
    omitted
}

/// Refuse inputs that are no prompt: empty ones, and control characters
/// other than newline and tab (terminal escape sequences, Ctrl-C,
/// Ctrl-D). Any other text is a prompt, a Markdown list (`- item`) or a
/// pasted stack trace (`/usr/lib/…`) too: `--prompt=<text>` hands it to
/// the CLI as the option's own value, which it never reads as an option.
/// What a terminal session would act on is refused there
/// ([`check_terminal_input`]).
pub fn check_input(input: &str) -> Result<(), ToolError> {
    let refuse = |why: &str| {
        Err(ToolError::new("invalid_request", format!("input refused: {why}")).with_details(json!({
            "remediation": "send plain text: the input is a prompt, never options or commands",
        })))
    };
    if input.trim().is_empty() {
        return refuse("it is empty");
    }
    if input
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return refuse("it contains control characters (escape sequences, Ctrl keys)");
    }
    Ok(())
}

/// What a prompt typed into a Copilot session does beyond `-p`: a line
/// starting with `!` runs in the local shell, one starting with `/` is a
/// slash command, and `@path` pulls a file into the context. Neither may reach the terminal fallback. Every
/// control and format character (Unicode Cc, Cf: a byte-order mark or a
/// zero-width space before `!` hides it from a check, not from the CLI) is
/// refused outright, not listed one by one.
pub fn check_terminal_input(input: &str) -> Result<(), ToolError> {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    let refuse = |why: &str| {
        Err(ToolError::new("invalid_request", format!("input refused in terminal mode: {why}"))
            .with_details(json!({
                "remediation": "rephrase without a line starting with '!' or '/', without '@' before a word (write 'the file src/x' instead of '@src/x') and without invisible characters",
            })))
    };
    let invisible = input.chars().find(|&c| {
        c != '\n'
            && matches!(
                c.general_category(),
                GeneralCategory::Control | GeneralCategory::Format
            )
    });
    if let Some(c) = invisible {
        return refuse(&format!(
            "it contains U+{:04X}, a control or format character a terminal may act on unseen",
            c as u32
        ));
    }
    if input.lines().any(|line| line.trim_start().starts_with('!')) {
        return refuse("a line starts with '!', which a Copilot session runs as a shell command");
    }
    if input.lines().any(|line| line.trim_start().starts_with('/')) {
        return refuse("a line starts with '/', which a Copilot session runs as a slash command");
    }
    let mention = input
        .split_whitespace()
        .any(|word| word.starts_with('@') && word.len() > 1);
    if mention {
        return refuse("'@' before a word makes a Copilot session read that file");
    }
    Ok(())
}

fn run_prompt(input: &str, model: &str) -> Result<RunResult, ToolError> {
    let request = RunRequest::new(PROGRAM, plugin_sdk::workspace())
        .args([&format!("--prompt={input}"), "--model", model, "--no-color"])
        .env(vec![("NO_COLOR".into(), "1".into())])
        .timeout_ms(TIMEOUT_MS)
        .tail_bytes(TAIL_BYTES);
    process::run(&request).map_err(|e| match e {
        CapabilityError::NotFound(why) => not_installed(&why),
        other => other.into(),
    })
}

/// The CLI could not be started: not there, or there and not runnable
/// (a file without its execute bit is found on PATH, then refused).
pub fn not_started(why: &str) -> ToolError {
    let lower = why.to_ascii_lowercase();
    if lower.contains("permission denied") || lower.contains("os error 13") {
        return ToolError::new(
            "not_runnable",
            format!("the Copilot CLI was found but cannot be run: {why}"),
        )
        .with_details(json!({
            "remediation": "make it executable (`chmod +x \"$(command -v copilot)\"`) or reinstall it with `npm install -g @github/copilot`",
        }));
    }
    not_installed(why)
}

enum Flow {
    Done(Answer),
    FlagsUnsupported,
}

fn classify(result: RunResult, model: &str) -> Result<Flow, ToolError> {
    let (mut stdout, mut stderr) = result.streams();
    match result.status {
        Status::Timeout | Status::NoOutput => {
            // What it wrote before it was stopped is kept: often most of
            // an answer.
            let omitted = fit(&mut stdout, &mut stderr);
            Err(timeout().with_details(json!({
                "stdout": stdout, "stderr": stderr, "omitted_bytes": omitted,
                "remediation": "ask something smaller, or check that the model provider answers; the output so far is in stdout",
            })))
        }
        Status::Cancelled => Err(ToolError::new(
            "cancelled",
            "the call was cancelled; copilot was stopped",
        )),
        Status::SpawnFailed => Err(not_started(
            result
                .error
                .as_deref()
                .unwrap_or("copilot could not be started"),
        )),
        Status::Exited if result.exit_code == Some(0) => Ok(Flow::Done(Answer {
            refused: plugin_sdk::refused::refusal_hint("copilot", &format!("{stdout}\n{stderr}")),
            stdout,
            stderr,
            exit_code: Some(0),
            mode: "prompt",
            truncated: result.truncated,
            duration_ms: result.duration_ms,
            model: model.to_string(),
            omitted_bytes: Default::default(),
        })),
        Status::Exited if flags_unsupported(&stderr) => Ok(Flow::FlagsUnsupported),
        Status::Exited => Err(auth_error(&stderr)
            .map(|e| with_exit(e, result.exit_code))
            .unwrap_or_else(|| {
            let omitted = fit(&mut stdout, &mut stderr);
            ToolError::new(
                "copilot_failed",
                format!(
                    "copilot ended ({})",
                    plugin_sdk::ended_text(result.exit_code, result.signal)
                ),
            )
            .with_details(json!({
                "stdout": stdout, "stderr": stderr, "exit_code": result.exit_code, "signal": result.signal,
                "omitted_bytes": omitted,
                "remediation": "read stderr: it is copilot's own message",
            }))
        })),
    }
}

/// `e` with the CLI's exit code among its details, as every error after
/// the CLI ran has it.
fn with_exit(mut e: ToolError, exit_code: Option<i32>) -> ToolError {
    let mut details: Value = e
        .details
        .take()
        .and_then(|d| serde_json::from_str(&d).ok())
        .unwrap_or_else(|| json!({}));
    details["exit_code"] = json!(exit_code);
    e.with_details(details)
}

/// The CLI's answer when it does not know `-p` / `--model` (older or
/// different builds).
fn flags_unsupported(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    [
        "unknown option",
        "unknown argument",
        "unrecognized option",
        "unexpected argument",
    ]
    .iter()
    .any(|sign| s.contains(sign))
        && ["-p", "--prompt", "--model"]
            .iter()
            .any(|flag| s.contains(flag))
}

/// The CLI's authentication messages, read from what the CLI itself says
/// (its stderr, or its screen before a prompt is typed), never from the
/// prompt or the model's answer: a classic token it refuses
/// (`unsupported_token`), a token it could not check for want of a
/// network (`github_unreachable`, worth a retry), or no usable login
/// (`not_logged_in`).
pub fn auth_error(said: &str) -> Option<ToolError> {
    let stderr = said;
    if said.contains("Classic Personal Access Tokens") {
        return Some(
            ToolError::new(
                "unsupported_token",
                "the Copilot CLI does not take classic personal access tokens (ghp_…)",
            )
            .with_details(json!({
                "stderr": stderr,
                "remediation": "replace the token in COPILOT_GITHUB_TOKEN / GH_TOKEN / GITHUB_TOKEN with a \
                                fine-grained personal access token (Copilot Requests permission), or unset it \
                                and use `copilot` /login or `gh auth login`",
            })),
        );
    }
    let unchecked = said.contains("could not be validated");
    let no_network = [
        "network fetch failed",
        "error sending request",
        "ENOTFOUND",
        "ECONNREFUSED",
        "ETIMEDOUT",
    ]
    .iter()
    .any(|sign| said.contains(sign));
    if unchecked && no_network {
        let mut unreachable = ToolError::new(
            "github_unreachable",
            "the Copilot CLI has a token but could not reach GitHub to check it",
        );
        unreachable.retryable = true;
        return Some(
            unreachable.with_details(json!({
                "stderr": stderr,
                "remediation": "check the host's network; behind a proxy, set HTTPS_PROXY for the host (the \
                                policy lets it through to copilot); or use bring-your-own-key mode \
                                (COPILOT_PROVIDER_BASE_URL), which needs no GitHub",
            })),
        );
    }
    let signs = [
        "No authentication information found",
        "run the '/login' command",
        "Please log in",
        "not logged in",
    ];
    (unchecked || signs.iter().any(|s| said.contains(s))).then(|| {
        ToolError::new("not_logged_in", "the Copilot CLI is not logged in").with_details(json!({
            "stderr": stderr,
            "remediation": "run `copilot` and use /login, or set COPILOT_GITHUB_TOKEN (or GH_TOKEN / GITHUB_TOKEN) \
                            for the host and let it through in the policy's process.env",
        }))
    })
}

/// Retryable: a slow provider may answer in time on the next try.
pub fn timeout() -> ToolError {
    let mut e = ToolError::new(
        "timeout",
        format!(
            "copilot did not finish within {} s; it and its child processes were killed",
            TIMEOUT_MS / 1000
        ),
    );
    e.retryable = true;
    e.with_details(
        json!({"remediation": "ask something smaller, or check that the model provider answers"}),
    )
}

pub fn not_installed(why: &str) -> ToolError {
    ToolError::new("not_installed", format!("the Copilot CLI is not installed: {why}")).with_details(json!({
        "remediation": "install it with `npm install -g @github/copilot` and make sure `copilot` is on the host's PATH",
    }))
}

plugin_sdk::export! { tools: [Chat] }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_schema_names_the_allowed_models() {
        let mut tool = plugin_sdk::tool::declare::<Chat>();
        let model = |t: &Tool| {
            serde_json::from_str::<Value>(&t.input_schema).unwrap()["properties"]["model"].clone()
        };
        // No enum, then or when listed: each call reads models.json.
        assert!(model(&tool).get("enum").is_none(), "{}", model(&tool));
        Chat::when_listed(&mut tool);
        assert!(model(&tool).get("enum").is_none(), "{}", model(&tool));
        let description = model(&tool)["description"].as_str().unwrap().to_string();
        for name in models::load().unwrap().models {
            assert!(description.contains(&name), "{description}");
        }
    }

    #[test]
    fn answers_fit_the_budget_keeping_both_ends() {
        let (mut out, mut err) = ("short".to_string(), "warn".to_string());
        assert!(fit(&mut out, &mut err).is_none(), "small answers are whole");
        assert_eq!((out.as_str(), err.as_str()), ("short", "warn"));

        // Multi-byte characters at every cut: the ends stay valid text.
        let long = format!("START{}END", "é".repeat(30_000));
        let (mut out, mut err) = (long.clone(), format!("{}LAST", "x".repeat(10_000)));
        let omitted = fit(&mut out, &mut err);
        assert!(
            out.len() + err.len() <= ANSWER_BYTES + 200,
            "{}",
            out.len() + err.len()
        );
        assert!(out.starts_with("START") && out.ends_with("END"));
        assert!(
            out.contains(&format!("{} bytes", omitted.stdout)),
            "the cut says how much"
        );
        assert_eq!(err.len(), STDERR_BYTES);
        assert!(err.ends_with("LAST"));
        assert_eq!(omitted.stderr, 10_004 - STDERR_BYTES);
        let kept = out.len() - out.lines().find(|l| l.contains("left out")).unwrap().len() - 2;
        assert_eq!(kept + omitted.stdout, long.len(), "nothing lost unsaid");

        // A short stdout leaves stderr the rest of the budget.
        let (mut out, mut err) = ("ok".to_string(), "y".repeat(8_000));
        assert!(fit(&mut out, &mut err).is_none());
    }

    #[test]
    fn inputs_that_could_act_as_options_or_commands_are_refused() {
        for bad in ["hi\r\n  /login", "\x1b[2J", "x\u{3}", "   "] {
            assert_eq!(
                check_input(bad).unwrap_err().code,
                "invalid_request",
                "{bad:?}"
            );
        }
        for good in [
            "What does this repo do?",
            "a - b",
            "path a/b\nnext line",
            "tab\tok",
            // A Markdown list and a pasted stack trace are prompts too.
            "- first\n- second",
            "--help me read this",
            "why?\n/usr/lib/node/x.js:3\n  at f (/app/a.js:1)",
        ] {
            assert!(check_input(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn shell_and_file_mentions_are_refused_in_terminal_mode() {
        for bad in [
            "!rm -rf ~",
            "hi\n  !id",
            "explain @/etc/passwd",
            "@src/main.rs?",
            "\u{feff}!id",
            "x\n\u{200b}!id",
            "\u{2066}!id\u{2069}",
            "\u{e0021}!id",
            "tab\there",
            "\u{1b}[2J",
            "hi\n/model gpt-5",
        ] {
            let e = check_terminal_input(bad).unwrap_err();
            assert_eq!(e.code, "invalid_request", "{bad:?}");
        }
        for good in ["mail me at a@b.c", "wow! nice", "an @ sign alone"] {
            assert!(check_terminal_input(good).is_ok(), "{good:?}");
        }
        // Issue 72: the remediation of a `/` line names `/`.
        let e = check_terminal_input("hi\n/model gpt-5").unwrap_err();
        assert!(e.message.contains("'/'"), "{}", e.message);
        assert!(e.details.unwrap().contains("'/'"));
    }

    #[test]
    fn a_cli_that_cannot_be_run_is_not_called_missing() {
        assert_eq!(
            not_started("Permission denied (os error 13)").code,
            "not_runnable"
        );
        assert_eq!(
            not_started("No such file or directory (os error 2)").code,
            "not_installed"
        );
        let e = with_exit(
            auth_error("No authentication information found").unwrap(),
            Some(1),
        );
        let details: Value = serde_json::from_str(e.details.as_deref().unwrap()).unwrap();
        assert_eq!(details["exit_code"], 1);
        assert!(details["remediation"].is_string());
    }

    #[test]
    fn the_clis_messages_are_classified() {
        let stderr =
            "Error: No authentication information found.\n\nCopilot can be authenticated ...";
        assert_eq!(auth_error(stderr).unwrap().code, "not_logged_in");
        // As the real CLI (1.0.x) says them.
        let classic = "Error: Classic Personal Access Tokens (ghp_) are not supported by Copilot.\n\n\
                       The COPILOT_GITHUB_TOKEN environment variable contains a classic PAT.";
        assert_eq!(auth_error(classic).unwrap().code, "unsupported_token");
        let offline = "Error: Authentication token found but could not be validated.\n\n  Failed to fetch \
                       PAT user login: network fetch failed: request failed: error sending request for url";
        let e = auth_error(offline).unwrap();
        assert_eq!((e.code.as_str(), e.retryable), ("github_unreachable", true));
        let rejected = "Error: Authentication token found but could not be validated.";
        assert_eq!(auth_error(rejected).unwrap().code, "not_logged_in");
        assert!(auth_error("fine").is_none());
        assert!(flags_unsupported("error: unknown option '-p'"));
        assert!(!flags_unsupported("error: unknown option '--frobnicate'"));
    }
}
