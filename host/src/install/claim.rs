//! Which name an installed plugin takes, and whether it may take it.
//!
//! A plugin's name keys everything the user gave it: its policy table
//! (grants), its secrets and its cache. So the name comes from where the
//! user installs it (the source's last path element, or `--name`), never
//! from the artifact alone: a component that declares another name is
//! refused until the user names it so. A name already installed from
//! another source is kept unless the user says `--replace`, and a name
//! that holds grants is given to a new source only once the user has seen
//! them and said yes (`--yes`, or at the prompt).

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::Lock;
use crate::catalog::wasm_files;
use crate::declared::declared;
use crate::policy::Grants;

/// What the user said about the name (`host install`'s flags).
#[derive(Default, Clone, Debug)]
pub struct Choice {
    /// `--name`: the name to install under, in place of the source's.
    pub name: Option<String>,
    /// `--replace`: a plugin of this name from another source may go.
    pub replace: bool,
    /// `--yes`: the grants the name holds are accepted.
    pub yes: bool,
}

/// The name `bytes` from `text` are installed under: the user's choice or
/// the source's, which the component must not contradict.
pub fn name(choice: &Choice, source_name: &str, text: &str, bytes: &[u8]) -> Result<String> {
    is_component(bytes, text)?;
    let declared = declared(bytes)
        .map_err(|e| anyhow::anyhow!("{text} is not a WebAssembly component: {e:#}"))?
        .name;
    let name = choice
        .name
        .clone()
        .unwrap_or_else(|| source_name.to_string());
    check_name(&name, text)?;
    match declared {
        Some(own) if own != name => bail!(
            "{text} declares itself as plugin `{own}`, but would be installed as `{name}`: a plugin's \
             name keys its grants, secrets and cache, so it is never taken from the artifact alone; \
             if it is meant to be `{own}`, say so with `--name {own}`"
        ),
        _ => Ok(name),
    }
}

/// Refuse, in a sentence, what is no WebAssembly component at all (the
/// parser's own message dumps the bytes it expected) or a core module.
pub fn is_component(bytes: &[u8], text: &str) -> Result<()> {
    const MAGIC: &[u8] = b"\0asm";
    if !bytes.starts_with(MAGIC) {
        bail!(
            "{text} is not a WebAssembly component (a component's file starts with `\\0asm`): give a \
             plugin's .wasm, a registry reference (oci://…) or the name of an installed plugin"
        );
    }
    // Bytes 4..8: version 1 is a core module; a component's layer is 1.
    if bytes.get(4..8) == Some(&[1, 0, 0, 0]) {
        bail!(
            "{text} is a core WebAssembly module, not a component: build the plugin with \
             `cargo component build` or `cargo build --target wasm32-wasip2`"
        );
    }
    Ok(())
}

/// A name is a file stem and a policy table key: plain characters only.
pub fn check_name(name: &str, text: &str) -> Result<()> {
    let plain = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if !plain {
        bail!(
            "{text} would be named `{name}`, which cannot name a plugin file: letters, digits, `_`, `.` \
             and `-` only (choose one with `--name`)"
        );
    }
    Ok(())
}

/// Whether `name` may be (re)installed from `text` into `dir`, as
/// `file`; `Ok(true)` when it is new to the folder or comes from the
/// source it came from before (its grants were accepted then).
pub fn may_take(dir: &Path, name: &str, file: &Path, text: &str, choice: &Choice) -> Result<bool> {
    if let Some(other) = claimed_by_another(dir, name, file)? {
        bail!(
            "{} already serves a plugin named `{name}`: `host uninstall {name}` or remove that file first",
            other.display()
        );
    }
    let lock = Lock::read(dir)?;
    let before = match lock.get(name) {
        Some(entry) if entry.source == text => return Ok(false),
        Some(entry) => format!("from {}", entry.source),
        None if file.exists() => format!("as {} (not by `host install`)", file.display()),
        None => return Ok(true),
    };
    if !choice.replace {
        bail!(
            "plugin `{name}` is already installed {before}; {text} was not installed. To put it in \
             that plugin's place (it takes over `{name}`'s grants, secrets and cache) add `--replace`; \
             to keep both, install it under another name with `--name`"
        );
    }
    Ok(true)
}

/// Asks the user to accept what `grants` hold, unless they hold nothing
/// or `--yes` said so; refuses when nobody can be asked.
pub fn accept(grants: &Grants, text: &str, choice: &Choice) -> Result<()> {
    let lines = described(grants);
    if lines.is_empty() || choice.yes {
        return Ok(());
    }
    let name = &grants.plugin;
    let mut shown = format!("plugin `{name}` would hold, under your policy:\n");
    for line in &lines {
        shown.push_str(&format!("  {line}\n"));
    }
    match ask(&format!("{shown}Give them to {text}? [y/N] ")) {
        None => bail!(
            "{shown}{text} was not installed: these grants are given to whatever is named `{name}`; \
             add `--yes` to accept them for this artifact, or install it under another name with `--name`"
        ),
        Some(false) => bail!("{text} was not installed: its grants were not accepted"),
        Some(true) => Ok(()),
    }
}

/// `question` asked on the terminal: whether the person said yes; `None`
/// when nobody can be asked (standard input is no terminal).
pub fn ask(question: &str) -> Option<bool> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return None;
    }
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = stdin.lock().read_line(&mut answer);
    Some(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
}

/// One line per grant that gives power (nothing for a plugin with none):
/// what a user accepts. Secret names only, never values.
pub fn described(g: &Grants) -> Vec<String> {
    let paths = |roots: &[PathBuf]| {
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    [
        ("capabilities", g.capabilities.join(", ")),
        ("process.programs", g.programs.join(", ")),
        ("process.env", g.env.join(", ")),
        ("fs.read", paths(&g.read_roots)),
        ("fs.write", paths(&g.write_roots)),
        ("containers.images", g.images.join(", ")),
        ("containers.pull", g.pull.join(", ")),
        ("containers.commit", g.commit.join(", ")),
        (
            "containers.engines",
            g.engines
                .iter()
                .map(|e| e.name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ("secrets", g.secret_names.join(", ")),
    ]
    .into_iter()
    .filter(|(_, value)| !value.is_empty())
    .map(|(key, value)| format!("{key}: {value}"))
    .collect()
}

/// Another `*.wasm` of `dir` (not `file`) that loads as plugin `name`.
fn claimed_by_another(dir: &Path, name: &str, file: &Path) -> Result<Option<PathBuf>> {
    for (stem, path) in wasm_files(dir)? {
        if path == file {
            continue;
        }
        let declared_name = std::fs::read(&path)
            .ok()
            .and_then(|b| declared(&b).ok())
            .and_then(|d| d.name);
        if declared_name.as_deref().unwrap_or(&stem) == name {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain() {
        for good in ["hello", "run_test", "godot.docs", "a-b"] {
            assert!(check_name(good, "x").is_ok(), "{good}");
        }
        for bad in ["", ".hidden", "../x", "a/b", "a b", "-x", &"x".repeat(65)] {
            assert!(check_name(bad, "x").is_err(), "{bad}");
        }
    }
}
