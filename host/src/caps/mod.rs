//! Host capabilities offered to plugins as WIT imports, one module per
//! interface, each working on the call's [`CallState`]. Capability
//! functions check the grants first and answer `denied` with the config
//! key that would grant them.

/// For capability functions whose answer is `Result<T, E>`: run a block
/// that uses `?`, with the call's grants as `g` (cloned: the future must be
/// `Send`, and `CallState` is not `Sync`). Defined before the modules that
/// use it.
macro_rules! answer {
    ($state:expr, |$g:ident| $body:expr) => {{
        let $g = $state.grants.clone();
        Ok(async move { $body }.await)
    }};
}

pub mod containers;
pub mod git;
pub mod index;
pub mod log;
pub mod notify;
pub mod process;
pub mod pty;
pub mod spawn;

use crate::store::CallState;

impl crate::bindings::mcphost::plugin::types::Host for CallState {}
