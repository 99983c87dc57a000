//! Guest-side bindings for the `mcphost:plugin` WIT and what every plugin
//! needs around them. Plugins depend on this crate instead of generating
//! bindings themselves, so the WIT is bound in exactly one place.
//!
//! A plugin is a set of typed tools ([`McpTool`], see [`tool`]) named once
//! in [`export!`]:
//!
//! ```ignore
//! plugin_sdk::export! {
//!     tools: [Search, GetClass],
//!     // Optional, in any order: a type implementing `resources::Guest`
//!     // (MCP resource templates), `resource_list::Guest` (listed and
//!     // binary resources), `prompts::Guest` (MCP prompts),
//!     // `completion::Guest` (argument completion), `lifecycle::Guest`
//!     // (background refresh), and a `&str` constant of instructions for
//!     // agents.
//!     resources: Godot,
//!     lifecycle: Godot,
//!     instructions: RULES,
//! }
//! ```
//!
//! Only what is named is exported: a plugin without `lifecycle` has no
//! background work for the host to schedule.
//!
//! Inside a host a plugin sees [`workspace`] and [`cache_dir`]; capability
//! errors convert into [`ToolError`] with `?` ([`errors`]).

pub mod errors;
pub mod refused;
mod run;
pub mod text;
mod time;
pub mod tool;

/// The `plugin` world: every capability import and the `tools` export.
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "plugin",
        pub_export_macro: true,
        export_macro_name: "__export_tools",
        default_bindings_module: "plugin_sdk::bindings",
    });
}

/// The optional `resources` export, bound on its own so that a plugin
/// exports it only when it names it (the component's exports are the union
/// of the worlds whose export macros it invokes).
pub mod resources_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package mcphost:sdk; world resources { export mcphost:plugin/resources@0.1.0; }",
        world: "mcphost:sdk/resources",
        with: { "mcphost:plugin/types@0.1.0": crate::bindings::mcphost::plugin::types },
        pub_export_macro: true,
        export_macro_name: "__export_resources",
        default_bindings_module: "plugin_sdk::resources_bindings",
    });
}

/// The optional `prompts` export (see [`resources_bindings`]).
pub mod prompts_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package mcphost:sdk; world prompts { export mcphost:plugin/prompts@0.1.0; }",
        world: "mcphost:sdk/prompts",
        with: {
            "mcphost:plugin/types@0.1.0": crate::bindings::mcphost::plugin::types,
            "mcphost:plugin/content@0.1.0": crate::bindings::mcphost::plugin::content,
        },
        pub_export_macro: true,
        export_macro_name: "__export_prompts",
        default_bindings_module: "plugin_sdk::prompts_bindings",
    });
}

/// The optional `resource-list` export (see [`resources_bindings`]).
pub mod resource_list_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package mcphost:sdk; world resource-list { export mcphost:plugin/resource-list@0.1.0; }",
        world: "mcphost:sdk/resource-list",
        with: {
            "mcphost:plugin/types@0.1.0": crate::bindings::mcphost::plugin::types,
            "mcphost:plugin/content@0.1.0": crate::bindings::mcphost::plugin::content,
        },
        pub_export_macro: true,
        export_macro_name: "__export_resource_list",
        default_bindings_module: "plugin_sdk::resource_list_bindings",
    });
}

/// The optional `completion` export (see [`resources_bindings`]).
pub mod completion_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package mcphost:sdk; world completion { export mcphost:plugin/completion@0.1.0; }",
        world: "mcphost:sdk/completion",
        pub_export_macro: true,
        export_macro_name: "__export_completion",
        default_bindings_module: "plugin_sdk::completion_bindings",
    });
}

/// The optional `lifecycle` export (see [`resources_bindings`]).
pub mod lifecycle_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package mcphost:sdk; world lifecycle { export mcphost:plugin/lifecycle@0.1.0; }",
        world: "mcphost:sdk/lifecycle",
        with: { "mcphost:plugin/types@0.1.0": crate::bindings::mcphost::plugin::types },
        pub_export_macro: true,
        export_macro_name: "__export_lifecycle",
        default_bindings_module: "plugin_sdk::lifecycle_bindings",
    });
}

