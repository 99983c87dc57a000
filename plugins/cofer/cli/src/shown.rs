//! An environment's log and diff on the person's terminal. The commit
//! messages and the files are the agent's: git prints them as they are, so
//! an ESC or C1 sequence in them would reach the terminal and act there.
//! git's output is read here, every line made safe ([`termtext::lines`]),
//! coloured by us (git's own colours cannot be told from an agent's), and
//! handed to the person's pager when the output is a terminal.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::process::{Child, Command, ExitCode, Stdio};

use anyhow::{Context, Result};
use hostgit::Repo;

/// Run `git <args>` (a log or a diff) and show what it printed, made safe.
pub fn show(repo: &Repo, args: &[&str]) -> Result<ExitCode> {
    let mut args = args.to_vec();
    args.insert(1, "--no-color");
    let mut git = repo
        .user_command(&args)
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run git")?;
    let terminal = std::io::stdout().is_terminal();
    let colour = terminal && std::env::var_os("NO_COLOR").is_none();
    let mut pager = if terminal { pager() } else { None };
    let from_git = BufReader::new(git.stdout.take().expect("piped"));
    let written = match pager.as_mut().and_then(|p| p.stdin.take()) {
        Some(to_pager) => copy(from_git, to_pager, colour),
        None => copy(from_git, std::io::stdout().lock(), colour),
    };
    if let Some(mut pager) = pager {
        let _ = pager.wait();
    }
    // A reader that left (the pager quit, `| head`) ends git too.
    if written.is_err() {
        let _ = git.kill();
    }
    let status = git.wait().context("cannot run git")?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        _ if written.is_err() => ExitCode::SUCCESS,
        code => ExitCode::from(code.unwrap_or(1).clamp(1, 255) as u8),
    })
}

/// Every line of `from`, made safe and maybe coloured, onto `to`.
fn copy(mut from: impl BufRead, mut to: impl Write, colour: bool) -> std::io::Result<()> {
    let mut raw = Vec::new();
    loop {
        raw.clear();
        if from.read_until(b'\n', &mut raw)? == 0 {
            return to.flush();
        }
        let text = termtext::lines(&String::from_utf8_lossy(&raw));
        match paint(&text).filter(|_| colour) {
            Some(code) => {
                let body = text.strip_suffix('\n').unwrap_or(&text);
                writeln!(to, "\u{1b}[{code}m{body}\u{1b}[m")?
            }
            None => to.write_all(text.as_bytes())?,
        }
    }
}

/// The colour git gives such a line of a log or a diff.
fn paint(line: &str) -> Option<&'static str> {
    if line.starts_with("commit ") {
        Some("33")
    } else if line.starts_with("+++ ")
        || line.starts_with("--- ")
        || line.starts_with("diff --git ")
    {
        Some("1")
    } else if line.starts_with("@@") {
        Some("36")
    } else if line.starts_with('+') {
        Some("32")
    } else if line.starts_with('-') {
        Some("31")
    } else {
        None
    }
}

/// The person's pager reading our output, as git would start it (`LESS`
/// and `LV` set as git sets them when unset); none for `cat`.
fn pager() -> Option<Child> {
    let pager = hostgit::person_pager();
    if pager.trim().is_empty() || pager.trim() == "cat" {
        return None;
    }
    let mut command = Command::new("sh");
    command.args(["-c", &pager]).stdin(Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        command.env("LESS", "FRX");
    }
    if std::env::var_os("LV").is_none() {
        command.env("LV", "-c");
    }
    command.spawn().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_sequences_never_reach_the_output() {
        let git_said =
            "commit abc\n    title \u{1b}]0;pwned\u{7}\u{9b}2J\n+\u{1b}[31mred\u{202e}\n";
        let mut out = Vec::new();
        copy(git_said.as_bytes(), &mut out, true).unwrap();
        let out = String::from_utf8(out).unwrap();
        // Only our own colour codes: each ESC opens `[<digits>m` or `[m`.
        for (i, _) in out.match_indices('\u{1b}') {
            let rest = &out[i + 1..];
            let end = rest.find('m').unwrap();
            assert!(
                rest.starts_with('[') && rest[1..end].chars().all(|c| c.is_ascii_digit()),
                "{out:?}"
            );
        }
        assert!(!out.contains('\u{9b}') && !out.contains('\u{202e}') && !out.contains('\u{7}'));
        assert!(
            out.contains("\u{1b}[32m+\u{FFFD}[31mred\u{FFFD}\u{1b}[m"),
            "{out:?}"
        );
    }
}
