//! `host new NAME`: a plugin to start from, made of the repository's own
//! examples (which CI builds and serves) under a new name. In Rust
//! (`examples/hello`): a crate that builds as it is with `cargo build
//! --release --target wasm32-wasip2` and with `cargo component build
//! --release`. In Python (`examples/hello-py`, componentize-py) and
//! JavaScript (`examples/hello-js`, componentize-js): the app, the host's
//! WIT beside it, and the one command that builds it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

const LIB_RS: &str = include_str!("../../examples/hello/src/lib.rs");
const TOOLS_JSON: &str = include_str!("../../examples/hello/tools.json");
const APP_PY: &str = include_str!("../../examples/hello-py/app.py");
const MCP_PLUGIN_PY: &str = include_str!("../../examples/hello-py/mcp_plugin.py");
const APP_JS: &str = include_str!("../../examples/hello-js/app.js");
const WIT: &str = include_str!("../../wit/plugin.wit");
/// The view `host new --view` adds (see the book's Views).
const VIEW_HTML: &str = include_str!("scaffold_view.html");

/// The language a plugin is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

impl Lang {
    /// How the plugin made in `dir` becomes `<plugin>.wasm`.
    pub fn build_command(self, plugin: &str) -> String {
        match self {
            Lang::Rust => "cargo test, then cargo build --release --target wasm32-wasip2 (or cargo component build --release)".into(),
            Lang::Python => format!("componentize-py -d wit -w plugin componentize app -o {plugin}.wasm"),
            Lang::Js => format!("componentize-js app.js --wit wit --world-name plugin -d http fetch-event -o {plugin}.wasm"),
        }
    }
}
/// The SDK beside this host's sources, when they are still where it was
/// built (a checkout): a path dependency; else the git one.
const SDK_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../plugins/sdk");

/// The plugin a crate `name` builds: cargo writes `hello-bar` as
/// `hello_bar.wasm`, and the file's name is the plugin's (its policy key).
pub fn plugin_name(crate_name: &str) -> String {
    crate_name.replace('-', "_")
}

