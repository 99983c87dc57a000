//! Test fixture: what the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios) asks a server
//! for, built only on the plugin WIT, so the suite tests the host's MCP
//! surface as a plugin reaches it. Names and texts are the suite's.
//! `scripts/conformance-check` serves it over HTTP and runs the suite.

use std::time::Duration;

use plugin_sdk::client::{self, SamplingContent, SamplingMessage, SamplingRequest};
use plugin_sdk::completion::{self, Reference};
use plugin_sdk::content::{self, Block, EmbeddedResource, Media, ResourceBody};
use plugin_sdk::prompts::{Argument, Filled, Message, Prompt, Role};
use plugin_sdk::resource_list::{self, Contents as ListedContents, Resource};
use plugin_sdk::resources::{Contents, ResourceTemplate};
use plugin_sdk::{
    Hints, Icon, McpTool, TaskSupport, ToolError, ToolOutput, log, notify, prompts, resources,
    text_output,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// No arguments (any are ignored).
type NoArgs = Map<String, Value>;

/// A 1x1 red PNG.
const RED_PIXEL: &[u8] = include_bytes!("../red.png");

/// A tenth of a second of silence: 8 kHz, mono, 8-bit PCM in a RIFF file.
fn silence_wav() -> Vec<u8> {
    let samples = vec![0x80u8; 800];
    let mut wav = Vec::with_capacity(44 + samples.len());
    wav.extend(b"RIFF");
    wav.extend((36 + samples.len() as u32).to_le_bytes());
    wav.extend(b"WAVEfmt ");
    wav.extend(16u32.to_le_bytes()); // fmt chunk size
    wav.extend(1u16.to_le_bytes()); // PCM
    wav.extend(1u16.to_le_bytes()); // mono
    wav.extend(8000u32.to_le_bytes()); // sample rate
    wav.extend(8000u32.to_le_bytes()); // bytes per second
    wav.extend(1u16.to_le_bytes()); // block align
    wav.extend(8u16.to_le_bytes()); // bits per sample
    wav.extend(b"data");
    wav.extend((samples.len() as u32).to_le_bytes());
    wav.extend(samples);
    wav
}

fn image() -> Block {
    Block::Image(Media {
        data: RED_PIXEL.to_vec(),
        mime_type: "image/png".into(),
    })
}

/// A tool output made only of the blocks added.
fn blocks(added: impl IntoIterator<Item = Block>) -> Result<ToolOutput, ToolError> {
    for block in added {
        content::add(&block)?;
    }
    Ok(text_output(""))
}

struct SimpleText;
impl McpTool for SimpleText {
    const NAME: &'static str = "test_simple_text";
    const DESCRIPTION: &'static str = "Returns a simple text.";
    const TITLE: Option<&'static str> = Some("Simple text");
    const ICONS: &'static [Icon] = &[Icon {
        src: "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAxIDEiPjxyZWN0IHdpZHRoPSIxIiBoZWlnaHQ9IjEiIGZpbGw9InJlZCIvPjwvc3ZnPg==",
        mime_type: "image/svg+xml",
        sizes: &["any"],
    }];
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok(text_output("This is a simple text response for testing."))
    }
}

struct ImageContent;
impl McpTool for ImageContent {
    const NAME: &'static str = "test_image_content";
    const DESCRIPTION: &'static str = "Returns a 1x1 red PNG.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        blocks([image()])
    }
}

struct AudioContent;
impl McpTool for AudioContent {
    const NAME: &'static str = "test_audio_content";
    const DESCRIPTION: &'static str = "Returns a tenth of a second of silence as WAV.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        blocks([Block::Audio(Media {
            data: silence_wav(),
            mime_type: "audio/wav".into(),
        })])
    }
}

