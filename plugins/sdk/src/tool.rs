//! Typed tools: a tool is a Rust type. Its name and description are written
//! once, its input schema is derived from its argument type (schemars), and
//! [`export!`](crate::export) routes each call to it by that name.
//!
//! ```ignore
//! /// Say hello.
//! struct Hello;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct HelloArgs {
//!     /// Whom to greet.
//!     name: String,
//! }
//!
//! impl plugin_sdk::McpTool for Hello {
//!     const NAME: &'static str = "hello";
//!     const DESCRIPTION: &'static str = "Greets someone.";
//!     type Args = HelloArgs;
//!     fn call(args: HelloArgs) -> Result<plugin_sdk::ToolOutput, plugin_sdk::ToolError> {
//!         Ok(plugin_sdk::text_output(format!("Hello, {}!", args.name)))
//!     }
//! }
//! ```
//!
//! Our schema keywords (see the WIT's `tool.input-schema`) go on the
//! argument type: `#[schemars(extend("x-error-code" = "INVALID_ARGUMENT"))]`.
//!
//! The declarations are derived natively and kept beside the plugin's
//! `Cargo.toml` as `tools.json`, which the wasm build embeds: schema
//! generation is code every plugin would otherwise carry and the host
//! would compile at every cold start. `export!` adds a unit test that
//! compares the file with the types and rewrites it when they differ, so
//! `cargo test -p <plugin>` after changing a tool, then rebuild.

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::{Tool, ToolError, ToolOutput, codes};

/// One MCP tool of a plugin. See the module docs.
pub trait McpTool {
    /// The name clients call it by, e.g. `godot.search`.
    const NAME: &'static str;
    /// One paragraph for the model: what it does and what it returns.
    const DESCRIPTION: &'static str;
    /// What it does to the world (clients auto-approve read-only tools).
    /// Unset: no annotations, clients assume the worst.
    const HINTS: Option<Hints> = None;
    /// A name for people, shown by clients instead of [`Self::NAME`].
    const TITLE: Option<&'static str> = None;
    /// Pictures clients may show beside the tool.
    const ICONS: &'static [Icon] = &[];
    /// Whether a call may run as an MCP task, polled by the client instead
    /// of holding a request open: say [`TaskSupport::Optional`] for a tool
    /// that can run for minutes.
    const TASKS: TaskSupport = TaskSupport::Never;
    /// The view (one of the plugin's [`crate::view!`]s, by name) clients
    /// that show MCP Apps display its results in.
    const VIEW: Option<&'static str> = None;
    /// The arguments; their JSON Schema is the tool's input schema, and the
    /// host checks every call against it before the plugin runs.
    type Args: DeserializeOwned + JsonSchema;
    /// The JSON Schema of the structured result, if the tool returns one
    /// (see [`schema_for`]).
    fn output_schema() -> Option<Value> {
        None
    }
    /// Fill in what is only known when the host lists the tools (say, an
    /// enum read from a config file); `tools.json` holds what is known when
    /// the plugin is built.
    fn when_listed(_tool: &mut Tool) {}
    /// Run the tool.
    fn call(args: Self::Args) -> Result<ToolOutput, ToolError>;
}

/// Whether a tool's calls may run as MCP tasks (MCP 2026-07-28's tasks
/// extension). It travels in the input schema as `x-task-support`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Always answered in the call.
    Never,
    /// A task when the call outlasts a short grace and the client takes
    /// tasks; otherwise answered in the call.
    Optional,
    /// Always a task: clients that do not take tasks cannot call it.
    Required,
}

/// What a tool does to the world, for clients that decide what to run
/// without asking (MCP tool annotations: Codex and Copilot run read-only
/// tools unasked). They travel in the input schema under `x-annotations`;
/// the host moves them to the tool.
#[derive(Debug, Clone, Copy)]
pub struct Hints {
    /// It changes nothing.
    pub read_only: bool,
    /// It may delete or overwrite (meaningful when not read-only).
    pub destructive: bool,
    /// The same call twice does no more than once.
    pub idempotent: bool,
    /// It reaches beyond the machine (a model, the network).
    pub open_world: bool,
}

impl Hints {
    /// Looks things up, changes nothing, stays on the machine.
    pub const READ_ONLY: Hints = Hints {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
}

/// A picture of a tool: `src` is an `https:` URL or a `data:image/...` URI
/// (the host refuses others), `sizes` like `"48x48"` or `"any"`. Travels
/// in the input schema under `x-icons`; the host moves it to the tool.
#[derive(Debug, Clone, Copy)]
pub struct Icon {
    pub src: &'static str,
    pub mime_type: &'static str,
    pub sizes: &'static [&'static str],
}

