//! Host-side bindings of the `mcphost:plugin` package (`wit/plugin.wit`),
//! generated in this one place. Capability implementations live in
//! `caps/<interface>.rs`.
//!
//! The bindings are generated for `full-plugin`, the world with every
//! optional export; [`Exports`] looks each export up on its own so a plugin
//! built against the plain `plugin` world (tools only) loads too.
//!
//! A capability function that answers `result<T, some-error>` returns
//! `Result<T, Refusal<SomeError>>`: `?` works on the WIT error, on the
//! errors that convert into it, and on resource-table errors (which trap);
//! the `convert_*` methods in `caps/` turn a refusal back into the WIT
//! error or the trap, in one place per error type.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "full-plugin",
    imports: { default: async | trappable },
    exports: { default: async },
    trappable_error_type: {
        "mcphost:plugin/types.capability-error" => Refusal<mcphost::plugin::types::CapabilityError>,
        "mcphost:plugin/git.git-error" => Refusal<mcphost::plugin::git::GitError>,
        "mcphost:plugin/containers.container-error" => Refusal<mcphost::plugin::containers::ContainerError>,
        "mcphost:plugin/pty.pty-error" => Refusal<mcphost::plugin::pty::PtyError>,
        "mcphost:plugin/client.ask-error" => Refusal<mcphost::plugin::client::AskError>,
    },
    with: {
        "mcphost:plugin/index.builder": textindex::Builder,
        "mcphost:plugin/git.hold": hostgit::Hold,
        "mcphost:plugin/pty.session": timebox::pty::Session,
        "mcphost:plugin/process.child": timebox::LineChild,
    },
});

use wasmtime::component::InstancePre;

pub use exports::mcphost::plugin::completion::Reference;
pub use exports::mcphost::plugin::prompts::{Filled, Prompt};
pub use exports::mcphost::plugin::resource_list::{Contents as ListedContents, Resource};
pub use exports::mcphost::plugin::resources::{Contents, ResourceTemplate};
pub use exports::mcphost::plugin::tools::{Tool, ToolError, ToolOutput};
pub use mcphost::plugin::types::CapabilityError;

use exports::mcphost::plugin::{completion, lifecycle, prompts, resource_list, resources, tools};

/// Why a capability call did not succeed: an answer the plugin gets (its
/// WIT error `E`), or a trap that ends the call (a broken resource handle).
pub enum Refusal<E> {
    Answer(E),
    Trap(wasmtime::Error),
}

impl<E> Refusal<E> {
    /// What the plugin sees: the WIT error, or the trap.
    pub fn into_wit(self) -> wasmtime::Result<E> {
        match self {
            Refusal::Answer(e) => Ok(e),
            Refusal::Trap(trap) => Err(trap),
        }
    }
}

impl<E> From<wasmtime::component::ResourceTableError> for Refusal<E> {
    fn from(e: wasmtime::component::ResourceTableError) -> Self {
        Refusal::Trap(e.into())
    }
}

/// `Refusal<Wit>` from each error that converts into `Wit` (a blanket impl
/// would overlap the trap's).
macro_rules! refusals {
    ($($from:ty => $wit:ty),* $(,)?) => {
        $(impl From<$from> for Refusal<$wit> {
            fn from(e: $from) -> Self {
                Refusal::Answer(e.into())
            }
        })*
    };
}

refusals! {
    CapabilityError => CapabilityError,
    mcphost::plugin::git::GitError => mcphost::plugin::git::GitError,
    hostgit::GitError => mcphost::plugin::git::GitError,
    mcphost::plugin::containers::ContainerError => mcphost::plugin::containers::ContainerError,
    crate::podman::PodmanError => mcphost::plugin::containers::ContainerError,
    mcphost::plugin::pty::PtyError => mcphost::plugin::pty::PtyError,
    CapabilityError => mcphost::plugin::pty::PtyError,
    timebox::pty::StartError => mcphost::plugin::pty::PtyError,
    mcphost::plugin::client::AskError => mcphost::plugin::client::AskError,
}

/// Where a component's exports are, found once at load.
pub struct Exports {
    pub tools: tools::GuestIndices,
    pub resources: Option<resources::GuestIndices>,
    pub resource_list: Option<resource_list::GuestIndices>,
    pub prompts: Option<prompts::GuestIndices>,
    pub completion: Option<completion::GuestIndices>,
    pub lifecycle: Option<lifecycle::GuestIndices>,
}

impl Exports {
    pub fn find<T>(pre: &InstancePre<T>) -> wasmtime::Result<Exports> {
        Ok(Exports {
            tools: tools::GuestIndices::new(pre)?,
            resources: resources::GuestIndices::new(pre).ok(),
            resource_list: resource_list::GuestIndices::new(pre).ok(),
            prompts: prompts::GuestIndices::new(pre).ok(),
            completion: completion::GuestIndices::new(pre).ok(),
            lifecycle: lifecycle::GuestIndices::new(pre).ok(),
        })
    }
}
