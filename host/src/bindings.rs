//! Host-side bindings of the `mcphost:plugin` package (`wit/plugin.wit`),
//! generated in this one place. Capability implementations live in
//! `caps/<interface>.rs`.
//!
//! The bindings are generated for `full-plugin`, the world with every
//! optional export; [`Exports`] looks each export up on its own so a plugin
//! built against the plain `plugin` world (tools only) loads too.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "full-plugin",
    imports: { default: async | trappable },
    exports: { default: async },
    with: {
        "mcphost:plugin/index.builder": textindex::Builder,
        "mcphost:plugin/pty.session": timebox::pty::Session,
        "mcphost:plugin/process.child": timebox::LineChild,
    },
});

use wasmtime::component::InstancePre;

pub use exports::mcphost::plugin::resources::{Contents, ResourceTemplate};
pub use exports::mcphost::plugin::tools::{Tool, ToolError, ToolOutput};
pub use mcphost::plugin::types::CapabilityError;

use exports::mcphost::plugin::{lifecycle, resources, tools};

/// Where a component's exports are, found once at load.
pub struct Exports {
    pub tools: tools::GuestIndices,
    pub resources: Option<resources::GuestIndices>,
    pub lifecycle: Option<lifecycle::GuestIndices>,
}

impl Exports {
    pub fn find<T>(pre: &InstancePre<T>) -> wasmtime::Result<Exports> {
        Ok(Exports {
            tools: tools::GuestIndices::new(pre)?,
            resources: resources::GuestIndices::new(pre).ok(),
            lifecycle: lifecycle::GuestIndices::new(pre).ok(),
        })
    }
}
