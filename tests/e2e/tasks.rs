//! Long calls as MCP tasks (the tasks extension of MCP 2026-07-28): a
//! 2026 client that takes tasks gets a task for a call still running after
//! the grace, polls it, answers its questions and cancels it; a client
//! that does not take tasks is answered in the call, or told it must take
//! them. The plugin is the conformance fixture (tests/plugins/conformance).

use std::time::{Duration, Instant};

use rmcp::ClientLifecycleMode;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ElicitResult, ElicitationAction,
    ErrorCode, GetTaskParams, InputResponses, Task, TaskPayload, TaskStatus, UpdateTaskParams,
};
use serde_json::{Value, json};

use crate::harness::*;

const GRANTED: &str = "[plugins.conformance]\ncapabilities = [\"client\"]\n";

fn current() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    }
}

fn call(tool: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string())
        .with_arguments(arguments.as_object().unwrap().clone())
}

/// Call `tool`, which must answer with a task: the task as created.
async fn task_of(client: &Client, tool: &str, arguments: Value) -> Task {
    let response = client
        .service
        .peer()
        .call_tool_once(call(tool, arguments))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = response else {
        panic!("{tool}: a task, not {response:?}")
    };
    created.task
}

/// The task's state once `until` holds (or it ended), within 20 s.
async fn poll(client: &Client, id: &str, until: impl Fn(TaskStatus) -> bool) -> TaskPayload {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = client
            .service
            .peer()
            .get_task(GetTaskParams::new(id))
            .await
            .expect("tasks/get");
        let status = got.task.status();
        if until(status) || status.is_terminal() || Instant::now() > deadline {
            return got.task.payload;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn result_text(payload: &TaskPayload) -> String {
    let TaskPayload::Completed { result } = payload else {
        panic!("completed, not {payload:?}")
    };
    result["content"][0]["text"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_slow_call_is_a_task_polled_answered_and_cancelled() {
    let env = Env::new(&["conformance"], GRANTED);
    let host = env.start_http(&[]).await;
    let mut confirm = ElicitResult::new(ElicitationAction::Accept);
    confirm.content = Some(json!({"confirm": true}));
    let takes_tasks = Answers {
        elicit: Some(confirm),
        tasks: true,
        ..Answers::default()
    };
    let client = host.connect_answering(current(), None, takes_tasks).await;
    let peer = client.service.peer();

    // Done within the grace: answered in the call.
    let quick = peer
        .call_tool_once(call(
            "slow_compute",
            json!({"seconds": 0, "label": "quick"}),
        ))
        .await
        .unwrap();
    assert!(matches!(quick, CallToolResponse::Complete(_)), "{quick:?}");

    // Still running: a task, whose result tasks/get holds once done.
    let task = task_of(
        &client,
        "slow_compute",
        json!({"seconds": 1, "label": "slow"}),
    )
    .await;
    assert_eq!(task.status, TaskStatus::Working);
    assert!(task.ttl_ms.is_some_and(|ttl| ttl >= 60_000));
    let done = poll(&client, &task.task_id, |_| false).await;
    assert_eq!(result_text(&done), "Computed slow in 1 seconds");

    // While it works, its progress is the task's status message.
    let task = task_of(
        &client,
        "slow_compute",
        json!({"seconds": 3, "label": "told"}),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let message = loop {
        let got = peer
            .get_task(GetTaskParams::new(&task.task_id))
            .await
            .unwrap();
        let message = got.task.task.status_message.clone().unwrap_or_default();
        if message.starts_with("2 of 3") || Instant::now() > deadline {
            break message;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(message, "2 of 3 seconds");
    let done = poll(&client, &task.task_id, |_| false).await;
    assert_eq!(result_text(&done), "Computed told in 3 seconds");

    // A question: the task waits with it in `inputRequests`, and goes on
    // with the answer tasks/update brings.
    let asking = task_of(&client, "confirm_delete", json!({"filename": "notes.txt"})).await;
    let id = asking.task_id.clone();
    let waiting = poll(&client, &id, |s| s == TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = waiting else {
        panic!("input required, not {waiting:?}")
    };
    let mut answers = InputResponses::new();
    for key in input_requests.keys() {
        answers.insert(
            key.clone(),
            json!({"action": "accept", "content": {"confirm": true}}),
        );
    }
    peer.update_task(UpdateTaskParams::new(&id, answers))
        .await
        .unwrap();
    let answered = poll(&client, &id, |_| false).await;
    assert_eq!(result_text(&answered), r#"notes.txt: {"confirm":true}"#);

    // Cancelled: the call ends at once, though it would run a minute.
    let long = task_of(&client, "slow_compute", json!({"seconds": 60})).await;
    let started = Instant::now();
    peer.cancel_task(CancelTaskParams::new(&long.task_id))
        .await
        .unwrap();
    let cancelled = poll(&client, &long.task_id, |_| false).await;
    assert!(matches!(cancelled, TaskPayload::Cancelled), "{cancelled:?}");
    assert!(started.elapsed() < Duration::from_secs(20));

    // A plugin that crashes fails the task, with the error inlined.
    let crash = task_of(&client, "protocol_error_job", json!({})).await;
    let failed = poll(&client, &crash.task_id, |_| false).await;
    let TaskPayload::Failed { error } = failed else {
        panic!("failed, not {failed:?}")
    };
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("plugin_trapped")
    );

    // A client with another credential does not see this client's tasks.
    let other = host
        .connect_answering(
            current(),
            Some("another-credential"),
            Answers {
                tasks: true,
                ..Answers::default()
            },
        )
        .await;
    let hidden = other.service.peer().get_task(GetTaskParams::new(&id)).await;
    let rmcp::service::ServiceError::McpError(hidden) = hidden.unwrap_err() else {
        panic!("an MCP error")
    };
    assert_eq!(hidden.code, ErrorCode::INVALID_PARAMS);
}

#[tokio::test]
async fn a_client_without_tasks_is_answered_in_the_call_or_told_to_take_them() {
    let env = Env::new(&["conformance"], GRANTED);
    let host = env.start_http(&[]).await;
    let client = host.connect(current(), None).await;
    let peer = client.service.peer();
    let answered = peer
        .call_tool_once(call("slow_compute", json!({"seconds": 1, "label": "held"})))
        .await
        .unwrap();
    let CallToolResponse::Complete(result) = answered else {
        panic!("a complete result, not {answered:?}")
    };
    assert_eq!(
        result.content[0].as_text().unwrap().text,
        "Computed held in 1 seconds"
    );
    let refused = peer
        .call_tool_once(call("failing_job", json!({})))
        .await
        .unwrap_err();
    let rmcp::service::ServiceError::McpError(refused) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(refused.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
    let error = peer
        .get_task(GetTaskParams::new("00000000-0000-0000-0000-000000000000"))
        .await
        .unwrap_err();
    assert!(format!("{error:?}").contains("-32021"), "{error:?}");
}

/// An npm project whose test script is `script`, served by run_test over
/// HTTP.
async fn run_test_host(script: &str) -> Option<(Env, HttpHost)> {
    if !require_program("setsid", "install util-linux") {
        return None;
    }
    let env = crate::run_test::npm_env(script)?;
    let host = env.start_http(&[]).await;
    Some((env, host))
}

async fn tasks_client(host: &HttpHost) -> Client {
    let answers = Answers {
        tasks: true,
        ..Answers::default()
    };
    host.connect_answering(current(), Some("ada"), answers)
        .await
}

/// A run outlives the connection that started it: the client goes away,
/// comes back, and reads the result.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_test_task_outlives_its_connection_and_is_read_afterwards() {
    let Some((_env, host)) = run_test_host("sleep 2").await else {
        return;
    };
    let client = tasks_client(&host).await;
    let task = task_of(&client, "run_test", run_test_args("npm", json!({}))).await;
    let id = task.task_id;
    client.service.cancel().await.unwrap();

    let again = tasks_client(&host).await;
    let done = poll(&again, &id, |_| false).await;
    let TaskPayload::Completed { result } = done else {
        panic!("completed, not {done:?}")
    };
    assert_eq!(result["structuredContent"]["status"], "pass", "{result:#?}");
}

/// tasks/cancel ends a run as a cancellation does: its whole tree, escapees
/// included, is gone.
#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_run_test_task_kills_its_tree() {
    let n = 470;
    let Some((env, host)) = run_test_host(&crate::lifetime::hanging_tree(n)).await else {
        return;
    };
    let client = tasks_client(&host).await;
    let args = run_test_args(
        "npm",
        json!({"timeout_ms": 600_000, "no_output_timeout_ms": 600_000}),
    );
    let task = task_of(&client, "run_test", args).await;
    let mut pids = crate::lifetime::pids_written(&env.workspace).await;
    if !require_cgroups(&std::fs::read_to_string(env.stderr_log()).unwrap()) {
        pids.pop(); // the env-cleared escapee is found by cgroups only
    }
    client
        .service
        .peer()
        .cancel_task(CancelTaskParams::new(&task.task_id))
        .await
        .unwrap();
    let cancelled = poll(&client, &task.task_id, |_| false).await;
    assert!(matches!(cancelled, TaskPayload::Cancelled), "{cancelled:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    let left = loop {
        let mut left: Vec<i32> = pids.iter().copied().filter(|p| !process_gone(*p)).collect();
        left.extend(processes_with(&format!("sleep {n}4")));
        if left.is_empty() || Instant::now() > deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(left.is_empty(), "still running after the cancel: {left:?}");
}

/// A client runs at most 32 tasks at once: the next call is refused,
/// saying what to do. Ended tasks do not count against that (issue 61,
/// item 6: an honest client was refused at its 33rd task for an hour).
#[tokio::test]
async fn a_client_runs_a_bounded_number_of_tasks() {
    let config = format!("{GRANTED}[plugins.conformance.limits]\nconcurrency = 40\n");
    let env = Env::new(&["conformance"], &config);
    let host = env.start_http(&[]).await;
    let client = host
        .connect_answering(
            current(),
            None,
            Answers {
                tasks: true,
                ..Answers::default()
            },
        )
        .await;
    let peer = client.service.peer();
    for n in 0..40 {
        let made = peer.call_tool_once(call("failing_job", json!({}))).await;
        assert!(
            matches!(made, Ok(CallToolResponse::Task(_))),
            "ended task {n}: {made:?}"
        );
    }
    for n in 0..32 {
        let made = peer
            .call_tool_once(call("slow_compute", json!({"seconds": 60})))
            .await;
        assert!(
            matches!(made, Ok(CallToolResponse::Task(_))),
            "running task {n}: {made:?}"
        );
    }
    let refused = peer
        .call_tool_once(call("slow_compute", json!({"seconds": 60})))
        .await
        .unwrap_err();
    assert!(
        format!("{refused}").contains("32 tasks running, the most it may"),
        "{refused}"
    );
}
