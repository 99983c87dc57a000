//! `cofer list` and `cofer watch`: the repository's environments as the
//! environment tools see them, and what each did last (its newest commits:
//! every command an agent runs is one, with its explanation as the message).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::Result;
use hostgit::Repo;
use serde_json::Value;

use crate::host::Host;

/// The environments, as `environment_list` gives them.
pub fn environments(host: &Host) -> Result<Vec<Value>> {
    let answer = host.call("environment_list", serde_json::json!({}))?;
    for engine in answer.value["unreachable_engines"]
        .as_array()
        .into_iter()
        .flatten()
    {
        eprintln!(
            "cofer: engine not reached: {}",
            engine.as_str().unwrap_or("")
        );
    }
    Ok(answer.value["environments"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// One environment's field as a table cell.
fn cell(env: &Value, key: &str) -> String {
    match &env[key] {
        Value::String(s) => termtext::line(s),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// The table `cofer list` prints.
pub fn table(environments: &[Value]) -> String {
    let columns = [
        ("ID", "id"),
        ("TITLE", "title"),
        ("STATE", "container_state"),
        ("CREATED", "created_at"),
        ("BRANCH", "branch"),
        ("ENGINE", "engine"),
    ];
    let rows: Vec<Vec<String>> = environments
        .iter()
        .map(|env| columns.iter().map(|(_, key)| cell(env, key)).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([name.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (cell, width) in cells.iter().zip(&widths) {
            out.push_str(&format!("{cell:<width$}  "));
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(columns.iter().map(|(name, _)| name.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// The newest `n` commits environment `id` made since it was created.
pub async fn last_commands(repo: &Repo, id: &str, n: usize) -> Vec<String> {
    let tip = format!("refs/heads/cofer/{id}");
    let range = match crate::repo::base_commit(repo, id) {
        Some(base) => format!("{base}..{tip}"),
        None => tip,
    };
    let count = format!("--max-count={n}");
    repo.run(&["log", &count, "--format=%h %cr  %s", &range, "--"])
        .await
        .map(|out| out.lines().map(termtext::line).collect())
        .unwrap_or_default()
}

/// `cofer watch`: the list and each environment's last commands, again
/// every `interval` until interrupted (on a terminal, in place).
pub async fn watch(host: &Host, repo: &Repo, interval: Duration) -> Result<()> {
    let terminal = std::io::stdout().is_terminal();
    loop {
        let environments = environments(host)?;
        let mut screen = table(&environments);
        for env in &environments {
            let id = cell(env, "id");
            let last = last_commands(repo, &id, 3).await;
            screen.push_str(&format!("\n{id}:\n"));
            if last.is_empty() {
                screen.push_str("  (no commands yet)\n");
            }
            for line in last {
                screen.push_str(&format!("  {line}\n"));
            }
        }
        let mut out = std::io::stdout().lock();
        if terminal {
            // Home and clear: the view replaces the last one.
            write!(out, "\x1b[H\x1b[2J")?;
        } else {
            writeln!(out, "---")?;
        }
        write!(out, "{screen}")?;
        out.flush()?;
        drop(out);
        tokio::time::sleep(interval).await;
    }
}