pub use bindings::mcphost::plugin::types::{CapabilityError, Tool, ToolError, ToolOutput};
pub use bindings::mcphost::plugin::{
    client, containers, content, git, index, log, notify, process, pty, vectors,
};
pub use completion_bindings::exports::mcphost::plugin::completion;
pub use errors::codes;
pub use lifecycle_bindings::exports::mcphost::plugin::lifecycle;
pub use prompts_bindings::exports::mcphost::plugin::prompts;
pub use resource_list_bindings::exports::mcphost::plugin::resource_list;
pub use resources_bindings::exports::mcphost::plugin::resources;
pub use time::{iso8601, now_secs, utc};
pub use tool::{Hints, Icon, McpTool, TaskSupport, schema_for, structured_output, text_output};

/// Ship a view (an MCP App: a page clients that show them display beside
/// a tool's results) in the component: `view!("results", "Test results",
/// "views/results.html")`, the file relative to the crate, one call per
/// view, at the crate's top level. A tool shows its results in it with
/// `const VIEW: Option<&'static str> = Some("results");`.
///
/// The file is the page after its head's start: the SDK puts in front of
/// it a document head ([`VIEW_HEAD`]: theme variables, basic styles, and
/// `McpView`, the view's side of the extension's postMessage JSON-RPC),
/// so a view's file holds its `<title>`, its styles, `</head>` and the
/// body with its script. The host refuses a page that names another
/// origin: everything is inline. See the book's Views chapter.
#[macro_export]
macro_rules! view {
    ($name:literal, $title:literal, $file:literal) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            // `<name>\t<title>\n<html>\0`: the linker joins every view's
            // entry in the one section the host reads.
            const PARTS: &[&str] = &[
                $name,
                "\t",
                $title,
                "\n",
                $crate::VIEW_HEAD,
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $file)),
                "\0",
            ];
            #[used]
            #[unsafe(link_section = "mcphost:plugin-views")]
            static VIEW: [u8; $crate::joined_len(PARTS)] = $crate::joined(PARTS);
        };
    };
}

/// What [`view!`] puts in front of every view: the document's start and
/// head, with `McpView`.
pub const VIEW_HEAD: &str = include_str!("../views/head.html");

/// The bytes of `parts` one after another (for [`view!`]).
#[doc(hidden)]
pub const fn joined_len(parts: &[&str]) -> usize {
    let mut total = 0;
    let mut i = 0;
    while i < parts.len() {
        total += parts[i].len();
        i += 1;
    }
    total
}