struct EmbeddedResourceTool;
impl McpTool for EmbeddedResourceTool {
    const NAME: &'static str = "test_embedded_resource";
    const DESCRIPTION: &'static str = "Returns a text resource inline.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        blocks([Block::Embedded(EmbeddedResource {
            uri: "test://embedded-resource".into(),
            mime_type: Some("text/plain".into()),
            body: ResourceBody::Text("This is an embedded resource content.".into()),
        })])
    }
}

struct MultipleContentTypes;
impl McpTool for MultipleContentTypes {
    const NAME: &'static str = "test_multiple_content_types";
    const DESCRIPTION: &'static str = "Returns text, an image and a resource.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        blocks([
            image(),
            Block::Embedded(EmbeddedResource {
                uri: "test://mixed-content-resource".into(),
                mime_type: Some("application/json".into()),
                body: ResourceBody::Text(r#"{"test":"data","value":123}"#.into()),
            }),
        ])?;
        Ok(text_output("Multiple content types test:"))
    }
}

struct WithLogging;
impl McpTool for WithLogging {
    const NAME: &'static str = "test_tool_with_logging";
    const DESCRIPTION: &'static str = "Logs three records, 50 ms apart.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        log::log(log::Level::Info, "Tool execution started");
        std::thread::sleep(Duration::from_millis(50));
        log::log(log::Level::Info, "Tool processing data");
        std::thread::sleep(Duration::from_millis(50));
        log::log(log::Level::Info, "Tool execution completed");
        Ok(text_output("Logged three records."))
    }
}

struct WithProgress;
impl McpTool for WithProgress {
    const NAME: &'static str = "test_tool_with_progress";
    const DESCRIPTION: &'static str = "Reports progress 0, 50 and 100 of 100, 50 ms apart.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        for (i, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            notify::progress(done, Some(100.0), None);
        }
        Ok(text_output("Reported progress three times."))
    }
}

struct ErrorHandling;
impl McpTool for ErrorHandling {
    const NAME: &'static str = "test_error_handling";
    const DESCRIPTION: &'static str = "Always fails.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        Err(ToolError {
            code: "intentional".into(),
            message: "This tool intentionally returns an error for testing".into(),
            retryable: false,
            details: None,
        })
    }
}

/// Arguments whose schema uses JSON Schema 2020-12 as the suite gives it.
#[derive(Deserialize)]
#[allow(dead_code)] // read by the host's validation, not by the tool
#[serde(rename_all = "camelCase")]
struct Address2020 {
    name: Option<String>,
    address: Option<Value>,
    contact_method: Option<String>,
    phone: Option<String>,
    email: Option<String>,
}

impl JsonSchema for Address2020 {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Address2020".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // As the 2026-07-28 suite gives it (SEP-2106): an anchor, composition
        // and conditional keywords on top of the 2025 ones.
        schemars::json_schema!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {
                        "street": { "type": "string" },
                        "city": { "type": "string" }
                    }
                }
            },
            "properties": {
                "name": { "type": "string" },
                "address": { "$ref": "#/$defs/address" },
                "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                "phone": { "type": "string" },
                "email": { "type": "string" }
            },
            "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
            "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
            "then": { "required": ["phone"] },
            "else": { "required": ["email"] },
            "additionalProperties": false
        })
    }
}

struct JsonSchema2020;
impl McpTool for JsonSchema2020 {
    const NAME: &'static str = "json_schema_2020_12_tool";
    const DESCRIPTION: &'static str = "Tool with JSON Schema 2020-12 features";
    type Args = Address2020;
    fn call(args: Address2020) -> Result<ToolOutput, ToolError> {
        Ok(text_output(format!("name: {:?}", args.name)))
    }
}

/// A question the client could not or would not answer, as a tool error.
fn unanswered(e: client::AskError) -> ToolError {
    e.into()
}

#[derive(Deserialize, JsonSchema)]
struct PromptArg {
    /// The prompt to send to the LLM.
    prompt: String,
}

struct Sampling;
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
struct MessageArg {
    /// The message to show the user.
    message: String,
}

struct Elicitation;
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

