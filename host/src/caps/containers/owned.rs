//! Which containers are this plugin's: those with its label, made on
//! this machine; remembered once seen, so an `exec` does not inspect.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use super::{MACHINE_LABEL, OWNER_LABEL};
use crate::bindings::mcphost::plugin::containers::ContainerError;
use crate::podman::{self, Engine, Inspected, PodmanError};
use crate::policy::Grants;

/// This machine: its `/etc/machine-id`, else its host name.
pub(super) static MACHINE: LazyLock<String> = LazyLock::new(|| {
    ["/etc/machine-id", "/proc/sys/kernel/hostname"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .map(|id| id.trim().to_string())
        .find(|id| !id.is_empty())
        .unwrap_or_else(|| "unknown".into())
});

/// (plugin, engine, id or name) already seen to carry the plugin's label,
/// so an `exec` does not pay for a `podman inspect` every time; each with
/// the container's id.
static OWNED: LazyLock<Mutex<HashMap<OwnedKey, String>>> = LazyLock::new(Default::default);

/// (plugin, engine, id or name).
type OwnedKey = (String, String, String);

/// The id of the container `id` (an id or a name) if it was seen to be
/// the plugin's.
pub(super) fn known(plugin: &str, engine: &Engine, id: &str) -> Option<String> {
    OWNED
        .lock()
        .expect("owned set poisoned")
        .get(&owned_key(plugin, engine, id))
        .cloned()
}

fn owned_key(plugin: &str, engine: &Engine, id: &str) -> OwnedKey {
    (
        plugin.to_string(),
        engine.name().to_string(),
        id.to_string(),
    )
}

pub(super) fn remember(plugin: &str, engine: &Engine, info: &Inspected) {
    let mut owned = OWNED.lock().expect("owned set poisoned");
    owned.insert(owned_key(plugin, engine, &info.id), info.id.clone());
    owned.insert(owned_key(plugin, engine, &info.name), info.id.clone());
}

pub(super) fn forget(plugin: &str, engine: &Engine, info: &Inspected) {
    let mut owned = OWNED.lock().expect("owned set poisoned");
    owned.remove(&owned_key(plugin, engine, &info.id));
    owned.remove(&owned_key(plugin, engine, &info.name));
}

pub(super) fn granted(g: &Grants) -> Result<(), ContainerError> {
    g.require("containers").map_err(ContainerError::Denied)
}

/// The container `id` on `engine` if it exists and belongs to this plugin.
pub(super) async fn owned(
    g: &Grants,
    engine: &Engine,
    id: &str,
) -> Result<Inspected, ContainerError> {
    granted(g)?;
    check_word("container id", id)?;
    let not_found = || {
        ContainerError::NotFound(format!(
            "no container `{id}` belongs to plugin `{}`",
            g.plugin
        ))
    };
    let docker = podman::client(engine).await?;
    let info = match podman::inspect(&docker, id).await {
        Ok(info) => info,
        Err(PodmanError::NotFound(_)) => return Err(not_found()),
        Err(e) => return Err(e.into()),
    };
    if owner(&info) != Some(g.plugin.as_str()) || !this_machine(&info) {
        return Err(not_found());
    }
    remember(&g.plugin, engine, &info);
    Ok(info)
}

/// Made by a host on this machine (or by one from before the machine
/// label, which ran here: a shared service was not supported then).
pub(super) fn this_machine(info: &Inspected) -> bool {
    info.labels
        .get(MACHINE_LABEL)
        .is_none_or(|m| *m == *MACHINE)
}

pub(super) fn owner(info: &Inspected) -> Option<&str> {
    info.labels.get(OWNER_LABEL).map(String::as_str)
}

/// Ids, names, images and label keys: one word, never taken for an option
/// or a second word (they also end up in URLs and filters).
pub(super) fn check_word(what: &str, word: &str) -> Result<(), ContainerError> {
    if word.is_empty()
        || word.starts_with('-')
        || word.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        Err(ContainerError::Invalid(format!(
            "{what} `{word}` is not valid"
        )))
    } else {
        Ok(())
    }
}
