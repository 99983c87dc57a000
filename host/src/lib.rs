//! An MCP server whose tools are WebAssembly components.
//!
//! How a call flows, and where each step lives:
//! - [`cli`]: the `host` command line; `serve` starts [`mcp`] on stdio
//!   ([`stdio`]) or Streamable HTTP ([`http`]).
//! - [`mcp`]: the MCP front (rmcp): tools/list, tools/call, notifications.
//! - [`service`]: one tool call: validate ([`schema`]), wait for a turn
//!   ([`admission`]), run ([`runtime`]), reply (a plugin's WASI error
//!   numbers named, [`wasi_errno`]), log.
//! - [`catalog`]: the plugin loader and the tool catalog; [`watch`] reloads
//!   it when the plugins folder changes; [`engine`] compiles and caches.
//! - [`runtime`]: a fresh instance per call with memory, deadline and
//!   cancellation enforced.
//! - [`caps`]: the host capabilities plugins import, one module per WIT
//!   interface, gated by [`policy`]; the `timebox` crate runs processes
//!   for them and the `textindex` crate keeps their full-text indexes
//!   (both beside this one in `host/`, free of wasmtime); [`podman`] and
//!   [`git`] run those CLIs for the `containers` and `git` capabilities.
//! - [`background`]: plugins' `refresh` after load and on file changes.
//! - [`watchdog`]: outlives the host and ends its calls' processes when
//!   the host dies; the start-up sweep ends what a dead host left.

pub mod admission;
pub mod background;
pub mod bindings;
pub mod caps;
pub mod catalog;
pub mod cli;
pub mod client;
pub mod client_config;
pub mod declared;
pub mod engine;
/// Entry points for the fuzz targets in tests/fuzz (`--cfg fuzzing` only).
#[cfg(fuzzing)]
pub mod fuzzing;
pub mod http;
pub mod inspect;
pub mod install;
pub mod logging;
pub mod mcp;
pub mod paths;
pub mod pin;
// What the host needs from the platform, chosen here and nowhere else.
#[cfg_attr(unix, path = "platform/unix.rs")]
#[cfg_attr(windows, path = "platform/windows.rs")]
pub mod platform;
pub mod podman;
pub mod policy;
pub mod runtime;
pub mod scaffold;
pub mod schema;
pub mod scrub;
pub mod secret_refs;
pub mod secrets;
pub mod service;
pub mod stdio;
pub mod store;
pub mod vectors;
pub mod views;
pub mod wasi_errno;
pub mod wasi_fs;
pub mod watch;
#[cfg(unix)]
pub mod watchdog;