struct ElicitationDefaults;
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

struct ElicitationEnums;
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
struct UrlArgs {
    /// The page the person should open.
    url: String,
}

/// Not the suite's: URL-mode elicitation, for the host's own tests.
struct ElicitationUrl;
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
fn form(message: &str, field: &str, kind: &str) -> client::Question {
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

fn question_sample(text: &str, max_tokens: u32) -> client::Question {
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
fn ask_all(questions: Vec<(&str, client::Question)>) -> Result<Vec<String>, ToolError> {
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
        struct $ty;
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
struct RoundCapabilities;
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
struct RoundMulti;
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
struct MissingCapability;
impl McpTool for MissingCapability {
    const NAME: &'static str = "test_missing_capability";
    const DESCRIPTION: &'static str = "Needs sampling.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        let answers = ask_all(vec![("needed", question_sample("Say yes", 5))])?;
        Ok(text_output(answers.join("")))
    }
}

/// For the stateless scenario: logs at info (sent only when asked for).
struct LoggingTool;
impl McpTool for LoggingTool {
    const NAME: &'static str = "test_logging_tool";
    const DESCRIPTION: &'static str = "Logs one record.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        log::log(log::Level::Info, "a record the client did not ask for");
        Ok(text_output("logged"))
    }
}

round_trip_tool!(
    StreamingElicitation,
    "test_streaming_elicitation",
    "Asks the person something (the question rides the call's own answer).",
    "Answered:",
    vec![("user_name", form("What is your name?", "name", "string"))]
);

/// Not the suite's: tells subscribers that `test://watched-resource`
/// changed and that the resource list changed, for the host's own tests.
struct TouchWatched;
impl McpTool for TouchWatched {
    const NAME: &'static str = "touch_watched_resource";
    const DESCRIPTION: &'static str =
        "Announces a change of test://watched-resource and of the resource list.";
    type Args = NoArgs;
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        notify::resource_updated("test://watched-resource")?;
        notify::resources_changed();
        Ok(text_output("announced"))
    }
}

/// The suite's listed resources: text, binary, and one to watch.
struct Listed;

fn listed(uri: &str, name: &str, mime_type: &str) -> Resource {
    Resource {
        uri: uri.into(),
        name: name.into(),
        title: None,
        description: Some(format!("The {name} of the conformance suite.")),
        mime_type: Some(mime_type.into()),
        size: None,
    }
}

impl resource_list::Guest for Listed {
    fn list() -> Vec<Resource> {
        vec![
            listed("test://static-text", "static text", "text/plain"),
            listed("test://static-binary", "static binary", "image/png"),
            listed("test://watched-resource", "watched resource", "text/plain"),
        ]
    }

    fn read(uri: String) -> Result<ListedContents, ToolError> {
        let (mime, body) = match uri.as_str() {
            "test://static-binary" => ("image/png", ResourceBody::Blob(RED_PIXEL.to_vec())),
            "test://watched-resource" => (
                "text/plain",
                ResourceBody::Text("Watched resource content.".into()),
            ),
            _ => {
                let read = <TestResources as resources::Guest>::read(uri)?;
                return Ok(ListedContents {
                    uri: read.uri,
                    mime_type: Some(read.mime_type),
                    body: ResourceBody::Text(read.text),
                });
            }
        };
        Ok(ListedContents {
            uri,
            mime_type: Some(mime.into()),
            body,
        })
    }
}

/// Completes `arg1` of `test_prompt_with_arguments` from a few words.
struct Completion;
impl completion::Guest for Completion {
    fn complete(
        reference: Reference,
        argument: String,
        value: String,
        _: Vec<(String, String)>,
    ) -> Vec<String> {
        let words = ["paris", "park", "party", "test", "testing"];
        match reference {
            Reference::Prompt(name)
                if name == "test_prompt_with_arguments" && argument == "arg1" =>
            {
                words
                    .iter()
                    .filter(|w| w.starts_with(&value))
                    .map(|w| w.to_string())
                    .collect()
            }
            _ => Vec::new(),
        }
    }
}

