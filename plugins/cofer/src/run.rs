//! `environment_run_cmd`: a command in the environment's container under
//! the host's timebox (hard timeout `COHERRA_TIMEOUT_RUN`, 64 KB ring
//! buffer, process tree killed), then the workdir's changes committed to
//! the environment's branch and pushed. With `background`, the command
//! becomes the main process of a new service container instead.

use plugin_sdk::containers::{self, ContainerError, ExecRequest};
use plugin_sdk::process::{RunResult, Status};
use plugin_sdk::{ToolError, ToolOutput};
use serde_json::{Value, json};

use crate::args::{RunCmd, SHELLS};
use crate::env::{self, Env, Record};
use crate::errors::{ended_at_start, error, from_container};
use crate::turn::{DEFAULT_TIMEOUT_MS, Turn, short, turn};
use crate::{note, setting};

/// Output kept in memory while a command runs (seed: 64 KB ring buffer).
const TAIL_BYTES: u64 = 64 * 1024;
/// Lines of each stream returned (seed: the last 512).
const TAIL_LINES: usize = 512;
/// Bytes of stdout and stderr returned together unless asked for more:
/// clients show a model about 20 KB of an answer whole, and cut the rest.
const DEFAULT_OUTPUT_BYTES: usize = plugin_sdk::text::ANSWER_BYTES;

pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "exit_code": {"type": ["integer", "null"], "description": "null when the command was killed (see signal)."},
            "signal": {"type": ["string", "null"], "description": "How the host killed the command's process tree, if it did."},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "stdout_bytes": {"type": "integer"},
            "stderr_bytes": {"type": "integer"},
            "truncated": {"type": "boolean", "description": "Not all output is here: older output beyond the last 64 KB was dropped, or lines beyond the last 512 of a stream (lines_omitted)."},
            "lines_omitted": {"type": "object", "properties": {"stdout": {"type": "integer"}, "stderr": {"type": "integer"}}, "description": "Lines of the kept output left out before those shown (the last 512 of each stream, within max_output_bytes together)."},
            "duration_ms": {"type": "integer"},
            "leftover_processes_killed": {"type": "integer", "description": "Processes the command left running when it returned (`cmd &`, `setsid`), killed then: a foreground command's processes end with it; start servers with background=true."},
            "commit": {"type": ["string", "null"], "description": "The commit of the workdir's changes, if any."},
            "background_changes_commit": {"type": ["string", "null"], "description": "The commit of what background services wrote since the previous command, made before this one ran."},
            "remote_ref": {"type": "string"},
            "background": {"type": "boolean"},
            "warnings": {"type": "array", "items": {"type": "string"}, "description": "What the host repaired after the command, e.g. a .git file the command replaced."},
            "container": {"type": "string"},
            "container_name": {"type": "string", "description": "The service's container: the environment's, the program's name and a number."},
            "endpoints": {"type": "object"},
        },
        "required": ["background"],
    })
}

