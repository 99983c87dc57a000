//! Who a process belongs to: every run carries a marker variable
//! `<host instance>-<run>`, and a host instance is `<pid>.<start time>` (a
//! pid alone may be reused). The watchdog and the start-up sweep find every
//! run of a host instance, dead or alive, by that prefix.

use crate::sys;

/// Environment variable that tags every process of one run.
pub const MARKER_VAR: &str = "MCP_HOST_RUN_ID";

/// This host process, as `<pid>.<start time>`.
pub fn instance() -> &'static str {
    static INSTANCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    INSTANCE.get_or_init(|| {
        let pid = std::process::id() as i32;
        format!("{pid}.{}", sys::start_time(pid).unwrap_or(0))
    })
}

/// Whether the host instance `id` (as [`instance`] writes it) still runs.
pub fn instance_alive(id: &str) -> bool {
    let Some((pid, started)) = id.split_once('.') else {
        return false;
    };
    match (pid.parse::<i32>(), started.parse::<u64>()) {
        (Ok(pid), Ok(started)) => sys::start_time(pid) == Some(started),
        _ => false,
    }
}

/// A fresh marker for one run of this host instance.
pub fn new_marker() -> String {
    format!("{}-{}", instance(), uuid::Uuid::new_v4().simple())
}

/// What a tree kill did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KillReport {
    /// Distinct processes signalled.
    pub killed: usize,
    /// Of those, how many needed SIGKILL after the grace period.
    pub forced: usize,
}