/// Make the plugin `name` in `parent/name`, in `lang`; the directory made.
pub fn new_plugin(name: &str, parent: &Path, lang: Lang, view: bool) -> Result<PathBuf> {
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !valid || name.len() > 64 {
        bail!(
            "`{name}` cannot name a plugin: use lower-case letters, digits, `_` and `-`, starting \
             with a letter (it is the crate's name and the tool's; the policy key is the name with \
             `_` for `-`)"
        );
    }
    let dir = parent.join(name);
    if dir.exists() {
        bail!(
            "{} exists already: choose another name or --dir",
            dir.display()
        );
    }
    let write = |path: &str, text: &str| -> Result<()> {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a file in the plugin"))?;
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    let plugin = plugin_name(name);
    if view && lang != Lang::Rust {
        bail!(
            "--view makes a Rust crate's view; a Python or JavaScript plugin gets one after its build \
             with `host view add {plugin}.wasm NAME PAGE.html` (see the book's Views)"
        );
    }
    match lang {
        Lang::Rust => {}
        Lang::Python => {
            write("app.py", &renamed(APP_PY, name, &plugin, "name=\"hello\""))?;
            write("mcp_plugin.py", MCP_PLUGIN_PY)?;
            write("wit/plugin.wit", WIT)?;
            write(".gitignore", "*.wasm\n__pycache__/\n")?;
            return Ok(dir);
        }
        Lang::Js => {
            write("app.js", &renamed(APP_JS, name, &plugin, "name: \"hello\""))?;
            write("wit/plugin.wit", WIT)?;
            write(".gitignore", "*.wasm\n")?;
            return Ok(dir);
        }
    }
    let sdk = std::path::absolute(SDK_DIR)
        .ok()
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| crate::paths::normalize(&p));
    let sdk_dependency = match &sdk {
        Some(path) => format!("plugin-sdk = {{ path = {:?} }}", path.display().to_string()),
        None => "plugin-sdk = { git = \"https://github.com/<owner>/mcp-wasm-host\", package = \"plugin-sdk\" }"
            .to_string(),
    };
    let cargo_toml = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

# A component is a cdylib; rlib lets `cargo test` run the unit tests natively.
[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
# The SDK of the host that made this crate. Away from that checkout, depend
# on it by git instead:
# plugin-sdk = {{ git = "https://github.com/<owner>/mcp-wasm-host", package = "plugin-sdk" }}
{sdk_dependency}
schemars = {{ version = "1.2", default-features = false, features = ["derive", "std"] }}
serde = {{ version = "1", features = ["derive"] }}
serde_json = "1"

# For `cargo component build`.
[package.metadata.component]
package = "mcphost:{name}"

# Smaller components compile faster when the host loads them.
[profile.release]
opt-level = "s"
strip = true

# A crate of its own, not a member of an enclosing workspace.
[workspace]
"#
    );
    let mut lib_rs = lib_rs(name);
    let mut tools_json =
        TOOLS_JSON.replace("\"name\": \"hello\"", &format!("\"name\": \"{name}\""));
    if view {
        // The tool shows its results in `greeting`: the constant, the
        // page, and the `x-view` its schema then carries.
        lib_rs = lib_rs
            .replacen(
                "    type Args = Args;",
                "    const VIEW: Option<&'static str> = Some(\"greeting\");\n    type Args = Args;",
                1,
            )
            .replacen(
                "plugin_sdk::export!",
                "plugin_sdk::view!(\"greeting\", \"Greeting\", \"views/greeting.html\");\n\nplugin_sdk::export!",
                1,
            );
        let mut tools: serde_json::Value = serde_json::from_str(&tools_json)?;
        tools[0]["inputSchema"]["x-view"] = "greeting".into();
        tools_json = serde_json::to_string_pretty(&tools)? + "\n";
        write(
            "views/greeting.html",
            &VIEW_HTML.replace("callTool(\"hello\"", &format!("callTool(\"{name}\"")),
        )?;
    }
    write("Cargo.toml", &cargo_toml)?;
    write("src/lib.rs", &lib_rs)?;
    write("tools.json", &tools_json)?;
    write(".gitignore", "/target\n")?;
    Ok(dir)
}

/// An example's source with its tool named `name` (`tool_name` is how the
/// example names it) and its file and policy key `plugin`.
fn renamed(example: &str, name: &str, plugin: &str, tool_name: &str) -> String {
    example
        .replacen(tool_name, &tool_name.replace("hello", name), 1)
        .replacen(
            "hello: the smallest plugin",
            &format!("{name}: a plugin made by `host new` from the smallest plugin"),
            1,
        )
        .replace("hello.wasm", &format!("{plugin}.wasm"))
        .replace("host call hello", &format!("host call {name}"))
        .replace("[plugins.hello]", &format!("[plugins.{plugin}]"))
}