pub fn run_cmd(args: RunCmd) -> Result<ToolOutput, ToolError> {
    let (env, record) = Env::find(&args.common.environment_source, &args.environment_id)?;
    if !SHELLS.contains(&args.shell.as_str()) {
        return Err(error(
            "invalid_request",
            format!("shell `{}` is not allowed", args.shell),
            &format!("use one of {}", SHELLS.join(", ")),
        ));
    }
    if !args.ports.is_empty() && !args.background {
        return Err(error(
            "invalid_request",
            "ports are published only for background commands",
            "set background=true, or leave ports out",
        ));
    }
    let mode = if args.background {
        "background"
    } else {
        "foreground"
    };
    note(format!(
        "environment_run_cmd env={} mode={mode} shell={}",
        env.id, args.shell
    ));
    if args.background {
        return background(&env, &record, &args);
    }
    let timeout_ms = setting("COHERRA_TIMEOUT_RUN", DEFAULT_TIMEOUT_MS);
    let request = ExecRequest {
        argv: shell_argv(&args.shell, &args.command),
        workdir: Some(env::WORKDIR.into()),
        env: Vec::new(),
        use_entrypoint: args.use_entrypoint,
        stdin: None,
        timeout_ms,
        no_output_timeout_ms: None,
        tail_bytes: TAIL_BYTES,
        // The person's secrets for this repository, as variables; the host
        // resolves them and masks them in the output.
        secrets_of: Some(env.repo.clone()),
    };
    // Whatever the command changed is kept, even when it timed out.
    let message = args.common.message_or(if args.command.trim().is_empty() {
        "Run the image's default command".to_string()
    } else {
        format!("Run {}", args.command)
    });
    let Turn {
        value: result,
        background_commit,
        commit,
        warnings,
    } = turn(&env, timeout_ms, &message, |warnings| {
        let (result, recreated) = exec(&env, &record, &request)?;
        if recreated {
            warnings.push(RECREATED.to_string());
        }
        Ok(result)
    })?;
    let budget = args
        .max_output_bytes
        .map_or(DEFAULT_OUTPUT_BYTES, |b| b as usize);
    let ((stdout, out_omitted), (stderr, err_omitted)) = split_tail(&result, budget);
    // A command the host killed (timeout, silence, cancellation) has no exit
    // code of its own, whatever Podman reported.
    let killed = matches!(
        result.status,
        Status::Timeout | Status::NoOutput | Status::Cancelled
    );
    let (exit_code, signal) = if killed {
        (None, Some("SIGTERM, then SIGKILL after 200 ms"))
    } else {
        (result.exit_code, None)
    };
    let report = json!({
        "exit_code": exit_code,
        "signal": signal,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_bytes": result.stdout_bytes,
        "stderr_bytes": result.stderr_bytes,
        "truncated": result.truncated || out_omitted + err_omitted > 0,
        "lines_omitted": {"stdout": out_omitted, "stderr": err_omitted},
        "duration_ms": result.duration_ms,
        "leftover_processes_killed": result.leftovers_killed,
        "commit": commit,
        "background_changes_commit": background_commit,
        "remote_ref": env.remote_ref(),
        "background": false,
        "warnings": warnings,
    });
    match result.status {
        // The exec session ended without an exit code (Podman lost it,
        // or its processes were killed outside the command): the
        // command's fate is unknown, which is not a result to report.
        Status::Exited if result.exit_code.is_none() => {
            Err(error(
                "killed",
                "Podman reported no exit code for the command (its session was killed: out of memory, or by hand); the command may not have finished",
                "check the host's memory and `podman ps`, then run the command again",
            )
            .with_details(json!({
                "step": "run the command",
                "signal": result.signal,
                "remediation": "check the host's memory and `podman ps`, then run the command again",
                "result": report,
            })))
        }
        Status::Exited => Ok(ToolOutput {
            text: foreground_text(&env, &report, budget),
            structured: Some(report.to_string()),
        }),
        Status::Timeout | Status::NoOutput => Err(error(
            "timeout",
            format!(
                "the command ran longer than {timeout_ms} ms (COHERRA_TIMEOUT_RUN); its process tree in the container was killed"
            ),
            "make the command finish sooner, run it with background=true, or raise COHERRA_TIMEOUT_RUN",
        )
        .with_details(json!({
            "step": "run the command",
            "remediation": "make the command finish sooner, run it with background=true, or raise COHERRA_TIMEOUT_RUN",
            "timeout_ms": timeout_ms,
            "result": report,
        }))),
        Status::Cancelled => Err(error(
            "cancelled",
            "the call was cancelled; the command's process tree was killed",
            "call again if the command should still run",
        )),
        Status::SpawnFailed => Err(crate::errors::step_failed(
            "run the command",
            result.error.unwrap_or_else(|| "Podman could not start the command".into()),
            "check that Podman works on the host (`podman info`)",
        )),
    }
}

