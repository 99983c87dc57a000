//! `environment_list`: every environment of a repository, from its
//! records and the containers of every engine they are on; the
//! environments of an engine that does not answer are `unreachable`
//! (nothing of them is touched) while the others answer as usual.

use plugin_sdk::{ToolError, ToolOutput};
use serde_json::{Value, json};

use crate::env::{self, Env};
use crate::{args, errors, open_repo, text};

pub fn list(args: args::List) -> Result<ToolOutput, ToolError> {
    let repo = open_repo(&args.common.environment_source)?;
    let mut ids: Vec<String> = std::fs::read_dir(env::records_dir(&repo))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".json")
                .map(str::to_string)
        })
        .collect();
    // Containers on every engine an environment of the repository is on.
    let mut engines: Vec<String> = ids
        .iter()
        .filter_map(|id| Env::new(&repo, id).read_record())
        .map(|r| r.engine().to_string())
        .chain([env::LOCAL.to_string()])
        .collect();
    engines.sort();
    engines.dedup();
    let mut containers = Vec::new();
    let mut unreachable = Vec::new();
    let mut unreached: Vec<&str> = Vec::new();
    for engine in &engines {
        let listed = plugin_sdk::containers::use_engine(engine).and_then(|_| {
            plugin_sdk::containers::list(&[(env::LABEL_SOURCE.into(), repo.clone())])
        });
        match listed {
            Ok(found) => containers.extend(found),
            Err(e) if engine == env::LOCAL => {
                return Err(errors::from_container("list containers", e));
            }
            Err(e) => {
                unreachable.push(format!("{engine}: {}", ToolError::from(e).message));
                unreached.push(engine.as_str());
            }
        }
    }
    let repo_id = env::repository_id(&repo);
    containers.retain(|c| env::of_repository(repo_id.as_deref(), c));
    for c in &containers {
        if let Some((_, id)) = c.labels.iter().find(|(k, _)| k == env::LABEL_ENV) {
            ids.push(id.clone());
        }
    }
    ids.sort();
    ids.dedup();
    let environments: Vec<Value> = ids
        .iter()
        .map(|id| {
            let env = Env::new(&repo, id);
            let record = env.read_record();
            let of_env: Vec<_> = containers
                .iter()
                .filter(|c| c.labels.iter().any(|(k, v)| k == env::LABEL_ENV && v == id))
                .collect();
            let main = of_env.iter().find(|c| {
                c.labels
                    .iter()
                    .any(|(k, v)| k == env::LABEL_ROLE && v == "main")
            });
            let engine = record.as_ref().map_or(env::LOCAL, |r| r.engine());
            // Nothing is known of its containers while its engine does not
            // answer; its worktree, branch and record stay as they are.
            let state = if unreached.contains(&engine) {
                "unreachable".to_string()
            } else {
                main.map(|c| c.state.clone())
                    .unwrap_or_else(|| "missing".into())
            };
            json!({
                "id": id,
                "engine": engine,
                "title": record.as_ref().map(|r| r.title.clone()),
                "image": record.as_ref().map(|r| r.image.clone()),
                "created_at": record.as_ref().map(|r| r.created_at.clone()),
                "branch": env.branch(),
                "worktree": env.has_worktree().then(|| env.worktree()),
                "container": main.map(|c| c.name.clone()),
                "container_state": state,
                "services": of_env.len() - usize::from(main.is_some()),
            })
        })
        .collect();
    let mut out = json!({ "environments": environments });
    if !unreachable.is_empty() {
        out["unreachable_engines"] = json!(unreachable);
    }
    Ok(text(&out))
}
