//! Long calls as MCP tasks (the tasks extension of MCP 2026-07-28,
//! SEP-2663). A call of a tool that may run long (`x-task-support`), from
//! a client that takes tasks, that is still running after a short grace is
//! answered with a task; the client polls `tasks/get` for its status and
//! result, answers its questions with `tasks/update`, and stops it with
//! `tasks/cancel`, which ends the call as a cancellation does.
//!
//! rmcp's [`TaskManager`] keeps the tasks; this adds what a host serving
//! many clients needs: a task is only seen by the client that made it,
//! and a client holds a bounded number of tasks and bytes of results.

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
/// Tasks a client may hold at once, running or ended and unread.
const MAX_TASKS_PER_CLIENT: usize = 32;
/// Bytes of ended tasks' results a client may hold at once.
const MAX_RESULT_BYTES_PER_CLIENT: usize = 64 << 20;

/// The tasks of every client of a host.
#[derive(Default)]
pub struct Tasks {
    manager: TaskManager,
    /// Each task's client, and the size of its result once it has one.
    owned: Arc<Mutex<HashMap<String, Owned>>>,
}

struct Owned {
    client: String,
    result_bytes: usize,
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
                    let bytes = serde_json::to_vec(&result).map_or(0, |json| json.len());
                    if let Some(entry) = owned.lock().expect("tasks lock").get_mut(&id) {
                        entry.result_bytes = bytes;
                    }
                    Ok(result)
                })
            },
        );
        seeds.insert(
            task.task_id.clone(),
            Owned {
                client,
                result_bytes: 0,
            },
        );
        Ok(CreateTaskResult::new(task))
    }

    /// Room for one more task of `client`, once the tasks rmcp forgot
    /// (expired) are forgotten here too.
    fn admit(&self, owned: &mut HashMap<String, Owned>, client: &str) -> Result<(), McpError> {
        owned.retain(|id, _| self.manager.get_task(id).is_ok());
        let theirs = owned.values().filter(|o| o.client == client);
        let (count, bytes) = theirs.fold((0, 0), |(n, b), o| (n + 1, b + o.result_bytes));
        if count >= MAX_TASKS_PER_CLIENT || bytes >= MAX_RESULT_BYTES_PER_CLIENT {
            return Err(McpError::internal_error(
                format!(
                    "this client holds {count} tasks ({} MiB of results); at most {MAX_TASKS_PER_CLIENT} \
                     tasks and {} MiB: a task is kept {} minutes after it ends (tasks/cancel ends a \
                     running one sooner); call again once some are gone",
                    bytes >> 20,
                    MAX_RESULT_BYTES_PER_CLIENT >> 20,
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

/// Who a task belongs to: the credential the request came with (over
/// HTTP, its `Authorization`) and the client program it says it is (MCP
/// 2026-07-28 requests carry `clientInfo`). Requests of MCP 2026-07-28 have
/// no session to bind to; beyond this, a task id is a random UUID only its
/// client is told.
pub(super) fn client_of(context: &RequestContext<RoleServer>) -> String {
    let credential = context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.headers.get(axum::http::header::AUTHORIZATION))
        .map(|value| crate::catalog::sha256_hex(value.as_bytes()))
        .unwrap_or_default();
    let program = context
        .meta
        .client_info()
        .map(|info| info.name)
        .unwrap_or_default();
    format!("{credential} {program}")
}