#[doc(hidden)]
pub const fn joined<const N: usize>(parts: &[&str]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut at = 0;
    let mut i = 0;
    while i < parts.len() {
        let bytes = parts[i].as_bytes();
        let mut j = 0;
        while j < bytes.len() {
            out[at] = bytes[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    out
}

/// Export a plugin: its typed tools and, optionally, the types serving its
/// resources, prompts, completions and background work, and instructions
/// for agents. Keys in any order, each once: `tools: [T, ...]`,
/// `resources: R`, `resource_list: L`, `prompts: P`, `completion: C`,
/// `lifecycle: B`, `instructions: TEXT` (a `&str` constant; see the crate
/// docs).
///
/// The component declares the crate's name (`CARGO_CRATE_NAME`) as its own
/// in the custom section `mcphost:plugin-name`: the host keys its policy by
/// that name, whatever the file is called. Instructions go in
/// `mcphost:plugin-instructions`; the host serves them in the MCP
/// `instructions` under the plugin's name (at most 8 KiB). The tools as
/// built (`tools.json`) go in `mcphost:plugin-tools`: the host lists them
/// while it compiles the component.
///
/// On a native build (the plugin's unit tests) nothing is exported, since
/// component symbol names are not valid native ones.
#[macro_export]
macro_rules! export {
    ($($key:ident : $value:tt),+ $(,)?) => {
        $crate::__export_keys!(@tools [] @resources [] @resource_list [] @prompts [] @completion [] @lifecycle [] @instructions [] $($key : $value,)+);
    };
}

/// Sorts `export!`'s keys into their slots, then emits the exports.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_keys {
    (@tools [] @resources $s_resources:tt @resource_list $s_resource_list:tt @prompts $s_prompts:tt @completion $s_completion:tt @lifecycle $s_lifecycle:tt @instructions $s_instructions:tt tools : [$($tool:ty),+ $(,)?], $($rest:tt)*) => {
        $crate::__export_keys!(@tools [$($tool),+] @resources $s_resources @resource_list $s_resource_list @prompts $s_prompts @completion $s_completion @lifecycle $s_lifecycle @instructions $s_instructions $($rest)*);
    };
    (@tools $s_tools:tt @resources [] @resource_list $s_resource_list:tt @prompts $s_prompts:tt @completion $s_completion:tt @lifecycle $s_lifecycle:tt @instructions $s_instructions:tt resources : $ty:ident, $($rest:tt)*) => {
        $crate::__export_keys!(@tools $s_tools @resources [$ty] @resource_list $s_resource_list @prompts $s_prompts @completion $s_completion @lifecycle $s_lifecycle @instructions $s_instructions $($rest)*);
    };
    (@tools $s_tools:tt @resources $s_resources:tt @resource_list [] @prompts $s_prompts:tt @completion $s_completion:tt @lifecycle $s_lifecycle:tt @instructions $s_instructions:tt resource_list : $ty:ident, $($rest:tt)*) => {
        $crate::__export_keys!(@tools $s_tools @resources $s_resources @resource_list [$ty] @prompts $s_prompts @completion $s_completion @lifecycle $s_lifecycle @instructions $s_instructions $($rest)*);
    };
    (@tools $s_tools:tt @resources $s_resources:tt @resource_list $s_resource_list:tt @prompts [] @completion $s_completion:tt @lifecycle $s_lifecycle:tt @instructions $s_instructions:tt prompts : $ty:ident, $($rest:tt)*) => {
        $crate::__export_keys!(@tools $s_tools @resources $s_resources @resource_list $s_resource_list @prompts [$ty] @completion $s_completion @lifecycle $s_lifecycle @instructions $s_instructions $($rest)*);
    };
    (@tools $s_tools:tt @resources $s_resources:tt @resource_list $s_resource_list:tt @prompts $s_prompts:tt @completion [] @lifecycle $s_lifecycle:tt @instructions $s_instructions:tt completion : $ty:ident, $($rest:tt)*) => {
        $crate::__export_keys!(@tools $s_tools @resources $s_resources @resource_list $s_resource_list @prompts $s_prompts @completion [$ty] @lifecycle $s_lifecycle @instructions $s_instructions $($rest)*);
    };
    (@tools $s_tools:tt @resources $s_resources:tt @resource_list $s_resource_list:tt @prompts $s_prompts:tt @completion $s_completion:tt @lifecycle [] @instructions $s_instructions:tt lifecycle : $ty:ident, $($rest:tt)*) => {
        $crate::__export_keys!(@tools $s_tools @resources $s_resources @resource_list $s_resource_list @prompts $s_prompts @completion $s_completion @lifecycle [$ty] @instructions $s_instructions $($rest)*);
    };
    (@tools $s_tools:tt @resources $s_resources:tt @resource_list $s_resource_list:tt @prompts $s_prompts:tt @completion $s_completion:tt @lifecycle $s_lifecycle:tt @instructions [] instructions : $text:tt, $($rest:tt)*) => {
        $crate::__export_keys!(@tools $s_tools @resources $s_resources @resource_list $s_resource_list @prompts $s_prompts @completion $s_completion @lifecycle $s_lifecycle @instructions [$text] $($rest)*);
    };
    (@tools [$($tool:ty),+] @resources [$($res:ident)?] @resource_list [$($listed:ident)?] @prompts [$($prompts:ident)?] @completion [$($completion:ident)?] @lifecycle [$($life:ident)?] @instructions [$($text:tt)?]) => {
        #[doc(hidden)]
        pub struct __PluginTools;

        impl $crate::bindings::exports::mcphost::plugin::tools::Guest for __PluginTools {
            fn list() -> Vec<$crate::Tool> {
                // Derived from the types natively; read from the file in
                // wasm (see the `tool` module).
                #[cfg(not(target_arch = "wasm32"))]
                let mut tools = vec![$($crate::tool::declare::<$tool>()),+];
                #[cfg(target_arch = "wasm32")]
                let mut tools = $crate::tool::declared(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tools.json")));
                $( $crate::tool::listed::<$tool>(&mut tools); )+
                tools
            }
            fn call(name: String, arguments: String) -> Result<$crate::ToolOutput, $crate::ToolError> {
                $(
                    if name == <$tool as $crate::McpTool>::NAME {
                        return $crate::tool::invoke::<$tool>(&arguments);
                    }
                )+
                Err($crate::tool::unknown_tool(&name))
            }
        }

        #[cfg(target_arch = "wasm32")]
        const _: () = {
            $crate::bindings::__export_tools!(__PluginTools with_types_in $crate::bindings);
            $( $crate::resources_bindings::__export_resources!($res with_types_in $crate::resources_bindings); )?
            $( $crate::resource_list_bindings::__export_resource_list!($listed with_types_in $crate::resource_list_bindings); )?
            $( $crate::prompts_bindings::__export_prompts!($prompts with_types_in $crate::prompts_bindings); )?
            $( $crate::completion_bindings::__export_completion!($completion with_types_in $crate::completion_bindings); )?
            $( $crate::lifecycle_bindings::__export_lifecycle!($life with_types_in $crate::lifecycle_bindings); )?

            #[used]
            #[unsafe(link_section = "mcphost:plugin-name")]
            static __MCPHOST_NAME: [u8; env!("CARGO_CRATE_NAME").len()] = $crate::text_bytes(env!("CARGO_CRATE_NAME"));

            // The tools as built, which the host lists before compiling
            // the component (it serves what `list` answers once it runs).
            const __MCPHOST_TOOLS_JSON: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tools.json"));
            #[used]
            #[unsafe(link_section = "mcphost:plugin-tools")]
            static __MCPHOST_TOOLS: [u8; __MCPHOST_TOOLS_JSON.len()] = $crate::text_bytes(__MCPHOST_TOOLS_JSON);

            $(
                const __MCPHOST_TEXT: &str = $text;
                #[used]
                #[unsafe(link_section = "mcphost:plugin-instructions")]
                static __MCPHOST_INSTRUCTIONS: [u8; __MCPHOST_TEXT.len()] = $crate::text_bytes(__MCPHOST_TEXT);
            )?
        };

        #[cfg(test)]
        #[test]
        fn tools_json_matches_the_tool_types() {
            $crate::tool::check_tools_json(
                env!("CARGO_MANIFEST_DIR"),
                &[$($crate::tool::declare::<$tool>()),+],
            );
        }

        // Natively, keep the entry points reachable so nothing reads as dead.
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = {
            use $crate::bindings::exports::mcphost::plugin::tools::Guest as _;
            let _ = (<__PluginTools>::list, <__PluginTools>::call);
            $( let _ = <$res as $crate::resources::Guest>::read; )?
            $( let _ = <$listed as $crate::resource_list::Guest>::read; )?
            $( let _ = <$prompts as $crate::prompts::Guest>::get; )?
            $( let _ = <$completion as $crate::completion::Guest>::complete; )?
            $( let _ = <$life as $crate::lifecycle::Guest>::refresh; )?
            $( let _: &str = $text; )?
        };
    };
    (@tools [] @resources $s_resources:tt @resource_list $s_resource_list:tt @prompts $s_prompts:tt @completion $s_completion:tt @lifecycle $s_lifecycle:tt @instructions $s_instructions:tt) => {
        compile_error!("export! needs `tools: [YourTool, ...]`");
    };
    (@tools $s_tools:tt @resources $s_resources:tt @resource_list $s_resource_list:tt @prompts $s_prompts:tt @completion $s_completion:tt @lifecycle $s_lifecycle:tt @instructions $s_instructions:tt $key:ident : $v:tt, $($rest:tt)*) => {
        compile_error!(concat!(
            "export!: `", stringify!($key),
            "` is unknown or given twice; the keys are tools, resources, resource_list, prompts, completion, lifecycle and instructions, each once"
        ));
    };
}

/// The bytes of `text` as an array, for the sections `export!` writes.
#[doc(hidden)]
pub const fn text_bytes<const N: usize>(text: &str) -> [u8; N] {
    joined(&[text])
}

/// An I/O error of the plugin's own (through WASI) for a person: its words
/// without ` (os error N)`, whose N is WASI's numbering, not the host
/// system's (WASI's 63 is EPERM, Linux's 63 is ENOSR), so it would send a
/// reader the wrong way.
pub fn io_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text,
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

/// Like [`exit_text`], naming the signal when the host reported one:
/// `exit code 2`, `killed by signal 9 (SIGKILL)`.
pub fn ended_text(exit_code: Option<i32>, signal: Option<i32>) -> String {
    match (exit_code, signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(number)) => match signal_name(number) {
            Some(name) => format!("killed by signal {number} ({name})"),
            None => format!("killed by signal {number}"),
        },
        (None, None) => exit_text(None),
    }
}

/// The usual name of a POSIX signal's number (Linux numbering, which the
/// host reports).
pub fn signal_name(number: i32) -> Option<&'static str> {
    Some(match number {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return None,
    })
}

/// The directory the host serves (`MCP_WORKSPACE`; relative paths in
/// requests point there); `.` outside a host (a plugin's unit tests).
pub fn workspace() -> String {
    std::env::var("MCP_WORKSPACE").unwrap_or_else(|_| ".".into())
}

/// How long the host lets this call run (`MCP_CALL_TIMEOUT_MS`, the
/// policy's `limits.timeout_ms`); none outside a host. Past it the host
/// stops the plugin, so work meant to end with an answer of its own (a
/// `timeout` the tool defines) must end sooner.
pub fn call_timeout_ms() -> Option<u64> {
    std::env::var("MCP_CALL_TIMEOUT_MS").ok()?.parse().ok()
}

/// A directory of this plugin's own that the host keeps between runs
/// (`MCP_PLUGIN_CACHE`; usable when the policy grants `fs` on
/// `${plugin_cache}`); none outside a host.
pub fn cache_dir() -> Option<String> {
    std::env::var("MCP_PLUGIN_CACHE").ok()
}

/// A path a plugin was given, resolved as the host resolves it: absolute
/// ones as they are (`/home/me/x`; on Windows, in guest form, `C:/x` or
/// `//server/share/x`), relative ones from the workspace; `.` and `..`
/// removed, so that it matches the folder the host preopened.
pub fn in_workspace(path: &str) -> std::path::PathBuf {
    use std::path::{Component, PathBuf};
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && &bytes[1..3] == b":/";
    let joined = if path.starts_with('/') || drive {
        PathBuf::from(path)
    } else {
        PathBuf::from(workspace()).join(path)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// A list of paths from a variable, split as the host's system splits
/// PATH (`MCP_PATH_LIST_SEPARATOR`: `;` on Windows, else `:`); empty
/// entries are left out.
pub fn split_paths(list: &str) -> Vec<String> {
    let separator = std::env::var("MCP_PATH_LIST_SEPARATOR").unwrap_or_else(|_| ":".into());
    list.split(separator.as_str())
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// 64 random bits from the host's entropy (WASI `random`, which seeds
/// std's `RandomState`): names and ids that must not collide between
/// hosts.
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_as_the_host_resolves_them() {
        // Outside a host the workspace is `.`.
        assert_eq!(in_workspace("docs/../4.x"), std::path::PathBuf::from("4.x"));
        assert_eq!(
            in_workspace("/srv/docs/./4.x"),
            std::path::PathBuf::from("/srv/docs/4.x")
        );
        // Windows paths in guest form are absolute too.
        assert_eq!(
            in_workspace("C:/godot/doc/../docs"),
            std::path::PathBuf::from("C:/godot/docs")
        );
        assert_eq!(
            in_workspace("//server/share/doc"),
            std::path::PathBuf::from("//server/share/doc")
        );
        // Lists split on the host's separator (`:` when not told).
        assert_eq!(split_paths("/a::/b"), ["/a", "/b"]);
    }
}
