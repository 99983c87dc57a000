//! `cofer terminal ENV`: the person's own shell in an environment's
//! container, in /workdir, on a real terminal (`podman exec -it`). When
//! it exits, what the person changed is committed as an agent's command
//! is (through `environment_run_cmd`, which also brings the files back
//! from another machine's engine).

use std::io::IsTerminal;
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::host::Host;
use crate::list::environments;

/// bash where the image has it, else sh.
const SHELL: &str = "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi";

pub fn terminal(host: &Host, id: &str, url: Option<&str>) -> Result<ExitCode> {
    if !std::io::stdin().is_terminal() {
        bail!(
            "`cofer terminal` needs a terminal on its input; for one command use `cofer run {id} -- CMD`"
        );
    }
    // Started again if its container is gone, as an agent's call would.
    host.call("environment_open", json!({"environment_id": id}))?;
    let all = environments(host)?;
    let env = all
        .iter()
        .find(|e| e["id"] == id)
        .with_context(|| format!("there is no environment `{id}`: `cofer list` shows them"))?;
    let container = env["container"]
        .as_str()
        .with_context(|| format!("environment `{id}` has no container running"))?;
    let engine = env["engine"].as_str().unwrap_or("local");
    let mut podman = Command::new("podman");
    match (engine, url) {
        (_, Some(url)) => {
            podman.args(["--url", url]);
        }
        ("local", None) => {}
        (engine, None) => bail!(
            "environment `{id}` runs on engine `{engine}`: give that engine's URL (its `containers.engines.{engine}` in the host's config) with --url"
        ),
    }
    podman.args([
        "exec", "-it", "-w", "/workdir", container, "sh", "-c", SHELL,
    ]);
    let status = podman
        .status()
        .context("cannot run podman: install it (Debian/Ubuntu: `apt-get install podman`)")?;
    let committed = host.call(
        "environment_run_cmd",
        json!({
            "environment_id": id,
            "command": "true",
            "explanation": "Work done by hand in `cofer terminal`",
        }),
    )?;
    // What the person typed was written before the `true` ran: it comes
    // back as the changes made since the last command, not the command's.
    let commit = [
        &committed.value["commit"],
        &committed.value["background_changes_commit"],
    ]
    .into_iter()
    .find_map(|c| c.as_str());
    match commit {
        Some(commit) => eprintln!("cofer: your changes are commit {commit} on cofer/{id}"),
        None => eprintln!("cofer: nothing changed in /workdir"),
    }
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(code.clamp(1, 255) as u8),
        None => ExitCode::FAILURE,
    })
}
