//! A plugin's tools as served: each declaration's schemas checked and
//! compiled, annotations and icons taken out of the input schema (where
//! the WIT carries them), names exposed as the host is told.

use anyhow::{Context, Result, anyhow};
use serde_json::{Map, Value};

use crate::schema::ArgsSchema;

/// One tool as declared by its plugin, with its compiled schemas once its
/// plugin is loaded.
pub struct ToolDef {
    /// The name the plugin uses.
    pub name: String,
    /// The name clients see (dots become `_` with `--underscore-names`).
    pub exposed: String,
    pub description: String,
    pub input_schema: Map<String, Value>,
    pub output_schema: Option<Map<String, Value>>,
    /// The schemas compiled, for calls: none while the tool is only listed
    /// (its plugin still loading), which no call ever sees.
    pub checks: Option<Checks>,
    /// What the tool does to the world (read-only, destructive, ...).
    pub annotations: Option<rmcp::model::ToolAnnotations>,
    /// Pictures clients may show beside it (`x-icons`).
    pub icons: Option<Vec<rmcp::model::Icon>>,
    /// Whether a call may run as an MCP task (`x-task-support`).
    pub tasks: TaskSupport,
    /// The view its results are shown in (`x-view`: a name of its plugin's
    /// views, made its `ui://` URI once the plugin's views are known).
    pub view: Option<String>,
}

/// Whether a tool's calls may run as MCP tasks (the tasks extension of MCP
/// 2026-07-28), as its plugin declares with `x-task-support`: a tool that
/// can run for minutes says `optional`, so a client that takes tasks polls
/// for it instead of holding a request open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// Always answered in the call (the default).
    #[default]
    Never,
    /// A task when the call outlasts a short grace and the client takes tasks.
    Optional,
    /// Always a task; a client that does not take tasks cannot call it.
    Required,
}

impl TaskSupport {
    fn declared(value: Option<Value>) -> Result<TaskSupport> {
        match value.as_ref().map(|v| v.as_str()) {
            None | Some(Some("forbidden")) => Ok(TaskSupport::Never),
            Some(Some("optional")) => Ok(TaskSupport::Optional),
            Some(Some("required")) => Ok(TaskSupport::Required),
            _ => Err(anyhow!(
                "x-task-support is {}: it must be \"forbidden\", \"optional\" or \"required\"",
                value.unwrap_or_default()
            )),
        }
    }
}

impl ToolDef {
    /// The compiled schemas of a loaded plugin's tool (the only tools a
    /// call reaches: [`super::Catalog::tool`]).
    pub fn checks(&self) -> &Checks {
        self.checks
            .as_ref()
            .expect("a loaded plugin's tools have their schemas compiled")
    }
}

/// A tool's schemas, compiled.
pub struct Checks {
    pub input: ArgsSchema,
    /// Structured results must match the output schema: TypeScript
    /// clients reject a call whose `structuredContent` does not, even an
    /// error.
    pub output: Option<jsonschema::Validator>,
}

/// How far [`tool_defs`] goes with the schemas.
#[derive(Clone, Copy, PartialEq)]
pub enum Schemas {
    /// Compiled, for calls (and a bad one refuses the plugin).
    Compiled,
    /// Only listed: nothing calls the tools yet.
    Listed,
}

