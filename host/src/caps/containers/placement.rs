//! Which engine a call's containers go to: `local`, an engine the policy
//! names, or a pool of them (`containers.pools`), where the member with
//! the most room takes it. The rule, from what each engine's own `/info`
//! and containers say:
//!
//! room = min(CPUs, total memory ÷ the plugin's container memory limit)
//!        − the plugin's containers running there
//!
//! The most room wins; on a tie, the member listed first. A member that
//! does not answer within [`MEASURE`] is passed over (and said in the log);
//! when none answers the pool is unavailable, naming each.

use std::time::Duration;

use bollard::query_parameters::ListContainersOptions;

use super::OWNER_LABEL;
use crate::bindings::mcphost::plugin::containers::ContainerError;
use crate::podman::{self, Engine};
use crate::policy::{Grants, LOCAL_ENGINE};

/// How long one engine of a pool may take to say how much room it has.
const MEASURE: Duration = Duration::from_secs(15);

/// The engine `name` means for this plugin.
pub async fn choose(g: &Grants, name: &str) -> Result<Engine, ContainerError> {
    if name == LOCAL_ENGINE {
        return Ok(Engine::Local);
    }
    if let Some(found) = g.engines.iter().find(|e| e.name == name) {
        return Ok(Engine::Remote(found.clone()));
    }
    if let Some((_, why)) = g.refused_engines.iter().find(|(n, _)| n == name) {
        return Err(ContainerError::Denied(format!(
            "engine `{name}` of plugin `{}` cannot be used: {why} ({})",
            g.plugin, g.config_hint
        )));
    }
    if let Some(members) = g.pools.get(name) {
        return place(g, name, members).await;
    }
    let known: Vec<&str> = std::iter::once(LOCAL_ENGINE)
        .chain(g.engines.iter().map(|e| e.name.as_str()))
        .chain(g.pools.keys().map(String::as_str))
        .collect();
    Err(ContainerError::Denied(format!(
        "plugin `{}` has no engine `{name}` (it has: {}): name a Podman service as \
         `containers.engines.{name} = \"ssh://<user>@<machine>/run/podman/podman.sock\"` under \
         [plugins.{}] in {}",
        g.plugin,
        known.join(", "),
        g.plugin,
        g.config_hint
    )))
}

/// The member of pool `pool` with the most room.
async fn place(g: &Grants, pool: &str, members: &[String]) -> Result<Engine, ContainerError> {
    let engines: Vec<Engine> = members
        .iter()
        .filter_map(|m| {
            if m == LOCAL_ENGINE {
                Some(Engine::Local)
            } else {
                g.engines
                    .iter()
                    .find(|e| &e.name == m)
                    .cloned()
                    .map(Engine::Remote)
            }
        })
        .collect();
    let measured = futures_util::future::join_all(engines.iter().map(|engine| async move {
        match tokio::time::timeout(MEASURE, room(g, engine)).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {} s", MEASURE.as_secs())),
        }
    }))
    .await;
    let mut best: Option<(i64, &Engine)> = None;
    let mut silent = Vec::new();
    for (engine, measured) in engines.iter().zip(measured) {
        match measured {
            Ok(room) => {
                tracing::info!(
                    pool,
                    engine = engine.name(),
                    room,
                    "measured a pool's engine"
                );
                if best.is_none_or(|(most, _)| room > most) {
                    best = Some((room, engine));
                }
            }
            Err(why) => {
                tracing::warn!(
                    pool,
                    engine = engine.name(),
                    why,
                    "a pool's engine did not answer"
                );
                silent.push(format!("{}: {why}", engine.name()));
            }
        }
    }
    match best {
        Some((_, engine)) => Ok(engine.clone()),
        None => Err(ContainerError::Unavailable(format!(
            "no engine of pool `{pool}` answered ({}): start one of them, or name another engine",
            silent.join("; ")
        ))),
    }
}

/// `engine`'s room for one more of the plugin's containers.
async fn room(g: &Grants, engine: &Engine) -> Result<i64, String> {
    let docker = podman::client(engine).await.map_err(|e| e.to_string())?;
    let info = docker.info().await.map_err(|e| e.to_string())?;
    let cpus = info.ncpu.unwrap_or(1).max(1);
    let memory = info.mem_total.unwrap_or(0).max(0);
    let limit = i64::try_from(g.container_memory_mb.saturating_mul(1024 * 1024))
        .unwrap_or(i64::MAX)
        .max(1);
    let filters = std::collections::HashMap::from([(
        "label".to_string(),
        vec![format!("{OWNER_LABEL}={}", g.plugin)],
    )]);
    let running = docker
        .list_containers(Some(ListContainersOptions {
            all: false,
            filters: Some(filters),
            ..Default::default()
        }))
        .await
        .map_err(|e| e.to_string())?
        .len();
    Ok(room_for(cpus, memory, limit, running))
}

/// The rule in the module's comment.
fn room_for(cpus: i64, memory: i64, limit: i64, running: usize) -> i64 {
    cpus.min(memory / limit) - i64::try_from(running).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::room_for;

    #[test]
    fn room_is_the_scarcer_of_cpus_and_memory_less_what_runs() {
        const GIB: i64 = 1024 * 1024 * 1024;
        // 8 CPUs, 16 GiB, 4 GiB a container: memory is scarcer (4).
        assert_eq!(room_for(8, 16 * GIB, 4 * GIB, 1), 3);
        // 2 CPUs, 64 GiB: CPUs are (2).
        assert_eq!(room_for(2, 64 * GIB, 4 * GIB, 0), 2);
        // Full machines go negative, still ordered.
        assert!(room_for(2, 64 * GIB, 4 * GIB, 5) < room_for(2, 64 * GIB, 4 * GIB, 3));
    }
}