/// The JSON Schema of `T` as the host and clients read it: every subschema
/// inline (some clients do not follow `$ref`), no `$schema` or `title`
/// (the tool has its own name and description).
pub fn schema_for<T: JsonSchema>() -> Value {
    // The type's own schema, without the generator's root pass (transforms,
    // `$defs`, meta-schema): that pass is code every plugin would carry.
    let mut generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut schema = T::json_schema(&mut generator).to_value();
    if let Some(root) = schema.as_object_mut() {
        root.remove("title");
        root.remove("description");
    }
    schema
}

/// The longest string an argument may be unless its field says otherwise
/// (`#[schemars(length(max = N))]`): an unbounded one let a 1 MB name pin
/// a core for a whole deadline.
pub const MAX_STRING_CHARS: u64 = 65_536;

/// Give every string in `schema` that has no `maxLength` (and is not an
/// enum or a constant) [`MAX_STRING_CHARS`].
fn bound_strings(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let is_string = match map.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
                _ => false,
            };
            let fixed = map.contains_key("enum") || map.contains_key("const");
            if is_string && !fixed && !map.contains_key("maxLength") {
                map.insert("maxLength".into(), json!(MAX_STRING_CHARS));
            }
            map.values_mut().for_each(bound_strings);
        }
        Value::Array(items) => items.iter_mut().for_each(bound_strings),
        _ => {}
    }
}

/// The WIT declaration of tool `T`.
pub fn declare<T: McpTool>() -> Tool {
    let mut input = schema_for::<T::Args>();
    bound_strings(&mut input);
    if let Some(h) = T::HINTS {
        input["x-annotations"] = json!({
            "readOnlyHint": h.read_only,
            "destructiveHint": h.destructive,
            "idempotentHint": h.idempotent,
            "openWorldHint": h.open_world,
        });
    }
    if let Some(title) = T::TITLE {
        input["x-annotations"]["title"] = json!(title);
    }
    match T::TASKS {
        TaskSupport::Never => {}
        TaskSupport::Optional => input["x-task-support"] = json!("optional"),
        TaskSupport::Required => input["x-task-support"] = json!("required"),
    }
    if let Some(view) = T::VIEW {
        input["x-view"] = json!(view);
    }
    if !T::ICONS.is_empty() {
        let icons: Vec<Value> = T::ICONS
            .iter()
            .map(|i| json!({"src": i.src, "mimeType": i.mime_type, "sizes": i.sizes}))
            .collect();
        input["x-icons"] = json!(icons);
    }
    Tool {
        name: T::NAME.to_string(),
        description: T::DESCRIPTION.to_string(),
        input_schema: input.to_string(),
        output_schema: T::output_schema().map(|s| s.to_string()),
    }
}

/// One entry of `tools.json`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Declared {
    name: String,
    description: String,
    input_schema: Value,
    #[serde(default)]
    output_schema: Option<Value>,
}

/// Tool `T`'s entry of `tools` as the host lists it (see
/// [`McpTool::when_listed`]).
pub fn listed<T: McpTool>(tools: &mut [Tool]) {
    if let Some(tool) = tools.iter_mut().find(|t| t.name == T::NAME) {
        T::when_listed(tool);
    }
}

/// The declarations in a `tools.json` (what the wasm build lists).
pub fn declared(tools_json: &str) -> Vec<Tool> {
    let tools: Vec<Declared> =
        serde_json::from_str(tools_json).expect("tools.json is written by the plugin's unit test");
    tools
        .into_iter()
        .map(|t| Tool {
            name: t.name,
            description: t.description,
            input_schema: t.input_schema.to_string(),
            output_schema: t.output_schema.map(|s| s.to_string()),
        })
        .collect()
}

/// `tools` as `tools.json` holds them.
#[cfg(not(target_arch = "wasm32"))]
fn tools_json(tools: &[Tool]) -> Value {
    let parse = |s: &str| serde_json::from_str::<Value>(s).expect("declared schemas are JSON");
    tools
        .iter()
        .map(|t| {
            let mut entry = json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": parse(&t.input_schema),
            });
            if let Some(output) = &t.output_schema {
                entry["outputSchema"] = parse(output);
            }
            entry
        })
        .collect()
}

/// The test `export!` adds: `<manifest_dir>/tools.json` must hold exactly
/// `tools` (the declarations derived from the tool types). When it does
/// not, it is rewritten and the test fails, so that a stale file never
/// passes unnoticed.
#[cfg(not(target_arch = "wasm32"))]
pub fn check_tools_json(manifest_dir: &str, tools: &[Tool]) {
    let path = std::path::Path::new(manifest_dir).join("tools.json");
    let expected = tools_json(tools);
    let found = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok());
    if found.as_ref() == Some(&expected) {
        return;
    }
    let text = serde_json::to_string_pretty(&expected).expect("JSON values serialise") + "\n";
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    panic!(
        "{} did not match the plugin's tool types and has been rewritten: \
         review it, commit it and rebuild the plugin (scripts/build-plugins)",
        path.display()
    );
}

