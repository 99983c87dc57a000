//! The tasks extension's fixtures (2026-07-28 suite, tasks-* scenarios).

use std::time::Duration;

use plugin_sdk::{Hints, McpTool, TaskSupport, ToolError, ToolOutput, notify, text_output};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::NoArgs;
use crate::asking::{ask_all, form};

#[derive(Deserialize, JsonSchema)]
pub struct NameArg {
    /// Who to greet.
    name: String,
}

pub struct Greet;
impl McpTool for Greet {
    const NAME: &'static str = "greet";
    const DESCRIPTION: &'static str = "Greets at once (never a task).";
    type Args = NameArg;
    fn call(args: NameArg) -> Result<ToolOutput, ToolError> {
        Ok(text_output(format!("Hello, {}!", args.name)))
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct ComputeArgs {
    /// How long to work.
    seconds: u32,
    /// A name for the result.
    #[serde(default)]
    label: Option<String>,
}

pub struct SlowCompute;
impl McpTool for SlowCompute {
    const NAME: &'static str = "slow_compute";
    const DESCRIPTION: &'static str =
        "Works for `seconds`, saying how far it is each second, then answers (a task when slow).";
    const TASKS: TaskSupport = TaskSupport::Optional;
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = ComputeArgs;
    fn call(args: ComputeArgs) -> Result<ToolOutput, ToolError> {
        for second in 0..args.seconds {
            notify::progress(
                second.into(),
                Some(args.seconds.into()),
                Some(&format!("{second} of {} seconds", args.seconds)),
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        let label = args.label.unwrap_or_default();
        Ok(text_output(format!(
            "Computed {label} in {} seconds",
            args.seconds
        )))
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct FileArg {
    /// The file to delete.
    filename: String,
}

pub struct ConfirmDelete;
impl McpTool for ConfirmDelete {
    const NAME: &'static str = "confirm_delete";
    const DESCRIPTION: &'static str = "Asks the person to confirm, then says what it did.";
    const TASKS: TaskSupport = TaskSupport::Optional;
    type Args = FileArg;
    fn call(args: FileArg) -> Result<ToolOutput, ToolError> {
        let answers = ask_all(vec![(
            "confirm",
            form(&format!("Delete {}?", args.filename), "confirm", "boolean"),
        )])?;
        Ok(text_output(format!("{}: {}", args.filename, answers[0])))
    }
}

pub struct MultiInput;
impl McpTool for MultiInput {
    const NAME: &'static str = "multi_input";
    const DESCRIPTION: &'static str = "Asks two questions at once.";
    const TASKS: TaskSupport = TaskSupport::Optional;
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        let answers = ask_all(vec![
            ("first", form("First name?", "name", "string")),
            ("second", form("Second name?", "name", "string")),
        ])?;
        Ok(text_output(answers.join("; ")))
    }
}

pub struct FailingJob;
impl McpTool for FailingJob {
    const NAME: &'static str = "failing_job";
    const DESCRIPTION: &'static str = "Always a task; fails after a second.";
    const TASKS: TaskSupport = TaskSupport::Required;
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        std::thread::sleep(Duration::from_secs(1));
        Err(ToolError::new(
            "job_failed",
            "the job failed, as it always does",
        ))
    }
}

pub struct ProtocolErrorJob;
impl McpTool for ProtocolErrorJob {
    const NAME: &'static str = "protocol_error_job";
    const DESCRIPTION: &'static str = "Crashes after a second (a task when slow).";
    const TASKS: TaskSupport = TaskSupport::Optional;
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        std::thread::sleep(Duration::from_secs(1));
        panic!("protocol_error_job crashes, as it always does");
    }
}

pub struct ToolWithTask;
impl McpTool for ToolWithTask {
    const NAME: &'static str = "test_tool_with_task";
    const DESCRIPTION: &'static str = "Asks a name, then works on it as a task.";
    const TASKS: TaskSupport = TaskSupport::Required;
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        let name = ask_all(vec![(
            "user_name",
            form("What is your name?", "name", "string"),
        )])?;
        std::thread::sleep(Duration::from_millis(500));
        Ok(text_output(format!("Worked for {}", name[0])))
    }
}
