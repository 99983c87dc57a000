//! Logs: `tracing` to stderr only (stdout carries JSON-RPC), one line per
//! record with an ISO 8601 (RFC 3339) UTC timestamp.
//!
//! The level comes from `MCP_SERVER_LOG` (`silent|error|warn|info|debug`)
//! or, for finer control, `RUST_LOG` (an `EnvFilter` directive). Default:
//! `info`. `debug` is ours only (the host, plugins, searches): libraries
//! stay at `info`, since some would log whole messages and documents.
//!
//! A one-shot command (`host list`, `host call`) prints what was asked
//! for: by default only errors reach stderr, and the warnings it hid are
//! counted and named in one line at the end, pointing to `host check`.

use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Result, bail};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Warnings a one-shot command did not print.
static HIDDEN_WARNINGS: AtomicUsize = AtomicUsize::new(0);

/// Counts warnings the level hid.
struct CountHidden;

impl<S: tracing::Subscriber> Layer<S> for CountHidden {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if *event.metadata().level() == tracing::Level::WARN {
            HIDDEN_WARNINGS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// After a one-shot command: one line about the warnings it did not print.
pub fn say_hidden_warnings() {
    let hidden = HIDDEN_WARNINGS.load(Ordering::Relaxed);
    if hidden > 0 {
        eprintln!(
            "({hidden} warning{} not shown: `host check` says what is wrong, MCP_SERVER_LOG=warn shows them here)",
            if hidden == 1 { "" } else { "s" }
        );
    }
}

pub fn init(one_shot: bool) -> Result<()> {
    let chosen =
        std::env::var_os("MCP_SERVER_LOG").is_some() || std::env::var_os("RUST_LOG").is_some();
    if one_shot && !chosen {
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(false)
                    .with_filter(EnvFilter::new("error")),
            )
            .with(CountHidden.with_filter(tracing_subscriber::filter::LevelFilter::WARN))
            .init();
        return Ok(());
    }
    let filter = match std::env::var("MCP_SERVER_LOG") {
        Ok(level) => EnvFilter::new(match level.to_ascii_lowercase().as_str() {
            "silent" => "off",
            "debug" => "info,host=debug,call=debug,index=debug,plugin=debug",
            l @ ("error" | "warn" | "info") => l,
            other => bail!(
                "MCP_SERVER_LOG={other} is not a level: use silent, error, warn, info or debug"
            ),
        }),
        Err(_) => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    Ok(())
}
