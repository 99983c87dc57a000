//! What a component says of itself, read from its bytes without compiling
//! it: custom sections (in the component or a module inside it) that the
//! SDK's `export!` writes. Hostile input like the rest of the file: each
//! section is bounded and checked.

use anyhow::{Context, Result, anyhow};
use serde::Deserialize;

use crate::bindings::Tool;

/// What a component says of itself, in custom sections (in the component
/// or a module inside it) that the SDK's `export!` writes.
#[derive(Default)]
pub struct Declared {
    /// `mcphost:plugin-name`: its name, which keys its policy.
    pub name: Option<String>,
    /// `mcphost:plugin-instructions`: how an agent should use its tools,
    /// served in the MCP `instructions`.
    pub instructions: Option<String>,
    /// `mcphost:plugin-tools`: its tools as built (the plugin's
    /// `tools.json`), so they can be listed before it is compiled. The
    /// plugin's own answer, once it runs, is what is served after.
    pub tools: Option<Vec<Tool>>,
    /// `mcphost:plugin-views`: its views ([`crate::views`]), and why any
    /// was left out.
    pub views: Vec<crate::views::View>,
    pub broken_views: Vec<String>,
}

const NAME_SECTION: &str = "mcphost:plugin-name";
const INSTRUCTIONS_SECTION: &str = "mcphost:plugin-instructions";
const TOOLS_SECTION: &str = "mcphost:plugin-tools";
/// Far above any plugin's (cofer's 23 tools: 37 KB).
const MAX_TOOLS_BYTES: usize = 4 << 20;
/// More would crowd every client's context.
const MAX_INSTRUCTIONS_BYTES: usize = 8 * 1024;

pub fn declared(bytes: &[u8]) -> Result<Declared> {
    let mut declared = Declared::default();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let wasmparser::Payload::CustomSection(section) =
            payload.context("not a WebAssembly component")?
        else {
            continue;
        };
        let text = std::str::from_utf8(section.data()).ok();
        match section.name() {
            NAME_SECTION => {
                let name = text.filter(|n| valid_name(n)).ok_or_else(|| {
                    anyhow!(
                        "the component declares an unusable plugin name in `{NAME_SECTION}` ({:?}): \
                         use 1-64 of a-z, 0-9, `_` and `-`",
                        String::from_utf8_lossy(section.data())
                    )
                })?;
                declared.name = Some(name.to_string());
            }
            INSTRUCTIONS_SECTION => {
                let text = text
                    .filter(|t| t.len() <= MAX_INSTRUCTIONS_BYTES)
                    .ok_or_else(|| {
                        anyhow!(
                            "the instructions in `{INSTRUCTIONS_SECTION}` are not UTF-8 text of at most {MAX_INSTRUCTIONS_BYTES} bytes"
                        )
                    })?;
                declared.instructions = Some(text.trim().to_string()).filter(|t| !t.is_empty());
            }
            TOOLS_SECTION => {
                let tools = (section.data().len() <= MAX_TOOLS_BYTES)
                    .then(|| serde_json::from_slice::<Vec<BuiltTool>>(section.data()).ok())
                    .flatten()
                    .ok_or_else(|| {
                        anyhow!(
                            "the tools in `{TOOLS_SECTION}` are not a JSON list of tools ({{name, description, \
                             inputSchema, outputSchema?}}) of at most {} MiB",
                            MAX_TOOLS_BYTES >> 20
                        )
                    })?;
                declared.tools = Some(tools.into_iter().map(BuiltTool::into_tool).collect());
            }
            crate::views::SECTION => {
                let (views, broken) = crate::views::parse_section(section.data());
                declared.views.extend(views);
                declared.broken_views.extend(broken);
            }
            _ => {}
        }
    }
    let total: usize = declared.views.iter().map(|v| v.html.len()).sum();
    if total > crate::views::MAX_VIEWS_BYTES {
        declared.broken_views.push(format!(
            "its views are {total} bytes together, above the {} a plugin may have: none is served",
            crate::views::MAX_VIEWS_BYTES
        ));
        declared.views.clear();
    }
    Ok(declared)
}

/// One tool of `mcphost:plugin-tools`, as a plugin's `tools.json` holds it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BuiltTool {
    name: String,
    description: String,
    input_schema: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    output_schema: Option<serde_json::Map<String, serde_json::Value>>,
}

impl BuiltTool {
    fn into_tool(self) -> Tool {
        Tool {
            name: self.name,
            description: self.description,
            input_schema: serde_json::Value::Object(self.input_schema).to_string(),
            output_schema: self
                .output_schema
                .map(|s| serde_json::Value::Object(s).to_string()),
        }
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}
