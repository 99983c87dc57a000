//! Host capabilities offered to plugins as WIT imports, one module per
//! interface, each working on the call's [`CallState`]. Capability
//! functions check the grants first and answer `denied` with the config
//! key that would grant them.

pub mod client;
pub mod containers;
pub mod content;
pub mod git;
pub mod index;
pub mod log;
pub mod notify;
pub mod process;
pub mod pty;
pub mod spawn;
pub mod vectors;

use crate::store::CallState;

use crate::bindings::Refusal;
use crate::bindings::mcphost::plugin::types::{CapabilityError, Host};

impl Host for CallState {
    fn convert_capability_error(
        &mut self,
        err: Refusal<CapabilityError>,
    ) -> wasmtime::Result<CapabilityError> {
        err.into_wit()
    }
}