/// The suite's text resources: `test://static-text` and the template
/// `test://template/{id}/data`.
struct TestResources;
impl resources::Guest for TestResources {
    fn templates() -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            uri_template: "test://template/{id}/data".into(),
            name: "Template data".into(),
            description: "Data for one id.".into(),
            mime_type: "application/json".into(),
        }]
    }

    fn read(uri: String) -> Result<Contents, ToolError> {
        if uri == "test://static-text" {
            return Ok(Contents {
                uri,
                mime_type: "text/plain".into(),
                text: "This is the content of the static text resource.".into(),
            });
        }
        let id = uri
            .strip_prefix("test://template/")
            .and_then(|rest| rest.strip_suffix("/data"))
            .filter(|id| !id.is_empty() && !id.contains('/'))
            .ok_or_else(|| ToolError::new("not_found", format!("no resource {uri}")))?;
        let text = serde_json::json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
        Ok(Contents {
            uri,
            mime_type: "application/json".into(),
            text: text.to_string(),
        })
    }
}

/// The suite's prompts: plain, with arguments, with a resource, with an
/// image.
struct TestPrompts;

fn prompt(name: &str, description: &str, arguments: &[(&str, &str)]) -> Prompt {
    Prompt {
        name: name.into(),
        title: None,
        description: Some(description.into()),
        arguments: arguments
            .iter()
            .map(|(name, description)| Argument {
                name: (*name).into(),
                description: Some((*description).into()),
                required: true,
            })
            .collect(),
    }
}

fn user(content: Block) -> Message {
    Message {
        role: Role::User,
        content,
    }
}

impl prompts::Guest for TestPrompts {
    fn list() -> Vec<Prompt> {
        vec![
            prompt("test_simple_prompt", "A prompt without arguments.", &[]),
            prompt(
                "test_prompt_with_arguments",
                "A prompt with two arguments.",
                &[
                    ("arg1", "First test argument"),
                    ("arg2", "Second test argument"),
                ],
            ),
            prompt(
                "test_prompt_with_embedded_resource",
                "A prompt with a resource inline.",
                &[("resourceUri", "URI of the resource to embed")],
            ),
            prompt("test_prompt_with_image", "A prompt with an image.", &[]),
            prompt(
                "test_input_required_result_prompt",
                "A prompt that asks the person for its context first.",
                &[],
            ),
        ]
    }

    fn get(name: String, arguments: Vec<(String, String)>) -> Result<Filled, ToolError> {
        let arg = |key: &str| {
            arguments
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let text = |t: &str| Block::Text(t.into());
        let messages = match name.as_str() {
            "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
            "test_prompt_with_arguments" => vec![user(text(&format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            )))],
            "test_prompt_with_embedded_resource" => vec![
                user(Block::Embedded(EmbeddedResource {
                    uri: arg("resourceUri"),
                    mime_type: Some("text/plain".into()),
                    body: ResourceBody::Text("Embedded resource content for testing.".into()),
                })),
                user(text("Please process the embedded resource above.")),
            ],
            "test_prompt_with_image" => {
                vec![user(image()), user(text("Please analyze the image above."))]
            }
            "test_input_required_result_prompt" => {
                let context = ask_all(vec![(
                    "user_context",
                    form("What context should the prompt use?", "context", "string"),
                )])?;
                vec![user(text(&format!(
                    "Use this context: {}",
                    context.join("")
                )))]
            }
            _ => return Err(ToolError::new("not_found", format!("no prompt {name}"))),
        };
        Ok(Filled {
            description: None,
            messages,
        })
    }
}

/// A parameter that clients also send as an HTTP header (SEP-2243:
/// `x-mcp-header`, checked against the body by the transport).
struct HeaderParam;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RegionArgs {
    /// The region, also sent as `Mcp-Param-Region`.
    #[schemars(extend("x-mcp-header" = "Region"))]
    region: String,
}

