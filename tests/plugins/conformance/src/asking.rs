//! Tools that ask the client something mid-call: sampling, elicitation
//! (forms, defaults, enums, URLs) and the round trips of the 2026-07-28
//! suite, where the question rides the call's own answer.

use plugin_sdk::client::{self, SamplingContent, SamplingMessage, SamplingRequest};
use plugin_sdk::{McpTool, ToolError, ToolOutput, text_output};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::NoArgs;

/// A question the client could not or would not answer, as a tool error.
fn unanswered(e: client::AskError) -> ToolError {
    e.into()
}

#[derive(Deserialize, JsonSchema)]
pub struct PromptArg {
    /// The prompt to send to the LLM.
    prompt: String,
}

pub struct Sampling;
impl McpTool for Sampling {
    const NAME: &'static str = "test_sampling";
    const DESCRIPTION: &'static str = "Asks the client's model to answer the prompt.";
    type Args = PromptArg;
    fn call(args: PromptArg) -> Result<ToolOutput, ToolError> {
        let sampled = client::sample(&SamplingRequest {
            messages: vec![SamplingMessage {
                role: client::Role::User,
                content: SamplingContent::Text(args.prompt),
            }],
            system_prompt: None,
            max_tokens: 100,
            temperature: None,
            stop_sequences: Vec::new(),
            model_hints: Vec::new(),
        })
        .map_err(unanswered)?;
        let text = match sampled.content {
            SamplingContent::Text(text) => text,
            SamplingContent::Image(m) | SamplingContent::Audio(m) => {
                format!("({} bytes of {})", m.data.len(), m.mime_type)
            }
        };
        Ok(text_output(format!(
            "LLM response: {text} (model {})",
            sampled.model
        )))
    }
}

fn action_name(action: client::Action) -> &'static str {
    match action {
        client::Action::Accept => "accept",
        client::Action::Decline => "decline",
        client::Action::Cancel => "cancel",
    }
}

/// Ask with a form and say what came back.
fn elicited(message: &str, schema: Value) -> Result<ToolOutput, ToolError> {
    let answer = client::elicit_form(message, &schema.to_string()).map_err(unanswered)?;
    let action = action_name(answer.action);
    let content = answer.content.unwrap_or_else(|| "{}".into());
    Ok(text_output(format!(
        "Elicitation completed: action={action}, content={content}"
    )))
}

#[derive(Deserialize, JsonSchema)]
pub struct MessageArg {
    /// The message to show the user.
    message: String,
}

pub struct Elicitation;
impl McpTool for Elicitation {
    const NAME: &'static str = "test_elicitation";
    const DESCRIPTION: &'static str = "Asks the person for a username and an email.";
    type Args = MessageArg;
    fn call(args: MessageArg) -> Result<ToolOutput, ToolError> {
        elicited(
            &args.message,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"}
                },
                "required": ["username", "email"]
            }),
        )
    }
}

pub struct ElicitationDefaults;
impl McpTool for ElicitationDefaults {
    const NAME: &'static str = "test_elicitation_sep1034_defaults";
    const DESCRIPTION: &'static str = "Asks with a default for every kind of field.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        elicited(
            "Please review the defaults",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "description": "Verification status", "default": true}
                }
            }),
        )
    }
}

pub struct ElicitationEnums;
impl McpTool for ElicitationEnums {
    const NAME: &'static str = "test_elicitation_sep1330_enums";
    const DESCRIPTION: &'static str = "Asks with every kind of enum field.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        let titled = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(c, t)| serde_json::json!({"const": c, "title": t}))
                .collect::<Vec<_>>()
        };
        elicited(
            "Please choose",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": titled(&[("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")])},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "items": {"anyOf": titled(&[("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice")])}}
                }
            }),
        )
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct UrlArgs {
    /// The page the person should open.
    url: String,
}

/// Not the suite's: URL-mode elicitation, for the host's own tests.
pub struct ElicitationUrl;
impl McpTool for ElicitationUrl {
    const NAME: &'static str = "elicit_url";
    const DESCRIPTION: &'static str = "Asks the person to open a page.";
    type Args = UrlArgs;
    fn call(args: UrlArgs) -> Result<ToolOutput, ToolError> {
        let action = client::elicit_url("Please sign in", &args.url).map_err(unanswered)?;
        Ok(text_output(action_name(action)))
    }
}

/// The suite's 2026-07-28 round-trip tools: each asks its named questions
/// through `client.ask` (one round), so a 2026-07-28 client gets them as
/// `input_required` and answers by name.
pub fn form(message: &str, field: &str, kind: &str) -> client::Question {
    client::Question::Form(client::FormRequest {
        message: message.into(),
        requested_schema: serde_json::json!({
            "type": "object",
            "properties": {field: {"type": kind}},
            "required": [field]
        })
        .to_string(),
    })
}

pub fn question_sample(text: &str, max_tokens: u32) -> client::Question {
    client::Question::Sample(SamplingRequest {
        messages: vec![SamplingMessage {
            role: client::Role::User,
            content: SamplingContent::Text(text.into()),
        }],
        system_prompt: None,
        max_tokens,
        temperature: None,
        stop_sequences: Vec::new(),
        model_hints: Vec::new(),
    })
}

