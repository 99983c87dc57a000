//! `host list` and `host check`: what the host would serve, from the same
//! start as `serve` ([`Service::start`]), printed instead of served.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::ValueEnum;

use crate::catalog::Loader;
use crate::client::StderrLink;
use crate::install::Lock;
use crate::runtime;
use crate::service::Service;
use crate::store::CallContext;

/// What `host list` prints.
#[derive(Clone, Copy, ValueEnum)]
pub enum ListWhat {
    Plugins,
    Tools,
    Grants,
}

pub fn list(service: &Service, what: ListWhat) {
    let catalog = service.catalog();
    match what {
        ListWhat::Plugins => {
            // Where `host install` took each from; `-` for files put there by hand.
            let lock = Lock::read(&service.loader.plugins_dir).unwrap_or_default();
            for p in &catalog.plugins {
                let (source, digest) = lock
                    .get(&p.name)
                    .map_or(("-", "-"), |e| (e.source.as_str(), e.digest.as_str()));
                println!(
                    "{}\t{}\t{} tools\t{source}\t{digest}\t{:?}",
                    p.name,
                    p.path.display(),
                    p.tools.len(),
                    p.origin
                );
            }
            for p in &catalog.problems {
                println!(
                    "{}\t{}\tNOT LOADED: {}",
                    p.plugin,
                    p.path.display(),
                    p.reason
                );
            }
        }
        ListWhat::Tools => {
            for (name, (plugin, i)) in &catalog.tools {
                let first_line = plugin.tools[*i].description.lines().next().unwrap_or("");
                println!("{name}\t{}\t{first_line}", plugin.name);
            }
            for (name, why) in &catalog.hidden {
                println!("{name}\tHIDDEN: {why}");
            }
        }
        ListWhat::Grants => {
            for p in &catalog.plugins {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&grants_json(&p.grants)).expect("JSON")
                );
            }
        }
    }
}

fn grants_json(g: &crate::policy::Grants) -> serde_json::Value {
    serde_json::json!({
        "plugin": g.plugin,
        "capabilities": g.capabilities,
        "process.programs": g.programs,
        "process.env": g.env,
        "fs.read": g.read_roots,
        "fs.write": g.write_roots,
        // Names only: a value is never printed.
        "secrets": g.secret_names,
        "limits.memory_mb": g.memory_bytes / (1024 * 1024),
        "limits.timeout_ms": g.timeout_ms,
        "programs": programs_json(g),
    })
}

/// What the plugin's programs may touch (issue 71), as this machine
/// enforces it.
fn programs_json(g: &crate::policy::Grants) -> serde_json::Value {
    let Some(c) = &g.confinement else {
        return serde_json::json!({"confined": false, "why": "process.confine = false: the user's full rights"});
    };
    let ports = |p: &Option<Vec<u16>>| match p {
        Some(ports) => serde_json::json!(ports),
        None => serde_json::json!("any"),
    };
    serde_json::json!({
        "confined": timebox::confine::enforcement().describe(),
        "write": c.write,
        "write.temporary": "a private folder per call (TMPDIR, TMP, TEMP)",
        "read": c.read,
        "hidden": c.hidden,
        "tcp.connect": ports(&c.connect),
        "tcp.bind": ports(&c.bind),
    })
}

pub async fn check(loader: Loader, strict: bool) -> Result<ExitCode> {
    println!("config: ok ({})", loader.config_hint);
    let mut problems = 0;
    match crate::vectors::check() {
        Ok(state) => println!("sentence vectors: {state}"),
        Err(why) => {
            problems += 1;
            println!("sentence vectors: NOT READY: {why}");
        }
    }
    println!(
        "plugins' programs: {}",
        timebox::confine::enforcement().describe()
    );
    if !loader.plugins_dir.is_dir() {
        println!(
            "plugins folder {} does not exist: create it and copy *.wasm plugins into it",
            loader.plugins_dir.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    let service = Service::start(loader).await;
    let catalog = service.catalog();
    for p in &catalog.plugins {
        println!("plugin {}: ok, {} tools", p.name, p.tools.len());
        if p.grants.confinement.is_none() && (p.grants.has("process") || p.grants.has("pty")) {
            println!(
                "plugin {}: note: its programs are NOT confined (process.confine = false): they run with your full rights",
                p.name
            );
        }
        for root in p.grants.read_roots.iter().chain(&p.grants.write_roots) {
            if !root.exists() {
                println!(
                    "plugin {}: note: granted directory {} does not exist (the plugin cannot use it until it does)",
                    p.name,
                    root.display()
                );
            }
        }
        // What a plugin with background work will serve: its first refresh,
        // run here as `serve` runs it (its own log lines say what it found).
        let call = CallContext::new(
            "lifecycle.refresh",
            p.grants.timeout_ms,
            Arc::new(StderrLink),
        );
        match runtime::refresh(&p.prepared, p.grants.clone(), call, &[]).await {
            None => {}
            Some(Ok(Ok(dirs))) => {
                println!("plugin {}: ready, serving from {}", p.name, dirs.join(", "))
            }
            Some(Ok(Err(e))) => {
                problems += 1;
                println!("plugin {}: NOT READY: {}: {}", p.name, e.code, e.message);
            }
            Some(Err(failure)) => {
                problems += 1;
                println!("plugin {}: NOT READY: {failure}", p.name);
            }
        }
    }
    for p in &catalog.problems {
        problems += 1;
        println!(
            "plugin {}: NOT LOADED ({}): {}",
            p.plugin,
            p.path.display(),
            p.reason
        );
    }
    let names: Vec<&str> = catalog
        .plugins
        .iter()
        .map(|p| p.name.as_str())
        .chain(catalog.problems.iter().map(|p| p.plugin.as_str()))
        .collect();
    let warnings = service
        .loader
        .config()
        .warnings(&names, &service.loader.places);
    for warning in &warnings {
        println!("warning: {warning}");
    }
    if strict {
        problems += warnings.len();
    }
    Ok(if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
