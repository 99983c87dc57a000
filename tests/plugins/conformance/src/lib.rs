//! Test fixture: what the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios) asks a server
//! for, built only on the plugin WIT, so the suite tests the host's MCP
//! surface as a plugin reaches it. Names and texts are the suite's.
//! `scripts/conformance-check` serves it over HTTP and runs the suite.

use std::time::Duration;

use plugin_sdk::content::{self, Block, EmbeddedResource, Media, ResourceBody};
use plugin_sdk::{Icon, McpTool, ToolError, ToolOutput, log, notify, text_output};
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

mod asking;
mod catalog;
mod tasks;

use asking::*;
use catalog::{Completion, Listed, TestPrompts, TestResources};
use tasks::{
    ConfirmDelete, FailingJob, Greet, MultiInput, ProtocolErrorJob, SlowCompute, ToolWithTask,
};

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