/// Exec in the main container, recreating it once if it is gone or stopped
/// (after a reboot, or removed by hand); whether it was recreated.
fn exec(env: &Env, record: &Record, request: &ExecRequest) -> Result<(RunResult, bool), ToolError> {
    match containers::exec(&env.container_name(), request) {
        Err(ContainerError::NotFound(_)) | Err(ContainerError::Failed(_)) => {
            note(format!(
                "environment_run_cmd env={} container not running; recreating it",
                env.id
            ));
            crate::container::recreate(env, record)?;
            containers::exec(&env.container_name(), request).map(|r| (r, true))
        }
        other => other.map(|r| (r, false)),
    }
    .map_err(|e| from_container("run the command", e))
}

/// Said when a command ran in a recreated container.
const RECREATED: &str = "The environment's container was gone or stopped and was recreated \
    from its image before this command, and its setup commands ran again: /workdir is kept, but \
    whatever earlier commands installed or wrote outside it is lost; install it again if the work \
    needs it.";

fn background(env: &Env, record: &Record, args: &RunCmd) -> Result<ToolOutput, ToolError> {
    let mut request = env.container_request(
        record,
        "service",
        service_command(&args.shell, &args.command),
    )?;
    request.use_entrypoint = args.use_entrypoint;
    // The project's forwarded ports (devcontainer.json) when the call
    // names none: its servers are reached where the project says.
    let ports = if args.ports.is_empty() {
        record.forward_ports.clone()
    } else {
        args.ports.clone()
    };
    request.ports = ports.clone();
    request
        .labels
        // A label is one line; a multi-line command is shown with `\n`.
        .push(("cofer.command".into(), args.command.replace('\n', "\\n")));
    // Numbered after the services already there; a concurrent start that
    // took the name makes this one try the next number.
    let first = crate::network::running(env)?.len() + 1;
    let mut attempt = 0;
    let info = loop {
        request.name = Some(env.service_name(&args.command, first + attempt));
        match containers::run(&request) {
            Err(ContainerError::Failed(why)) if why.contains("already in use") && attempt < 8 => {
                attempt += 1;
            }
            other => {
                break other.map_err(|e| from_container("start the background container", e))?;
            }
        }
    };
    exited_at_start(&info.id)?;
    let internal_host = info.ip_address.clone().unwrap_or_else(|| info.name.clone());
    let endpoints = crate::network::endpoints(&info, &ports, &internal_host);
    let endpoints = Value::Object(endpoints);
    let report = json!({
        "background": true,
        "container": info.id,
        "container_name": info.name,
        "endpoints": endpoints,
        "remote_ref": env.remote_ref(),
    });
    Ok(ToolOutput {
        text: format!(
            "Command started in the background in NEW container. Endpoints are {endpoints}"
        ),
        structured: Some(report.to_string()),
    })
}

/// The service runs as a child of a shell that passes SIGTERM on: run as
/// PID 1 itself, it would ignore SIGTERM and every destroy would wait out
/// the grace period before SIGKILL.
/// How long a background command must stay up to be reported started.
const STARTUP_CHECK_MS: u64 = 500;

/// A background command that is gone again right after its start (a
/// typo, a missing program, a port in use) is `service_exited`, with its
/// exit code and last output, and its container is removed; it was
/// reported started, with endpoints nobody answers on.
fn exited_at_start(id: &str) -> Result<(), ToolError> {
    std::thread::sleep(std::time::Duration::from_millis(STARTUP_CHECK_MS));
    let now =
        containers::inspect(id).map_err(|e| from_container("check the background container", e))?;
    if now.state == "running" {
        return Ok(());
    }
    Err(ended_at_start(
        id,
        now.exit_code,
        &format!("the background command ended within {STARTUP_CHECK_MS} ms of its start"),
        "fix the command (run it in the foreground to try it), then start it again",
    ))
}

