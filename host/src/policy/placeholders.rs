//! Placeholders in policy values: `${workspace}`, `${home}`,
//! `${plugin_cache}` and `${env:NAME|fallback}`, and path settings made
//! absolute from them.

use std::path::{Path, PathBuf};

use super::Places;
use crate::paths::normalize;

/// The `${env:NAME}` references in `template` (fallbacks included): each
/// name, and whether it has a `|fallback`.
pub(super) fn env_refs(template: &str) -> Vec<(&str, bool)> {
    let mut refs = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("${env:") {
        let body = &rest[start + 6..];
        let Some(end) = body.find(['}', '|']) else {
            break;
        };
        refs.push((&body[..end], body[end..].starts_with('|')));
        rest = &body[end..];
    }
    refs
}

/// The first `${env:NAME}` in `template` with no `|fallback` whose
/// variable is unset or empty: it would expand to nothing and turn
/// `${env:X}/out` into `/out`.
pub(super) fn unset_without_fallback(template: &str) -> Option<String> {
    env_refs(template)
        .into_iter()
        .find(|(name, fallback)| !fallback && std::env::var(name).map_or(true, |v| v.is_empty()))
        .map(|(name, _)| name.to_string())
}

/// A path setting: placeholders expanded, relative paths taken from the
/// workspace, `.` and `..` removed.
pub(super) fn expand_path(template: &str, places: &Places, plugin_cache: &Path) -> PathBuf {
    normalize(
        &places
            .workspace
            .join(expand(template, places, plugin_cache)),
    )
}

/// A root setting: a path, or a list of them (`a:b`, as PATH is, so that
/// `GODOT_DOC_DIR` may name several doc dirs), each as [`expand_path`]
/// makes it.
/// The separators are the template's own and those in a variable's value;
/// a `:` inside `${workspace}`, `${home}` or `${plugin_cache}` is part of
/// that path (a workspace `proj:v2` must not grant `proj`).
pub(super) fn expand_paths(template: &str, places: &Places, plugin_cache: &Path) -> Vec<PathBuf> {
    // A private-use character stands for `:` in the fixed paths while the
    // list is split.
    const COLON: &str = "\u{E000}";
    let protected = Places {
        workspace: PathBuf::from(places.workspace.to_string_lossy().replace(':', COLON)),
        home: PathBuf::from(places.home.to_string_lossy().replace(':', COLON)),
        cache_dir: places.cache_dir.clone(),
    };
    let cache = PathBuf::from(plugin_cache.to_string_lossy().replace(':', COLON));
    let expanded = expand(template, &protected, &cache);
    std::env::split_paths(&expanded)
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| PathBuf::from(p.to_string_lossy().replace(COLON, ":")))
        .map(|p| normalize(&places.workspace.join(p)))
        .collect()
}

/// Expand `${workspace}`, `${home}`, `${plugin_cache}` and
/// `${env:NAME|fallback}` (the host's variable NAME when set and not
/// empty, else the fallback, which may hold placeholders itself).
pub(super) fn expand(template: &str, places: &Places, plugin_cache: &Path) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${env:") {
        out.push_str(&rest[..start]);
        let body = &rest[start + 6..];
        let mut depth = 1;
        let end = body.char_indices().find_map(|(i, c)| {
            depth += match c {
                '{' => 1,
                '}' => -1,
                _ => 0,
            };
            (depth == 0).then_some(i)
        });
        let Some(end) = end else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let (name, fallback) = body[..end].split_once('|').unwrap_or((&body[..end], ""));
        match std::env::var(name) {
            Ok(value) if !value.is_empty() => out.push_str(&value),
            _ => out.push_str(&expand(fallback, places, plugin_cache)),
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    out.replace("${workspace}", &places.workspace.to_string_lossy())
        .replace("${home}", &places.home.to_string_lossy())
        .replace("${plugin_cache}", &plugin_cache.to_string_lossy())
}
