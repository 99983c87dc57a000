//! The sweep inside a container on another machine's engine: the `sh`
//! that finds a run's processes by the marker in their environment (this
//! machine's /proc does not show them), and what it prints, with what a
//! [`Then`] script after it printed.

use std::time::Duration;

use timebox::KillReport;

/// A shell script run inside the container right after the sweep, `arg`
/// as its `$1`; at most `max_bytes` of its stdout are kept.
pub struct Then {
    pub script: &'static str,
    pub arg: String,
    pub max_bytes: usize,
    /// Its time, past the sweep's own.
    pub timeout: Duration,
}

/// Inside the container: every process whose environment carries the
/// line `$m` or `$w` gets SIGTERM, and SIGKILL after 200 ms if it is still
/// there (as [`timebox::kill_tree`] does here). Needs `sh`, `tr` and
/// `grep` in the image; prints how many were signalled and forced.
pub const SWEEP: &str = r#"killed=0; forced=0
scan() { for e in /proc/[0-9]*/environ; do p=${e#/proc/}; p=${p%/environ}
  [ "$p" = "$$" ] && continue
  tr '\0' '\n' 2>/dev/null < "$e" | grep -qxF -e "$m" -e "$w" && kill -"$1" "$p" 2>/dev/null && echo "$p"
done; }
killed=$(scan TERM | wc -l)
[ "$killed" -gt 0 ] && sleep 0.2 && forced=$(scan KILL | wc -l)
echo "$killed $forced""#;

/// What a sweep printed: the counts' line, and what a [`Then`] after it
/// printed if it was there and ended well (its status on a last line:
/// what a failed script printed is not its answer).
pub fn read_sweep(said: &str) -> Option<(KillReport, Option<String>)> {
    let (counts, rest) = said.split_once('\n').unwrap_or((said, ""));
    let mut counts = counts.split_whitespace().filter_map(|n| n.parse().ok());
    let report = KillReport {
        killed: counts.next()?,
        forced: counts.next()?,
    };
    let printed = rest
        .strip_suffix('\n')
        .and_then(|r| r.strip_suffix(&format!("{THEN_STATUS}0")))
        .map(str::to_string);
    Some((report, printed))
}

/// Starts the line that gives a [`Then`] script's exit status.
pub const THEN_STATUS: &str = "mcp-host-then-status ";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_then_script_that_failed_or_was_not_run_prints_nothing() {
        let (report, printed) = read_sweep("2 1\n100\na\nmcp-host-then-status 0\n").unwrap();
        assert_eq!((report.killed, report.forced), (2, 1));
        assert_eq!(printed.as_deref(), Some("100\na\n"));
        for failed in [
            "0 0\n100\nmcp-host-then-status 127\n",
            "0 0\n100\na\n",
            "0 0\n",
            "0 0\n100\nmcp-host-then-status 0\nmore\n",
        ] {
            assert_eq!(read_sweep(failed).unwrap().1, None, "{failed:?}");
        }
        assert!(read_sweep("killed\n").is_none());
    }
}