/// `shell -c command`; none for an empty command, which runs the image's
/// default command (as container-use does).
fn shell_argv(shell: &str, command: &str) -> Vec<String> {
    if command.trim().is_empty() {
        Vec::new()
    } else {
        vec![shell.into(), "-c".into(), command.into()]
    }
}

fn service_command(shell: &str, command: &str) -> Vec<String> {
    if command.trim().is_empty() {
        return Vec::new();
    }
    vec![
        "sh".into(),
        "-c".into(),
        r#"trap 'kill -TERM $pid 2>/dev/null; wait $pid; exit 0' TERM INT; "$0" -c "$1" & pid=$!; wait $pid"#.into(),
        shell.into(),
        command.into(),
    ]
}

/// The tail's stdout and stderr, each cut to its last 512 lines, then to
/// `budget` bytes together (half each, and what one leaves the other may
/// take), with how many lines each left out.
fn split_tail(result: &RunResult, budget: usize) -> ((String, usize), (String, usize)) {
    let (out, err) = result.streams();
    let (out, out_omitted) = last_lines(&out, TAIL_LINES);
    let (err, err_omitted) = last_lines(&err, TAIL_LINES);
    let out_share = out
        .len()
        .min((budget / 2).max(budget.saturating_sub(err.len())));
    let err_share = budget - out_share;
    let (out, out_cut) = last_bytes(&out, out_share);
    let (err, err_cut) = last_bytes(&err, err_share);
    ((out, out_omitted + out_cut), (err, err_omitted + err_cut))
}

/// The last `n` bytes of `text`: whole lines, and before them the end of
/// the line the cut falls in (a long line followed by short ones keeps its
/// tail, as a last line does, instead of the budget going unused); and
/// how many lines came before (a line shown in part counts as left out).
fn last_bytes(text: &str, n: usize) -> (String, usize) {
    if text.len() <= n {
        return (text.to_string(), 0);
    }
    let mut cut = text.len() - n;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let omitted = text[..cut].matches('\n').count()
        + usize::from(cut > 0 && text.as_bytes()[cut - 1] != b'\n');
    (text[cut..].to_string(), omitted)
}

/// The last `n` lines of `text`, and how many came before them.
fn last_lines(text: &str, n: usize) -> (String, usize) {
    let body = text.strip_suffix('\n').unwrap_or(text);
    match body.rmatch_indices('\n').nth(n - 1) {
        Some((cut, _)) => (text[cut + 1..].to_string(), text[..=cut].lines().count()),
        None => (text.to_string(), 0),
    }
}

