//! Host-side bindings of the `mcphost:plugin` world (`wit/plugin.wit`),
//! generated in this one place. Capability implementations live in
//! `caps/<interface>.rs`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "plugin",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub use exports::mcphost::plugin::tools::{Tool, ToolError, ToolOutput};
pub use mcphost::plugin::types::CapabilityError;
