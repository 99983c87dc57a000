//! Long calls as MCP tasks (the tasks extension of MCP 2026-07-28,
//! SEP-2663). A call of a tool that may run long (`x-task-support`), from
//! a client that takes tasks, that is still running after a short grace is
//! answered with a task; the client polls `tasks/get` for its status and
//! result, answers its questions with `tasks/update`, and stops it with
//! `tasks/cancel`, which ends the call as a cancellation does.
//!
//! rmcp's [`TaskManager`] keeps the tasks; this adds what a host serving
//! many clients needs: a task is only seen by the client that made it,
//! a client runs a bounded number at once (ended ones do not count), and
//! the results kept are bounded per client and over all clients: a result
//! past either bound is kept as a short error saying so (issue 61, item 6).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{CreateTaskResult, GetTaskResult, InputResponses, Task};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};

use super::rounds::{Outcome, Running};
use super::to_result;
use crate::service::Reply;

/// How long a call of a task-capable tool runs before it becomes a task:
/// a quick one is answered in the call, sparing the client a poll.
pub const GRACE: Duration = Duration::from_millis(250);

/// How long a task lives (and, once ended, is kept for reading): past it
/// a running task is stopped. Long enough for the longest call a policy
/// allows a plugin by default.
const TTL_MS: u64 = 60 * 60 * 1000;
/// How often a client is told to poll.
const POLL_MS: u64 = 500;
/// Tasks a client may have running at once.
const MAX_RUNNING_PER_CLIENT: usize = 32;
/// Ended tasks kept for a client (each until its TTL passes).
const MAX_ENDED_PER_CLIENT: usize = 1024;
/// Bytes of ended tasks' results kept for one client, and for all.
const MAX_RESULT_BYTES_PER_CLIENT: usize = 64 << 20;
const MAX_RESULT_BYTES: usize = 256 << 20;

/// The tasks of every client of a host.
#[derive(Default)]
pub struct Tasks {
    manager: TaskManager,
    /// Each task's client, and the size of its result once it has one.
    owned: Arc<Mutex<HashMap<String, Owned>>>,
}

struct Owned {
    client: String,
    /// Its result's size once it has ended; `None` while it runs.
    result_bytes: Option<usize>,
}

impl Tasks {
    /// `running` goes on as a task of `client`.
    pub(super) fn adopt(
        &self,
        running: Running,
        client: String,
    ) -> Result<CreateTaskResult, McpError> {
        self.create(client, move |task| {
            Box::pin(async move { running.run_as_task(task).await })
        })
    }

    /// A task of `client` that has already ended with `reply` (a tool that
    /// always answers with a task, done within its grace).
    pub(super) fn ended(&self, reply: Reply, client: String) -> Result<CreateTaskResult, McpError> {
        self.create(client, move |_| {
            Box::pin(async move { Some(Outcome::Call(Some(reply))) })
        })
    }

    fn create(
        &self,
        client: String,
        run: impl FnOnce(
            rmcp::task_manager::TaskContext,
        ) -> futures_util::future::BoxFuture<'static, Option<Outcome>>,
    ) -> Result<CreateTaskResult, McpError> {
        let owned = self.owned.clone();
        // Held from the count to the entry: two calls cannot both take the
        // last place, and the task is registered before it can end (so
        // that its size is counted).
        let mut seeds = self.owned.lock().expect("tasks lock");
        self.admit(&mut seeds, &client)?;
        let task: Task = self.manager.spawn(
            TaskOptions::new()
                .with_ttl_ms(TTL_MS)
                .with_poll_interval_ms(POLL_MS),
            move |context| {
                let id = context.task_id().to_string();
                let outcome = run(context);
                Box::pin(async move {
                    let result = settle(outcome.await)?;
                    Ok(kept(&mut owned.lock().expect("tasks lock"), &id, result))
                })
            },
        );
        seeds.insert(
            task.task_id.clone(),
            Owned {
                client,
                result_bytes: None,
            },
        );
        Ok(CreateTaskResult::new(task))
    }