/// container-use's text: stdout, `stderr: ...`, then what happened to the
/// changes; Cofer adds the exit code and says when output was cut.
fn foreground_text(env: &Env, report: &Value, budget: usize) -> String {
    // A failing command is still a result (as in container-use), but the
    // first line says so plainly.
    let mut text = match report["exit_code"].as_i64() {
        Some(code) if code != 0 => format!("The command failed with exit code {code}.\n"),
        _ => String::new(),
    };
    text.push_str(report["stdout"].as_str().unwrap_or_default());
    let stderr = report["stderr"].as_str().unwrap_or_default();
    if !stderr.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("stderr: {stderr}"));
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if report["truncated"] == json!(true) {
        let omitted = &report["lines_omitted"];
        // What the ring held: 64 KB, or all of a shorter output.
        let total = report["stdout_bytes"].as_u64().unwrap_or(0)
            + report["stderr_bytes"].as_u64().unwrap_or(0);
        let kept = match total.min(TAIL_BYTES) {
            n if n >= 1024 => format!("{} KB", n / 1024),
            n => format!("{n} bytes"),
        };
        text.push_str(&format!(
            "(output truncated: {} bytes of stdout and {} of stderr; the last {kept} were kept, and of \
             those the last lines of each that fit in {budget} bytes together (at most {TAIL_LINES}) \
             are shown: {} lines of stdout and {} of stderr omitted. For more, pass \
             max_output_bytes up to 65536, or write the output to a file and read it with \
             environment_file_read)\n",
            report["stdout_bytes"], report["stderr_bytes"], omitted["stdout"], omitted["stderr"]
        ));
    }
    text.push_str(&format!("exit code: {}\n", report["exit_code"]));
    if let Some(left) = report["leftover_processes_killed"]
        .as_u64()
        .filter(|n| *n > 0)
    {
        text.push_str(&format!(
            "{left} process(es) the command left running were killed when it returned: run servers and \
             other long-lived processes with background=true.\n"
        ));
    }
    match report["commit"].as_str() {
        Some(commit) => text.push_str(&format!(
            "Changes committed to {} ({}) and pushed to the cofer remote.",
            env.branch(),
            short(commit),
        )),
        None => text.push_str("No changes in /workdir to commit."),
    }
    if let Some(commit) = report["background_changes_commit"].as_str() {
        text.push_str(&format!(
            "\nBefore it ran, what background services had written was committed on its own ({}).",
            short(commit)
        ));
    }
    for warning in report["warnings"].as_array().into_iter().flatten() {
        text.push_str(&format!(
            "\nwarning: {}",
            warning.as_str().unwrap_or_default()
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use plugin_sdk::process::Stream;

    #[test]
    fn last_bytes_keeps_the_end_of_a_line_cut() {
        assert_eq!(last_bytes("aa\nbbb\ncc\n", 7), ("bbb\ncc\n".into(), 1));
        assert_eq!(last_bytes("aa\nbbb\ncc\n", 6), ("bb\ncc\n".into(), 2));
        // Issue 72: a long line then a short one keeps the long one's end.
        let long = format!("{}\nok\n", "x".repeat(100));
        assert_eq!(
            last_bytes(&long, 20),
            (format!("{}\nok\n", "x".repeat(16)), 1)
        );
        assert_eq!(
            last_bytes("aa\nbbb\ncc\n", 100),
            ("aa\nbbb\ncc\n".into(), 0)
        );
        // One line longer than the budget: its end, cut at a character.
        assert_eq!(last_bytes("ééééé\n", 4), ("é\n".into(), 1));
    }

    #[test]
    fn last_lines_keeps_the_end() {
        assert_eq!(last_lines("a\nb\nc\n", 2), ("b\nc\n".into(), 1));
        assert_eq!(last_lines("a\nb\nc", 2), ("b\nc".into(), 1));
        assert_eq!(last_lines("a\nb\n", 5), ("a\nb\n".into(), 0));
        assert_eq!(last_lines("", 5), (String::new(), 0));
        let many: String = (0..1000).map(|i| format!("{i}\n")).collect();
        let (kept, omitted) = last_lines(&many, 512);
        assert_eq!(omitted, 488);
        assert_eq!(kept.lines().count(), 512);
        assert!(kept.starts_with("488\n") && kept.ends_with("999\n"));
    }

    #[test]
    fn streams_are_split() {
        let result = RunResult {
            status: Status::Exited,
            exit_code: Some(0),
            signal: None,
            duration_ms: 1,
            tail: vec![
                plugin_sdk::process::Chunk {
                    stream: Stream::Stdout,
                    text: "out1\n".into(),
                },
                plugin_sdk::process::Chunk {
                    stream: Stream::Stderr,
                    text: "err\n".into(),
                },
                plugin_sdk::process::Chunk {
                    stream: Stream::Stdout,
                    text: "out2\n".into(),
                },
            ],
            stdout_bytes: 10,
            stderr_bytes: 4,
            truncated: false,
            leftovers_killed: 0,
            error: None,
        };
        assert_eq!(
            split_tail(&result, 1024),
            (("out1\nout2\n".into(), 0), ("err\n".into(), 0))
        );
        // Over the budget: the last whole lines that fit, the rest counted.
        assert_eq!(
            split_tail(&result, 9),
            (("out2\n".into(), 1), ("err\n".into(), 0))
        );
    }
}