/// Ask the named questions in one round; each answer as text.
pub fn ask_all(questions: Vec<(&str, client::Question)>) -> Result<Vec<String>, ToolError> {
    let named: Vec<(String, client::Question)> = questions
        .into_iter()
        .map(|(n, q)| (n.to_string(), q))
        .collect();
    let answers = client::ask(&named).map_err(unanswered)?;
    answers
        .into_iter()
        .map(|answer| {
            Ok(match answer.map_err(unanswered)? {
                client::Answer::Elicited(e) => {
                    e.content.unwrap_or_else(|| action_name(e.action).into())
                }
                client::Answer::Sampled(s) => match s.content {
                    SamplingContent::Text(text) => text,
                    _ => "(media)".into(),
                },
                client::Answer::Roots(roots) => roots
                    .iter()
                    .map(|r| r.uri.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        })
        .collect()
}

/// A tool of the 2026-07-28 suite: `$name` asks `$questions` and says
/// `$reply` followed by the answers.
macro_rules! round_trip_tool {
    ($ty:ident, $name:literal, $desc:literal, $reply:literal, $questions:expr) => {
        pub struct $ty;
        impl McpTool for $ty {
            const NAME: &'static str = $name;
            const DESCRIPTION: &'static str = $desc;
            type Args = NoArgs;
            fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
                let answers = ask_all($questions)?;
                Ok(text_output(format!("{} {}", $reply, answers.join("; "))))
            }
        }
    };
}

round_trip_tool!(
    RoundElicitation,
    "test_input_required_result_elicitation",
    "Asks the person's name in a round.",
    "Hello,",
    vec![("user_name", form("What is your name?", "name", "string"))]
);
round_trip_tool!(
    RoundSampling,
    "test_input_required_result_sampling",
    "Asks the client's model a question in a round.",
    "The model said:",
    vec![(
        "capital_question",
        question_sample("What is the capital of France?", 100)
    )]
);
round_trip_tool!(
    RoundRoots,
    "test_input_required_result_list_roots",
    "Asks the client's roots in a round.",
    "Roots:",
    vec![("client_roots", client::Question::Roots)]
);
round_trip_tool!(
    RoundState,
    "test_input_required_result_request_state",
    "Asks for a confirmation in a round carrying state.",
    "state-ok:",
    vec![("confirm", form("Please confirm", "ok", "boolean"))]
);
round_trip_tool!(
    RoundTampered,
    "test_input_required_result_tampered_state",
    "Asks for a confirmation in a round; a changed state is refused.",
    "confirmed:",
    vec![("confirm", form("Please confirm", "ok", "boolean"))]
);
round_trip_tool!(
    RoundMultiple,
    "test_input_required_result_multiple_inputs",
    "Asks a name, a greeting and the roots in one round.",
    "Got:",
    vec![
        ("user_name", form("What is your name?", "name", "string")),
        ("greeting", question_sample("Generate a greeting", 50)),
        ("client_roots", client::Question::Roots),
    ]
);

/// Asks the name and the model; a client that takes only one of them gets
/// only that one.
pub struct RoundCapabilities;
impl McpTool for RoundCapabilities {
    const NAME: &'static str = "test_input_required_result_capabilities";
    const DESCRIPTION: &'static str = "Asks what the client can be asked.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        let named = vec![
            (
                "user_name".to_string(),
                form("What is your name?", "name", "string"),
            ),
            (
                "greeting".to_string(),
                question_sample("Generate a greeting", 50),
            ),
        ];
        let answers = client::ask(&named).map_err(unanswered)?;
        let said: Vec<String> = answers
            .into_iter()
            .map(|a| match a {
                Ok(_) => "answered".to_string(),
                Err(e) => unanswered(e).code,
            })
            .collect();
        Ok(text_output(said.join(", ")))
    }
}

/// Two rounds: a name, then a colour.
pub struct RoundMulti;
impl McpTool for RoundMulti {
    const NAME: &'static str = "test_input_required_result_multi_round";
    const DESCRIPTION: &'static str = "Asks a name, then a colour, in two rounds.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        let name = ask_all(vec![(
            "step1",
            form("Step 1: What is your name?", "name", "string"),
        )])?;
        let color = ask_all(vec![(
            "step2",
            form("Step 2: What is your favorite color?", "color", "string"),
        )])?;
        Ok(text_output(format!(
            "{} likes {}",
            name.join(""),
            color.join("")
        )))
    }
}

/// For the stateless scenario: needs the client's model; a client that
/// does not declare sampling gets MCP's missing-capability error.
pub struct MissingCapability;
impl McpTool for MissingCapability {
    const NAME: &'static str = "test_missing_capability";
    const DESCRIPTION: &'static str = "Needs sampling.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        let answers = ask_all(vec![("needed", question_sample("Say yes", 5))])?;
        Ok(text_output(answers.join("")))
    }
}

round_trip_tool!(
    StreamingElicitation,
    "test_streaming_elicitation",
    "Asks the person something (the question rides the call's own answer).",
    "Answered:",
    vec![("user_name", form("What is your name?", "name", "string"))]
);
