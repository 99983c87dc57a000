//! On another machine's engine, a command and what must follow it in one
//! exec. There the sweep of what the command left running (by the run's
//! marker, as [`super::exec::kill_inside`] does: [`super::sweep`]) and the `stat`s the sync
//! after it needs ([`Then`]) would cost an exec of their own, a round trip
//! and a `conmon` there (about 100 ms of a 360 ms `true`): instead the
//! command runs beneath a short `sh` script that does both once it has
//! ended.
//!
//! The script's stdout is the command's, framed by a token (random, one
//! per run): the token before the command starts, and again once it has
//! ended, then the command's status, the sweep's counts and what `Then`
//! printed. [`Frame`] takes that apart as the output streams in. The
//! command can read the token (its parent's command line) and print it:
//! it then cuts its own output short and answers for its own files, which
//! is no more than it could do anyway.
//!
//! The script carries [`SHELL_VAR`] set to the run's marker, so a kill
//! from outside ([`super::exec::kill_inside`]: timeout, cancellation, a
//! host gone) ends it with the command; the command does not (it is unset
//! before the command runs), so the script's own sweep leaves it alone.

use timebox::{KillReport, MARKER_VAR};

use super::sweep::{SWEEP, THEN_STATUS, Then, read_sweep};

/// Carries the run's marker in the framing script (not in the command).
pub const SHELL_VAR: &str = "MCP_HOST_RUN_SHELL";

/// The frame of one run, and what came through it so far.
pub struct Frame {
    token: String,
    /// What runs after the sweep (`Then`'s script and its status line), and
    /// its argument: empty without one.
    then: (String, String),
    state: State,
    /// After the closing token: status, sweep counts, what `Then` printed.
    after: Vec<u8>,
    keep: usize,
    cut: bool,
}

enum State {
    /// Before the opening token: what of it has come.
    Opening(Vec<u8>),
    /// The command's output; held back, what could begin the token.
    Command(Vec<u8>),
    Closed,
    /// The script did not print the token: it never ran.
    Absent,
}

impl Frame {
    pub fn new(then: Option<&Then>) -> Frame {
        Frame {
            token: format!("mcp-host-frame-{}", uuid::Uuid::new_v4().simple()),
            then: then.map_or_else(Default::default, |t| {
                let run = format!(
                    "set -- \"$a\"\n( {} )\necho \"{THEN_STATUS}$?\"\n",
                    t.script
                );
                (run, t.arg.clone())
            }),
            state: State::Opening(Vec::new()),
            after: Vec::new(),
            keep: then.map_or(0, |t| t.max_bytes) + 128,
            cut: false,
        }
    }

    /// `argv` beneath the framing script, for the run `marker`.
    pub fn argv(&self, argv: &[String], marker: &str) -> Vec<String> {
        let (then, arg) = &self.then;
        let script = format!(
            "m=$1 t=$2 a=$3; shift 3\n\
             echo \"$t\"\n\
             ( unset {SHELL_VAR}; export \"$m\"; exec \"$@\" )\n\
             s=$?\n\
             exec </dev/null 2>/dev/null\n\
             echo \"$t$s\"\n\
             w=$m\n\
             {SWEEP}\n\
             {then}exit $s"
        );
        let mut framed = vec![
            "sh".to_string(),
            "-c".into(),
            script,
            "sh".into(),
            format!("{MARKER_VAR}={marker}"),
            self.token.clone(),
            arg.clone(),
        ];
        framed.extend(argv.iter().cloned());
        framed
    }

    /// Take in a chunk of stdout; what of it is the command's own.
    pub fn stdout(&mut self, bytes: &[u8]) -> Vec<u8> {
        let token = self.token.as_bytes();
        match &mut self.state {
            State::Opening(seen) => {
                // The token on a line of its own (`echo`, in every `sh`).
                let opening = [token, b"\n"].concat();
                seen.extend_from_slice(bytes);
                if seen.len() < opening.len() && opening.starts_with(seen) {
                    return Vec::new();
                }
                if !seen.starts_with(&opening) {
                    let all = std::mem::take(seen);
                    self.state = State::Absent;
                    return all;
                }
                let rest = seen.split_off(opening.len());
                self.state = State::Command(Vec::new());
                self.stdout(&rest)
            }
            State::Command(held) => {
                held.extend_from_slice(bytes);
                if let Some(at) = memchr::memmem::find(held, token) {
                    let own = held[..at].to_vec();
                    let rest = held[at + token.len()..].to_vec();
                    self.state = State::Closed;
                    self.take_after(&rest);
                    return own;
                }
                let free = held.len().saturating_sub(token.len() - 1);
                held.drain(..free).collect()
            }
            State::Closed => {
                self.take_after(bytes);
                Vec::new()
            }
            State::Absent => bytes.to_vec(),
        }
    }

    /// The stream ended: what was held back is the command's.
    pub fn finish(&mut self) -> Vec<u8> {
        match &mut self.state {
            State::Opening(held) if !held.is_empty() => {
                let held = std::mem::take(held);
                self.state = State::Absent;
                held
            }
            State::Opening(held) | State::Command(held) => std::mem::take(held),
            State::Closed | State::Absent => Vec::new(),
        }
    }