/// Parse `arguments` into `T`'s argument type and run it. The host already
/// checked them against the derived schema; what serde still refuses
/// (a value the schema cannot express) is the caller's to change.
pub fn invoke<T: McpTool>(arguments: &str) -> Result<ToolOutput, ToolError> {
    let args = serde_json::from_str(arguments).map_err(|e| {
        ToolError::new(
            codes::INVALID_REQUEST,
            format!("arguments do not fit `{}`: {e}", T::NAME),
        )
    })?;
    T::call(args)
}

/// The answer for a name no tool of the plugin has (the host only routes
/// declared names, so this is a bug in the plugin's tool list).
pub fn unknown_tool(name: &str) -> ToolError {
    ToolError::new(
        codes::NOT_FOUND,
        format!("this plugin has no tool `{name}`"),
    )
}

/// A successful result whose text is the compact JSON of `value` and whose
/// structured content is `value` itself.
pub fn structured_output(value: &impl serde::Serialize) -> ToolOutput {
    let json = serde_json::to_value(value).expect("tool results serialise to JSON");
    ToolOutput {
        // Compact: clients hand both text and structure to the model, and
        // pretty-printing doubled the tokens.
        text: json.to_string(),
        structured: Some(json.to_string()),
    }
}

/// A successful result that is only text.
pub fn text_output(text: impl Into<String>) -> ToolOutput {
    ToolOutput {
        text: text.into(),
        structured: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[schemars(extend("x-error-code" = "INVALID_ARGUMENT"))]
    /// Not shown: the tool has its own description.
    struct Args {
        /// Words to look for.
        #[schemars(length(min = 1))]
        query: String,
        #[schemars(range(min = 1, max = 100))]
        limit: Option<u32>,
        #[allow(dead_code)] // only its schema is looked at
        nested: Option<Inner>,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    struct Inner {
        #[allow(dead_code)]
        depth: u8,
    }

    struct Search;
    impl McpTool for Search {
        const NAME: &'static str = "demo.search";
        const DESCRIPTION: &'static str = "Searches.";
        const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
        type Args = Args;
        fn call(args: Args) -> Result<ToolOutput, ToolError> {
            Ok(text_output(format!("{}:{:?}", args.query, args.limit)))
        }
    }

    #[test]
    fn the_schema_comes_from_the_type_and_the_name_from_the_tool() {
        let tool = declare::<Search>();
        assert_eq!(tool.name, "demo.search");
        let schema: Value = serde_json::from_str(&tool.input_schema).unwrap();
        assert_eq!(schema["required"], json!(["query"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["x-error-code"], "INVALID_ARGUMENT");
        assert_eq!(schema["x-annotations"]["readOnlyHint"], true);
        assert_eq!(schema["properties"]["query"]["minLength"], 1);
        assert_eq!(
            schema["properties"]["query"]["description"],
            "Words to look for."
        );
        assert_eq!(schema["properties"]["limit"]["maximum"], 100);
        for absent in ["$schema", "title", "description", "$defs"] {
            assert!(schema.get(absent).is_none(), "{absent} in {schema}");
        }
        assert!(!tool.input_schema.contains("$ref"), "{}", tool.input_schema);
    }

    #[test]
    fn tools_json_round_trips_and_a_stale_one_is_rewritten() {
        let dir = std::env::temp_dir().join(format!("sdk-tools-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tools = vec![declare::<Search>()];
        let manifest = dir.to_str().unwrap();
        let path = dir.join("tools.json");

        std::fs::write(&path, "[]").unwrap();
        let stale = std::panic::catch_unwind(|| check_tools_json(manifest, &tools));
        assert!(stale.is_err(), "a stale tools.json passed");
        // Rewritten: now it passes, and the wasm side reads back the same.
        check_tools_json(manifest, &tools);
        let read = declared(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].name, tools[0].name);
        assert_eq!(read[0].description, tools[0].description);
        let schema = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        assert_eq!(
            schema(&read[0].input_schema),
            schema(&tools[0].input_schema)
        );
        assert_eq!(read[0].output_schema, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn calls_are_parsed_into_the_argument_type() {
        let out = invoke::<Search>(r#"{"query":"node","limit":3}"#).unwrap();
        assert_eq!(out.text, "node:Some(3)");
        let err = invoke::<Search>(r#"{"limit":3}"#).unwrap_err();
        assert_eq!(err.code, codes::INVALID_REQUEST);
        assert!(
            err.message.contains("demo.search") && err.message.contains("query"),
            "{}",
            err.message
        );
    }
}
