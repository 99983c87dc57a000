//! Guest-side bindings for the `mcphost:plugin` world and the few helpers
//! every plugin needs. Plugins depend on this crate instead of generating
//! bindings themselves, so the WIT is bound in exactly one place:
//!
//! ```ignore
//! struct MyPlugin;
//! impl plugin_sdk::Guest for MyPlugin { /* list + call */ }
//! plugin_sdk::export!(MyPlugin);
//! ```
//!
//! A plugin that also serves resources or has background work implements
//! [`resources::Guest`] / [`lifecycle::Guest`] and names them:
//! `plugin_sdk::export!(MyPlugin, resources, lifecycle)`. Otherwise the
//! macro exports empty ones (no templates, nothing to refresh).

pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "full-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_world",
        default_bindings_module: "plugin_sdk::bindings",
    });
}

pub use bindings::exports::mcphost::plugin::tools::Guest;
pub use bindings::exports::mcphost::plugin::{lifecycle, resources};
pub use bindings::mcphost::plugin::types::{CapabilityError, Tool, ToolError, ToolOutput};
pub use bindings::mcphost::plugin::{containers, git, index, log, notify, process, pty};

/// Export a type implementing [`Guest`] as this component's `tools`, and
/// optionally its own `resources` and `lifecycle` (see the crate docs).
/// Only on wasm: a native build (for the plugin's unit tests) exports
/// nothing, since component symbol names are not valid native ones.
#[macro_export]
macro_rules! export {
    ($ty:ident) => {
        $crate::__no_resources!($ty);
        $crate::__no_lifecycle!($ty);
        $crate::__export_all!($ty);
    };
    ($ty:ident, resources) => {
        $crate::__no_lifecycle!($ty);
        $crate::__export_all!($ty);
    };
    ($ty:ident, lifecycle) => {
        $crate::__no_resources!($ty);
        $crate::__export_all!($ty);
    };
    ($ty:ident, resources, lifecycle) => {
        $crate::__export_all!($ty);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_all {
    ($ty:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::bindings::__export_world!($ty with_types_in $crate::bindings);
        // Natively, keep the entry points reachable so nothing reads as dead.
        #[cfg(not(target_arch = "wasm32"))]
        const _: (fn() -> Vec<$crate::Tool>, fn(String, String) -> Result<$crate::ToolOutput, $crate::ToolError>) =
            (<$ty as $crate::Guest>::list, <$ty as $crate::Guest>::call);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __no_resources {
    ($ty:ident) => {
        impl $crate::resources::Guest for $ty {
            fn templates() -> Vec<$crate::resources::ResourceTemplate> {
                Vec::new()
            }
            fn read(uri: String) -> Result<$crate::resources::Contents, $crate::ToolError> {
                Err($crate::ToolError::new(
                    "not_found",
                    format!("this plugin serves no resources (asked for {uri})"),
                ))
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __no_lifecycle {
    ($ty:ident) => {
        impl $crate::lifecycle::Guest for $ty {
            fn refresh(_changed: Vec<String>) -> Result<Vec<String>, $crate::ToolError> {
                Ok(Vec::new())
            }
        }
    };
}

/// Declare a tool from JSON Schema values.
pub fn tool(
    name: &str,
    description: &str,
    input_schema: serde_json::Value,
    output_schema: Option<serde_json::Value>,
) -> Tool {
    Tool {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: input_schema.to_string(),
        output_schema: output_schema.map(|s| s.to_string()),
    }
}

/// What a tool does to the world, for clients that decide what to run
/// without asking (MCP tool annotations: Codex and Copilot run read-only
/// tools unasked). Until the WIT has a field for them they travel in the
/// input schema under `x-annotations`; the host moves them to the tool.
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

impl Tool {
    /// The tool with `hints` declared.
    pub fn with_hints(mut self, hints: Hints) -> Tool {
        let mut schema: serde_json::Value =
            serde_json::from_str(&self.input_schema).expect("the tool's own schema is JSON");
        schema["x-annotations"] = serde_json::json!({
            "readOnlyHint": hints.read_only,
            "destructiveHint": hints.destructive,
            "idempotentHint": hints.idempotent,
            "openWorldHint": hints.open_world,
        });
        self.input_schema = schema.to_string();
        self
    }
}

impl ToolError {
    /// A tool error the model sees, not retryable, without details.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        ToolError {
            code: code.to_string(),
            message: message.into(),
            retryable: false,
            details: None,
        }
    }

    /// Attach extra structured fields (merged into the error object).
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details.to_string());
        self
    }
}

/// A refused capability call becomes a tool error the model can act on:
/// `denied` carries the config key that would grant it.
impl From<CapabilityError> for ToolError {
    fn from(e: CapabilityError) -> Self {
        match e {
            CapabilityError::Denied(why) => ToolError::new("denied", why),
            CapabilityError::Invalid(why) => ToolError::new("invalid_request", why),
            CapabilityError::NotFound(why) => ToolError::new("not_found", why),
        }
    }
}

/// A successful result whose text is the pretty JSON of `value` and whose
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

/// How a program ended, for a person: `exit code 1`, or `killed by a
/// signal` when it has no exit code (never `Some(1)`).
pub fn exit_text(exit_code: Option<i32>) -> String {
    match exit_code {
        Some(code) => format!("exit code {code}"),
        None => "killed by a signal".to_string(),
    }
}

/// Parse validated call arguments into the tool's argument type. The host
/// already checked them against the input schema, so a failure here means
/// the schema and the type disagree.
pub fn parse_args<T: serde::de::DeserializeOwned>(arguments: &str) -> Result<T, ToolError> {
    serde_json::from_str(arguments).map_err(|e| {
        ToolError::new(
            "invalid_arguments",
            format!("arguments do not fit the tool: {e}"),
        )
    })
}

impl process::RunResult {
    /// What the tail holds of stdout and of stderr, each in order.
    pub fn streams(&self) -> (String, String) {
        let (mut out, mut err) = (String::new(), String::new());
        for chunk in &self.tail {
            match chunk.stream {
                process::Stream::Stdout => out.push_str(&chunk.text),
                process::Stream::Stderr => err.push_str(&chunk.text),
            }
        }
        (out, err)
    }
}

/// The directory the host serves (`MCP_WORKSPACE`; relative paths in
/// requests point there); `.` outside a host (a plugin's unit tests).
pub fn workspace() -> String {
    std::env::var("MCP_WORKSPACE").unwrap_or_else(|_| ".".into())
}

/// A directory of this plugin's own that the host keeps between runs
/// (`MCP_PLUGIN_CACHE`; usable when the policy grants `fs` on
/// `${plugin_cache}`); none outside a host.
pub fn cache_dir() -> Option<String> {
    std::env::var("MCP_PLUGIN_CACHE").ok()
}

/// Seconds since the Unix epoch, from the host's wall clock.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// UTC calendar time of `secs` since the epoch:
/// `[year, month, day, hour, minute, second]`.
pub fn utc(secs: u64) -> [i64; 6] {
    let days = (secs / 86_400) as i64;
    let rem = (secs % 86_400) as i64;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    [year, month, day, rem / 3_600, rem % 3_600 / 60, rem % 60]
}

/// `secs` since the epoch as ISO 8601 UTC, e.g. `2026-01-12T12:34:56Z`.
pub fn iso8601(secs: u64) -> String {
    let [year, month, day, hour, minute, second] = utc(secs);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
}
