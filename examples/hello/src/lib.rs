//! The smallest useful plugin, to copy from: one typed tool, `hello`,
//! that greets someone and counts the characters of the greeting.
//!
//! Build and serve it (from the repository's root):
//!
//! ```sh
//! cargo test -p hello        # after changing a tool: rewrites tools.json
//! cargo build --release --target wasm32-wasip2 -p hello
//! mkdir -p /tmp/plugins && cp target/wasm32-wasip2/release/hello.wasm /tmp/plugins/
//! target/release/host call hello '{"name": "Ada"}' --plugins /tmp/plugins
//! ```
//!
//! It needs no capability, so the default policy (deny everything) serves
//! it as it is. The host keys its policy by the crate's name, `hello`.

use plugin_sdk::{Hints, McpTool, ToolError, ToolOutput, codes, schema_for, structured_output};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `hello` tool. Its name and description are written here once; its
/// input schema is derived from [`Args`].
pub struct Hello;

/// What `hello` takes. Doc comments become the schema's descriptions, and
/// `deny_unknown_fields` makes the host refuse keys it does not know.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Whom to greet.
    #[schemars(length(min = 1, max = 100))]
    pub name: String,
    /// Greet loudly (upper case).
    #[serde(default)]
    pub shout: bool,
}

/// What `hello` returns, as structured content (and its JSON as text).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Greeting {
    pub text: String,
    pub chars: usize,
}

impl McpTool for Hello {
    const NAME: &'static str = "hello";
    const DESCRIPTION: &'static str = "Greets someone by name and says how long the greeting is.";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = Args;

    fn output_schema() -> Option<serde_json::Value> {
        Some(schema_for::<Greeting>())
    }

    fn call(args: Args) -> Result<ToolOutput, ToolError> {
        Ok(structured_output(&greet(&args)?))
    }
}

/// The tool's logic, apart from the plugin plumbing so it is easy to test.
pub fn greet(args: &Args) -> Result<Greeting, ToolError> {
    if args.name.trim().is_empty() {
        return Err(ToolError::new(
            codes::INVALID_REQUEST,
            "`name` is blank: give a name to greet",
        ));
    }
    let text = format!("Hello, {}!", args.name.trim());
    let text = if args.shout {
        text.to_uppercase()
    } else {
        text
    };
    Ok(Greeting {
        chars: text.chars().count(),
        text,
    })
}

plugin_sdk::export! { tools: [Hello] }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets_and_counts() {
        let g = greet(&Args {
            name: " Ada ".into(),
            shout: true,
        })
        .unwrap();
        assert_eq!((g.text.as_str(), g.chars), ("HELLO, ADA!", 11));
        let blank = greet(&Args {
            name: "  ".into(),
            shout: false,
        })
        .unwrap_err();
        assert_eq!(blank.code, codes::INVALID_REQUEST);
    }
}