impl McpTool for HeaderParam {
    const NAME: &'static str = "test_header_param";
    const DESCRIPTION: &'static str =
        "Echoes `region`, which clients send as the Mcp-Param-Region header too.";
    type Args = RegionArgs;
    fn call(args: RegionArgs) -> Result<ToolOutput, ToolError> {
        Ok(text_output(format!("region: {}", args.region)))
    }
}

/// How many times [`TriggerToolChange`] changed the tool list, kept in the
/// plugin's cache (a plugin instance lives for one call).
fn tool_changes() -> Option<std::path::PathBuf> {
    std::env::var("MCP_PLUGIN_CACHE")
        .ok()
        .map(|cache| std::path::Path::new(&cache).join("tool-changes"))
}

/// Changes the tool list: its own description counts the changes, and the
/// host, told, lists the tools again and tells the clients.
struct TriggerToolChange;
impl McpTool for TriggerToolChange {
    const NAME: &'static str = "test_trigger_tool_change";
    const DESCRIPTION: &'static str = "Changes the tool list.";
    type Args = NoArgs;
    fn when_listed(tool: &mut plugin_sdk::Tool) {
        let changes = tool_changes().and_then(|f| std::fs::read_to_string(f).ok());
        if let Some(n) = changes {
            tool.description = format!("Changes the tool list (changed {} times).", n.trim());
        }
    }
    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        let file = tool_changes()
            .ok_or_else(|| ToolError::new("internal", "MCP_PLUGIN_CACHE is not set"))?;
        let n: u64 = std::fs::read_to_string(&file)
            .ok()
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        std::fs::write(&file, (n + 1).to_string()).map_err(|e| {
            ToolError::new(
                "denied",
                format!("cannot count the change: {e} (grant fs.write of ${{plugin_cache}})"),
            )
        })?;
        notify::tools_changed();
        Ok(text_output(format!("tool list changed ({} times)", n + 1)))
    }
}

// --- The tasks extension's fixtures (2026-07-28 suite, tasks-* scenarios).

#[derive(Deserialize, JsonSchema)]
struct NameArg {
    /// Who to greet.
    name: String,
}

struct Greet;
impl McpTool for Greet {
    const NAME: &'static str = "greet";
    const DESCRIPTION: &'static str = "Greets at once (never a task).";
    type Args = NameArg;
    fn call(args: NameArg) -> Result<ToolOutput, ToolError> {
        Ok(text_output(format!("Hello, {}!", args.name)))
    }
}

#[derive(Deserialize, JsonSchema)]
struct ComputeArgs {
    /// How long to work.
    seconds: u32,
    /// A name for the result.
    #[serde(default)]
    label: Option<String>,
}

struct SlowCompute;
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
struct FileArg {
    /// The file to delete.
    filename: String,
}

struct ConfirmDelete;
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

struct MultiInput;
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

struct FailingJob;
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

struct ProtocolErrorJob;
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

struct ToolWithTask;
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

plugin_sdk::export! {
    tools: [
        HeaderParam,
        SimpleText, ImageContent, AudioContent, EmbeddedResourceTool, MultipleContentTypes,
        WithLogging, WithProgress, ErrorHandling, JsonSchema2020, Sampling, Elicitation,
        ElicitationDefaults, ElicitationEnums, ElicitationUrl, TouchWatched, RoundElicitation,
        RoundSampling, RoundRoots, RoundState, RoundTampered, RoundMultiple, RoundCapabilities,
        RoundMulti, LoggingTool, StreamingElicitation, MissingCapability, Greet, SlowCompute,
        ConfirmDelete, MultiInput, FailingJob, ProtocolErrorJob, ToolWithTask, TriggerToolChange,
    ],
    resources: TestResources,
    resource_list: Listed,
    prompts: TestPrompts,
    completion: Completion,
}