    /// Room for one more task of `client`, once the tasks rmcp forgot
    /// (expired) are forgotten here too.
    fn admit(&self, owned: &mut HashMap<String, Owned>, client: &str) -> Result<(), McpError> {
        owned.retain(|id, _| self.manager.get_task(id).is_ok());
        let theirs = owned.values().filter(|o| o.client == client);
        let (running, ended) = theirs.fold((0, 0), |(r, e), o| match o.result_bytes {
            None => (r + 1, e),
            Some(_) => (r, e + 1),
        });
        if running >= MAX_RUNNING_PER_CLIENT {
            return Err(McpError::internal_error(
                format!(
                    "this client has {running} tasks running, the most it may: call again once one \
                     ends (tasks/cancel ends one sooner)"
                ),
                None,
            ));
        }
        if ended >= MAX_ENDED_PER_CLIENT {
            return Err(McpError::internal_error(
                format!(
                    "this client holds {ended} ended tasks, the most kept: each is kept {} minutes \
                     after it ends; call again once some are gone",
                    TTL_MS / 60_000
                ),
                None,
            ));
        }
        Ok(())
    }

    /// Task `id`, if `client` made it: another client's is as unknown.
    fn check(&self, id: &str, client: &str) -> Result<(), McpError> {
        let owned = self.owned.lock().expect("tasks lock");
        match owned.get(id) {
            Some(o) if o.client == client => Ok(()),
            _ => Err(McpError::invalid_params(
                format!("unknown task `{id}`: it expired or was never this client's"),
                None,
            )),
        }
    }

    pub(super) fn get(&self, id: &str, client: &str) -> Result<GetTaskResult, McpError> {
        self.check(id, client)?;
        self.manager.get_task(id).map(GetTaskResult::new)
    }

    pub(super) fn update(
        &self,
        id: &str,
        client: &str,
        responses: InputResponses,
    ) -> Result<(), McpError> {
        self.check(id, client)?;
        self.manager.update_task(id, responses)
    }

    pub(super) fn cancel(&self, id: &str, client: &str) -> Result<(), McpError> {
        self.check(id, client)?;
        self.manager.cancel_task(id)
    }
}

/// `result` of task `id`, as kept: itself, or, when it would pass what is
/// kept of results for its client or for all, a short error saying so.
fn kept(
    owned: &mut HashMap<String, Owned>,
    id: &str,
    result: rmcp::model::CallToolResult,
) -> rmcp::model::CallToolResult {
    let bytes = serde_json::to_vec(&result).map_or(0, |json| json.len());
    let Some(client) = owned.get(id).map(|o| o.client.clone()) else {
        return result;
    };
    let held = |mine: bool| -> usize {
        owned
            .values()
            .filter(|o| !mine || o.client == client)
            .filter_map(|o| o.result_bytes)
            .sum()
    };
    let full = if held(true) + bytes > MAX_RESULT_BYTES_PER_CLIENT {
        Some(format!(
            "this client's ended tasks hold {} MiB of results, and {} MiB are kept for one client",
            held(true) >> 20,
            MAX_RESULT_BYTES_PER_CLIENT >> 20
        ))
    } else if held(false) + bytes > MAX_RESULT_BYTES {
        Some(format!(
            "ended tasks hold {} MiB of results, and {} MiB are kept for all clients",
            held(false) >> 20,
            MAX_RESULT_BYTES >> 20
        ))
    } else {
        None
    };
    let result = match full {
        None => result,
        Some(why) => to_result(Reply::error(
            "task_results_full",
            &format!(
                "the task ended, but its result ({bytes} bytes) was not kept: {why}; read the \
                 results of ended tasks sooner, or run this again once they expire"
            ),
            true,
            serde_json::Map::new(),
        )),
    };
    let kept = serde_json::to_vec(&result).map_or(0, |json| json.len());
    if let Some(entry) = owned.get_mut(id) {
        entry.result_bytes = Some(kept);
    }
    result
}