/// The example's source under `name`, with a header for a crate of its own.
fn lib_rs(name: &str) -> String {
    let plugin = plugin_name(name);
    let body = LIB_RS
        .split_once("\nuse ")
        .map(|(_, rest)| format!("use {rest}"))
        .expect("the example has a module header, then its imports");
    let header = format!(
        "//! `{name}`: one typed tool, made by `host new` from the host's example.\n\
         //!\n\
         //! ```sh\n\
         //! cargo test                                      # after changing a tool: rewrites tools.json\n\
         //! cargo build --release --target wasm32-wasip2    # target/wasm32-wasip2/release/{plugin}.wasm\n\
         //! cargo component build --release                 # target/wasm32-wasip1/release/{plugin}.wasm\n\
         //! cp target/wasm32-wasip2/release/{plugin}.wasm ~/.local/share/mcp-host/plugins/\n\
         //! host call {name} '{{\"name\": \"Ada\"}}'\n\
         //! ```\n\
         //!\n\
         //! It needs no capability, so the default policy (deny everything)\n\
         //! serves it as it is; grants go under `[plugins.{plugin}]`.\n\n"
    );
    header
        + &body.replace(
            "const NAME: &'static str = \"hello\";",
            &format!("const NAME: &'static str = \"{name}\";"),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hyphenated_crate_name_is_taken_and_its_policy_key_said() {
        let parent = tempfile::tempdir().unwrap();
        let dir = new_plugin("hello-bar", parent.path(), Lang::Rust, false).unwrap();
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("[plugins.hello_bar]") && lib.contains("hello_bar.wasm"),
            "{lib}"
        );
        for bad in ["-x", "x-", "X", "1x", "a b"] {
            assert!(
                new_plugin(bad, parent.path(), Lang::Rust, false).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_crate_is_the_example_under_a_new_name() {
        let parent = tempfile::tempdir().unwrap();
        let dir = new_plugin("weather", parent.path(), Lang::Rust, false).unwrap();
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("const NAME: &'static str = \"weather\";"),
            "{lib}"
        );
        assert!(!lib.contains("-p hello"), "{lib}");
        let tools: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("tools.json")).unwrap())
                .unwrap();
        assert_eq!(tools[0]["name"], "weather");
        let manifest: toml::Table =
            toml::from_str(&std::fs::read_to_string(dir.join("Cargo.toml")).unwrap()).unwrap();
        assert_eq!(manifest["package"]["name"].as_str(), Some("weather"));
        let sdk = manifest["dependencies"]["plugin-sdk"]["path"]
            .as_str()
            .unwrap();
        assert!(Path::new(sdk).join("Cargo.toml").is_file(), "{sdk}");
        for bad in ["Weather", "1x", "a-", "", "x y"] {
            assert!(
                new_plugin(bad, parent.path(), Lang::Rust, false).is_err(),
                "{bad}"
            );
        }
        assert!(
            new_plugin("weather", parent.path(), Lang::Rust, false).is_err(),
            "exists"
        );
    }

    #[test]
    fn a_view_comes_with_its_page_constant_and_schema_link() {
        let parent = tempfile::tempdir().unwrap();
        let dir = new_plugin("weather", parent.path(), Lang::Rust, true).unwrap();
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("const VIEW: Option<&'static str> = Some(\"greeting\");"),
            "{lib}"
        );
        assert!(lib.contains("plugin_sdk::view!(\"greeting\""), "{lib}");
        let page = std::fs::read_to_string(dir.join("views/greeting.html")).unwrap();
        assert!(page.contains("callTool(\"weather\""), "{page}");
        let tools: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("tools.json")).unwrap())
                .unwrap();
        assert_eq!(tools[0]["inputSchema"]["x-view"], "greeting");
        assert!(new_plugin("py", parent.path(), Lang::Python, true).is_err());
    }

    #[test]
    fn python_and_javascript_plugins_are_the_examples_under_a_new_name() {
        let parent = tempfile::tempdir().unwrap();
        let py = new_plugin("weather-now", parent.path(), Lang::Python, false).unwrap();
        let app = std::fs::read_to_string(py.join("app.py")).unwrap();
        assert!(app.contains("name=\"weather-now\""), "{app}");
        assert!(
            app.contains("[plugins.weather_now]") && app.contains("-o weather_now.wasm"),
            "{app}"
        );
        assert!(py.join("mcp_plugin.py").is_file() && py.join("wit/plugin.wit").is_file());
        let js = new_plugin(
            "weather",
            parent.path().join("js").as_path(),
            Lang::Js,
            false,
        )
        .unwrap();
        let app = std::fs::read_to_string(js.join("app.js")).unwrap();
        assert!(
            app.contains("name: \"weather\"") && app.contains("-o weather.wasm"),
            "{app}"
        );
        assert_eq!(
            std::fs::read_to_string(js.join("wit/plugin.wit")).unwrap(),
            WIT
        );
    }
}
