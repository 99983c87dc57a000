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
//!     // (MCP resources), one implementing `prompts::Guest` (MCP prompts),
//!     // one implementing `lifecycle::Guest` (background refresh), and a
//!     // `&str` constant of instructions for agents.
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
mod run;
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
pub use bindings::mcphost::plugin::{containers, content, git, index, log, notify, process, pty};
pub use errors::codes;
pub use lifecycle_bindings::exports::mcphost::plugin::lifecycle;
pub use prompts_bindings::exports::mcphost::plugin::prompts;
pub use resources_bindings::exports::mcphost::plugin::resources;
pub use time::{iso8601, now_secs, utc};
pub use tool::{Hints, McpTool, schema_for, structured_output, text_output};

/// Export a plugin: its typed tools and, optionally, the types serving its
/// resources and its background work, and instructions for agents. Keys in
/// any order, each once: `tools: [T, ...]`, `resources: R`, `lifecycle: L`,
/// `instructions: TEXT` (a `&str` constant; see the crate docs).
///
/// The component declares the crate's name (`CARGO_CRATE_NAME`) as its own
/// in the custom section `mcphost:plugin-name`: the host keys its policy by
/// that name, whatever the file is called. Instructions go in
/// `mcphost:plugin-instructions`; the host serves them in the MCP
/// `instructions` under the plugin's name (at most 8 KiB).
///
/// On a native build (the plugin's unit tests) nothing is exported, since
/// component symbol names are not valid native ones.
#[macro_export]
macro_rules! export {
    ($($key:ident : $value:tt),+ $(,)?) => {
        $crate::__export_keys!(@tools [] @resources [] @prompts [] @lifecycle [] @instructions [] $($key : $value,)+);
    };
}

/// Sorts `export!`'s keys, then emits the exports.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_keys {
    (@tools [] @resources $r:tt @prompts $p:tt @lifecycle $l:tt @instructions $i:tt tools : [$($tool:ty),+ $(,)?], $($rest:tt)*) => {
        $crate::__export_keys!(@tools [$($tool),+] @resources $r @prompts $p @lifecycle $l @instructions $i $($rest)*);
    };
    (@tools $t:tt @resources [] @prompts $p:tt @lifecycle $l:tt @instructions $i:tt resources : $ty:ident, $($rest:tt)*) => {
        $crate::__export_keys!(@tools $t @resources [$ty] @prompts $p @lifecycle $l @instructions $i $($rest)*);
    };
    (@tools $t:tt @resources $r:tt @prompts [] @lifecycle $l:tt @instructions $i:tt prompts : $ty:ident, $($rest:tt)*) => {
        $crate::__export_keys!(@tools $t @resources $r @prompts [$ty] @lifecycle $l @instructions $i $($rest)*);
    };
    (@tools $t:tt @resources $r:tt @prompts $p:tt @lifecycle [] @instructions $i:tt lifecycle : $ty:ident, $($rest:tt)*) => {
        $crate::__export_keys!(@tools $t @resources $r @prompts $p @lifecycle [$ty] @instructions $i $($rest)*);
    };
    (@tools $t:tt @resources $r:tt @prompts $p:tt @lifecycle $l:tt @instructions [] instructions : $text:tt, $($rest:tt)*) => {
        $crate::__export_keys!(@tools $t @resources $r @prompts $p @lifecycle $l @instructions [$text] $($rest)*);
    };
    (@tools [$($tool:ty),+] @resources [$($res:ident)?] @prompts [$($prompts:ident)?] @lifecycle [$($life:ident)?] @instructions [$($text:tt)?]) => {
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
            $( $crate::prompts_bindings::__export_prompts!($prompts with_types_in $crate::prompts_bindings); )?
            $( $crate::lifecycle_bindings::__export_lifecycle!($life with_types_in $crate::lifecycle_bindings); )?

            #[used]
            #[unsafe(link_section = "mcphost:plugin-name")]
            static __MCPHOST_NAME: [u8; env!("CARGO_CRATE_NAME").len()] = $crate::text_bytes(env!("CARGO_CRATE_NAME"));

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
            $( let _ = <$prompts as $crate::prompts::Guest>::get; )?
            $( let _ = <$life as $crate::lifecycle::Guest>::refresh; )?
            $( let _: &str = $text; )?
        };
    };
    (@tools [] @resources $r:tt @prompts $p:tt @lifecycle $l:tt @instructions $i:tt) => {
        compile_error!("export! needs `tools: [YourTool, ...]`");
    };
    (@tools $t:tt @resources $r:tt @prompts $p:tt @lifecycle $l:tt @instructions $i:tt $key:ident : $v:tt, $($rest:tt)*) => {
        compile_error!(concat!(
            "export!: `", stringify!($key),
            "` is unknown or given twice; the keys are tools, resources, prompts, lifecycle and instructions, each once"
        ));
    };
}

/// The bytes of `text` as an array, for the sections `export!` writes.
#[doc(hidden)]
pub const fn text_bytes<const N: usize>(text: &str) -> [u8; N] {
    let bytes = text.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

/// How a program ended, for a person: `exit code 1`, or `killed by a
/// signal` when it has no exit code (never `Some(1)`).
pub fn exit_text(exit_code: Option<i32>) -> String {
    match exit_code {
        Some(code) => format!("exit code {code}"),
        None => "killed by a signal".to_string(),
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

/// 64 random bits from the host's entropy (WASI `random`, which seeds
/// std's `RandomState`): names and ids that must not collide between
/// hosts.
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}