/// The tools a plugin declares, as served: schemas checked and compiled,
/// annotations and icons taken out of the input schema, names exposed.
pub fn tool_defs(
    tools: Vec<crate::bindings::Tool>,
    underscore_names: bool,
    schemas: Schemas,
) -> Result<Vec<ToolDef>> {
    let mut defs = Vec::with_capacity(tools.len());
    for tool in tools {
        let mut input_schema = schema_object(&tool.input_schema)
            .with_context(|| format!("tool `{}`: input schema", tool.name))?;
        // Annotations ride in the input schema until the WIT has a field.
        let annotations = match input_schema.remove("x-annotations") {
            Some(value) => Some(serde_json::from_value(value).with_context(|| {
                format!(
                    "tool `{}`: x-annotations are not MCP tool annotations",
                    tool.name
                )
            })?),
            None => None,
        };
        let icons = match input_schema.remove("x-icons") {
            Some(value) => {
                Some(tool_icons(value).with_context(|| format!("tool `{}`: x-icons", tool.name))?)
            }
            None => None,
        };
        let tasks = TaskSupport::declared(input_schema.remove("x-task-support"))
            .with_context(|| format!("tool `{}`", tool.name))?;
        let view = match input_schema.remove("x-view") {
            None => None,
            Some(Value::String(name)) => Some(name),
            Some(other) => {
                anyhow::bail!("tool `{}`: x-view is {other}, not a view's name", tool.name)
            }
        };
        let output_schema = match &tool.output_schema {
            Some(s) => Some(
                schema_object(s).with_context(|| format!("tool `{}`: output schema", tool.name))?,
            ),
            None => None,
        };
        crate::schema::for_clients(&mut input_schema);
        let checks = match schemas {
            Schemas::Compiled => Some(compile(&tool.name, &input_schema, &output_schema)?),
            Schemas::Listed => None,
        };
        let exposed = if underscore_names {
            tool.name.replace('.', "_")
        } else {
            tool.name.clone()
        };
        defs.push(ToolDef {
            name: tool.name,
            exposed,
            description: tool.description,
            input_schema,
            output_schema,
            checks,
            annotations,
            icons,
            tasks,
            view,
        });
    }
    // Descriptions name tools too ("then call godot.get_class"): as served.
    let renames: Vec<(String, String)> = defs
        .iter()
        .filter(|t| t.name != t.exposed)
        .map(|t| (t.name.clone(), t.exposed.clone()))
        .collect();
    for tool in &mut defs {
        for (from, to) in &renames {
            tool.description = tool.description.replace(from, to);
        }
    }
    Ok(defs)
}

fn compile(
    tool: &str,
    input: &Map<String, Value>,
    output: &Option<Map<String, Value>>,
) -> Result<Checks> {
    let output = match output {
        Some(schema) => Some(
            jsonschema::validator_for(&Value::Object(schema.clone())).map_err(|e| {
                anyhow!("tool `{tool}`: output schema is not a valid JSON Schema: {e}")
            })?,
        ),
        None => None,
    };
    let input = ArgsSchema::compile(&Value::Object(input.clone()))
        .map_err(|e| anyhow!("tool `{tool}`: input schema is not a valid JSON Schema: {e}"))?;
    Ok(Checks { input, output })
}

/// A tool's icons, each an `https:` URL or a `data:image/` URI: a client
/// fetches or renders them, so nothing that reaches into the machine
/// (`file:`) or runs (`javascript:`).
fn tool_icons(value: Value) -> Result<Vec<rmcp::model::Icon>> {
    let icons: Vec<rmcp::model::Icon> = serde_json::from_value(value)
        .context("not a list of MCP icons ({src, mimeType, sizes})")?;
    for icon in &icons {
        crate::caps::content::icon_src(&icon.src).map_err(|e| anyhow!(e))?;
    }
    Ok(icons)
}

fn schema_object(text: &str) -> Result<Map<String, Value>> {
    match serde_json::from_str(text).context("not JSON")? {
        Value::Object(map) => Ok(map),
        _ => Err(anyhow!("a tool schema must be a JSON object")),
    }
}

#[cfg(test)]
mod tests {
    use super::tool_icons;
    use serde_json::json;

    #[test]
    fn icons_are_web_or_inline_images_only() {
        let icon = |src: &str| json!([{"src": src, "mimeType": "image/png"}]);
        assert!(tool_icons(icon("https://example.org/a.png")).is_ok());
        assert!(tool_icons(icon("data:image/png;base64,AAAA")).is_ok());
        for bad in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "http://example.org/a.png",
            "data:text/html,<b>",
        ] {
            assert!(tool_icons(icon(bad)).is_err(), "{bad}");
        }
        assert!(tool_icons(json!({"src": "https://x"})).is_err(), "a list");
    }
}