/// A task's end as MCP has it: a tool's result (an error result too) is
/// `completed`; a plugin that crashed is `failed`; `None` is `cancelled`.
fn settle(outcome: Option<Outcome>) -> Result<rmcp::model::CallToolResult, TaskExit> {
    let reply = match outcome {
        None => return Err(TaskExit::Cancelled),
        Some(Outcome::Call(Some(reply))) => reply,
        Some(_) => {
            return Err(TaskExit::Error(McpError::internal_error(
                "the tool's plugin was unloaded during the call",
                None,
            )));
        }
    };
    let code = reply.structured.as_ref().and_then(|s| s["code"].as_str());
    if reply.is_error && matches!(code, Some("plugin_trapped" | "plugin_out_of_memory")) {
        return Err(TaskExit::Error(McpError::internal_error(
            reply.text.clone(),
            reply.structured.clone(),
        )));
    }
    Ok(to_result(reply))
}

/// Who a task (or an unread answer) belongs to: the credential the
/// request came with (over HTTP, its `Authorization`), the session it
/// belongs to (clients of MCP before 2026-07-28 have one: its
/// `Mcp-Session-Id`), and the client program it says it is (MCP
/// 2026-07-28 requests carry `clientInfo`). Requests of MCP 2026-07-28
/// have no session to bind to: there, beyond the credential, a task id is
/// a random UUID only its client is told, and the program's name only
/// keeps clients' shares apart.
pub(super) fn client_of(context: &RequestContext<RoleServer>) -> String {
    let parts = context.extensions.get::<axum::http::request::Parts>();
    let header = |name: &str| {
        parts
            .and_then(|parts| parts.headers.get(name))
            .map(|value| crate::catalog::sha256_hex(value.as_bytes()))
            .unwrap_or_default()
    };
    let credential = format!("{} {}", header("authorization"), header("mcp-session-id"));
    let program = context
        .meta
        .client_info()
        .map(|info| info.name)
        .unwrap_or_default();
    format!("{credential} {program}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result_of(mib: usize) -> rmcp::model::CallToolResult {
        rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(
            "x".repeat(mib << 20),
        )])
    }

    fn running(owned: &mut HashMap<String, Owned>, id: &str, client: &str) {
        let client = client.to_string();
        owned.insert(
            id.to_string(),
            Owned {
                client,
                result_bytes: None,
            },
        );
    }

    /// Results are kept up to a share per client and a bound over all
    /// clients; past either, a short error is kept in their place.
    #[test]
    fn results_kept_are_bounded_per_client_and_in_all() {
        let mut owned = HashMap::new();
        for n in 0..4 {
            running(&mut owned, &format!("a{n}"), "a");
            let kept = kept(&mut owned, &format!("a{n}"), result_of(15));
            assert_ne!(kept.is_error, Some(true), "result {n} of a");
        }
        running(&mut owned, "a4", "a");
        let dropped = kept(&mut owned, "a4", result_of(15));
        assert_eq!(dropped.is_error, Some(true));
        assert!(format!("{dropped:?}").contains("kept for one client"));
        // Three more clients fill what is kept for all.
        for client in ["b", "c", "d"] {
            for n in 0..4 {
                let id = format!("{client}{n}");
                running(&mut owned, &id, client);
                kept(&mut owned, &id, result_of(15));
            }
        }
        running(&mut owned, "e0", "e");
        let dropped = kept(&mut owned, "e0", result_of(30));
        assert!(format!("{dropped:?}").contains("kept for all clients"));
        let held: usize = owned.values().filter_map(|o| o.result_bytes).sum();
        assert!(held <= MAX_RESULT_BYTES, "{held}");
    }
}