    fn take_after(&mut self, bytes: &[u8]) {
        let room = self.keep.saturating_sub(self.after.len());
        self.cut |= bytes.len() > room;
        self.after
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Whether the script ran (it printed the opening token).
    pub fn started(&self) -> bool {
        !matches!(self.state, State::Opening(_) | State::Absent)
    }

    /// Whether nothing at all came on stdout: not even the opening token.
    pub fn silent(&self) -> bool {
        matches!(&self.state, State::Opening(seen) if seen.is_empty())
    }

    /// Whether the command has ended beneath it (the closing token came).
    pub fn closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// The command's status, once it has ended.
    pub fn status(&self) -> Option<i32> {
        let after = String::from_utf8_lossy(&self.after);
        after.split_once('\n')?.0.trim().parse().ok()
    }

    /// What the sweep did and what `Then` printed (`None`: it failed, or
    /// its answer was cut), once the script has ended.
    pub fn sweep(&self) -> Option<(KillReport, Option<String>)> {
        let after = String::from_utf8_lossy(&self.after);
        let (_, rest) = after.split_once('\n')?;
        let (report, printed) = read_sweep(rest)?;
        Some((report, printed.filter(|_| !self.cut)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn then() -> Then {
        Then {
            script: r#"echo "stat of $1""#,
            arg: "/workdir".into(),
            max_bytes: 100,
            timeout: Duration::from_secs(5),
        }
    }

    /// The frame's script run by this machine's `sh` (its sweep scans this
    /// machine's /proc, for a marker no other process has).
    #[test]
    #[cfg(unix)] // the script runs in a container: here, a POSIX sh and /proc
    fn the_script_runs_the_command_then_sweeps_and_says_so() {
        let t = then();
        let mut frame = Frame::new(Some(&t));
        let command = [
            "sh",
            "-c",
            "printf 'out\\nno newline'; (sleep 30 &); echo err >&2; exit 3",
        ];
        let argv = frame.argv(&command.map(String::from), &timebox::new_marker());
        let ran = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .unwrap();
        assert_eq!(ran.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&ran.stderr), "err\n");
        // Fed a byte at a time: the tokens cross every chunk boundary.
        let mut own = Vec::new();
        for byte in &ran.stdout {
            own.extend(frame.stdout(std::slice::from_ref(byte)));
        }
        own.extend(frame.finish());
        assert_eq!(String::from_utf8_lossy(&own), "out\nno newline");
        assert!(frame.started() && frame.closed());
        assert_eq!(frame.status(), Some(3));
        let (report, printed) = frame.sweep().unwrap();
        assert_eq!(report.killed, 1, "the sleep left behind");
        assert_eq!(printed.as_deref(), Some("stat of /workdir\n"));
    }

    /// A run is tried again without the frame only when its `sh` printed
    /// nothing: once the opening token came, the command may have run.
    #[test]
    fn only_a_frame_that_saw_nothing_is_silent() {
        let mut frame = Frame::new(None);
        assert!(frame.silent());
        let opening = format!("{}\n", frame.token);
        frame.stdout(&opening.as_bytes()[..5]);
        assert!(!frame.silent());
        frame.stdout(&opening.as_bytes()[5..]);
        frame.finish();
        assert!(!frame.silent() && frame.started());
        let mut cut_short = Frame::new(None);
        cut_short.stdout(&opening.as_bytes()[..5]);
        assert_eq!(cut_short.finish(), &opening.as_bytes()[..5]);
        assert!(!cut_short.silent() && !cut_short.started());
    }

    #[test]
    fn output_without_the_opening_token_is_all_the_commands() {
        let mut frame = Frame::new(None);
        let said = b"OCI runtime error: executable file `sh` not found";
        let mut own = frame.stdout(&said[..4]);
        own.extend(frame.stdout(&said[4..]));
        own.extend(frame.finish());
        assert_eq!(own, said);
        assert!(!frame.started());
        assert_eq!(frame.status(), None);
    }

    #[test]
    fn a_command_that_prints_the_token_only_cuts_its_own_answer() {
        let t = then();
        let mut frame = Frame::new(Some(&t));
        let token = frame.token.clone();
        let forged = format!("{token}\nmine{token}0\n9 9\nlies\n");
        let mut own = frame.stdout(forged.as_bytes());
        // The script's own closing comes after; it is past the cut.
        own.extend(frame.stdout(format!("{token}0\n0 0\nmcp-host-then-status 0\n").as_bytes()));
        own.extend(frame.finish());
        // What follows is the container's word, as a manifest always is.
        assert_eq!(own, b"mine");
        assert_eq!(frame.status(), Some(0));
    }

    #[test]
    fn what_follows_past_the_limit_is_not_an_answer() {
        let t = then();
        let mut frame = Frame::new(Some(&t));
        let token = frame.token.clone();
        frame.stdout(format!("{token}\n").as_bytes());
        let long = "x".repeat(500);
        frame.stdout(format!("{token}0\n0 0\n{long}\nmcp-host-then-status 0\n").as_bytes());
        let (_, printed) = frame.sweep().unwrap();
        assert_eq!(printed, None);
    }
}
