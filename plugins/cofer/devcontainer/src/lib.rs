//! A repository's `devcontainer.json` (the Development Containers spec)
//! read as the project defaults of a new Cofer environment, when the
//! person's own `.git/cofer/config.json` does not give them.
//!
//! Honoured: `image`; `build.dockerfile` with `build.context` (the image is
//! built by the engine through the host's `containers.build`, its context
//! inside the repository); `containerEnv`
//! and `remoteEnv` (one environment here: both are the container's);
//! `onCreateCommand` and `postCreateCommand` as setup commands, in that
//! order; `forwardPorts` published like a service's. Everything else the
//! file says (features, mounts, runArgs, …) is listed as not honoured,
//! never dropped silently.
//!
//! The file is the repository's, which agents' branches change: it is
//! data. Nothing in it runs on this machine; paths stay inside the
//! repository; sizes are bounded.

use std::path::{Component, Path};

use serde_json::{Map, Value};

/// Where the spec lets the file be, first found wins.
pub const PLACES: [&str; 2] = [".devcontainer/devcontainer.json", ".devcontainer.json"];
/// A devcontainer.json is a page of text.
pub const MAX_BYTES: u64 = 256 * 1024;
/// Arrays and objects inside each other: the parser recurses.
const MAX_NESTING: usize = 64;
/// Commands, variables and ports each: more is not a project's defaults.
const MAX_ITEMS: usize = 256;

/// What the file gives a new environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Devcontainer {
    /// The file, relative to the repository.
    pub file: String,
    pub image: Option<String>,
    pub build: Option<Build>,
    /// `KEY=VALUE`, containerEnv then remoteEnv.
    pub envs: Vec<String>,
    /// onCreateCommand's, then postCreateCommand's, each for `sh -c`.
    pub setup_commands: Vec<String>,
    pub forward_ports: Vec<u16>,
    /// Properties (or parts of them) not honoured, each with why.
    pub not_honoured: Vec<String>,
}

/// `build`: a Dockerfile and its context, both relative to the repository.
#[derive(Debug, Clone, PartialEq)]
pub struct Build {
    pub dockerfile: String,
    pub context: String,
}

impl Devcontainer {
    /// Fill the defaults a person's config leaves out (no image, no
    /// commands, no variables) with this file's, field by field: the
    /// config wins wherever it says something.
    pub fn fill(
        &self,
        image: &mut Option<String>,
        setup_commands: &mut Vec<String>,
        envs: &mut Vec<String>,
    ) {
        if image.is_none() {
            image.clone_from(&self.image);
        }
        if setup_commands.is_empty() {
            setup_commands.clone_from(&self.setup_commands);
        }
        if envs.is_empty() {
            envs.clone_from(&self.envs);
        }
    }
}

/// The repository's devcontainer.json, if it has one.
pub fn read(repo: &Path) -> Result<Option<Devcontainer>, String> {
    for place in PLACES {
        let path = repo.join(place);
        let meta = match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {place}: {e}")),
            Ok(meta) => meta,
        };
        // A link could lead anywhere on this machine.
        if !meta.is_file() {
            return Err(format!("{place} is not a plain file (a link or a folder)"));
        }
        if meta.len() > MAX_BYTES {
            return Err(format!("{place} is larger than {MAX_BYTES} bytes"));
        }
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("cannot read {place}: {e}"))?;
        return parse(place, &text).map(Some);
    }
    Ok(None)
}

/// The file `place` (relative to the repository) holding `text`.
pub fn parse(place: &str, text: &str) -> Result<Devcontainer, String> {
    if nesting(text) > MAX_NESTING {
        return Err(format!(
            "{place} nests arrays and objects more than {MAX_NESTING} deep"
        ));
    }
    let value: Value = jsonc_parser::parse_to_serde_value(text, &Default::default())
        .map_err(|e| format!("{place} is not JSON with comments: {e}"))?;
    let Value::Object(object) = value else {
        return Err(format!("{place} does not hold an object"));
    };
    let base = Path::new(place).parent().unwrap_or(Path::new(""));
    let mut d = Devcontainer {
        file: place.to_string(),
        ..Devcontainer::default()
    };
    for (key, value) in &object {
        let what = |why: &str| format!("{place}: `{key}` {why}");
        match key.as_str() {
            "image" => d.image = Some(image(value).map_err(|w| what(&w))?),
            "build" => {
                d.build = Some(build(base, value, &mut d.not_honoured).map_err(|w| what(&w))?)
            }
            "containerEnv" | "remoteEnv" => d
                .envs
                .extend(envs(key, value, &mut d.not_honoured).map_err(|w| what(&w))?),
            "forwardPorts" => d.forward_ports = ports(value).map_err(|w| what(&w))?,
            // Read in this order below, whatever the file's order.
            "onCreateCommand" | "postCreateCommand" => {}
            // Words for people and tools, no effect on the container.
            "name" | "$schema" | "customizations" => {}
            other => d
                .not_honoured
                .push(format!("{other} (not supported by Cofer)")),
        }
    }
    for key in ["onCreateCommand", "postCreateCommand"] {
        if let Some(value) = object.get(key) {
            let commands = commands(value).map_err(|w| format!("{place}: `{key}` {w}"))?;
            d.setup_commands.extend(commands);
        }
    }
    if d.image.is_some() && d.build.is_some() {
        return Err(format!("{place} names both `image` and `build`: keep one"));
    }
    for (what, n) in [
        ("variables", d.envs.len()),
        ("commands", d.setup_commands.len()),
        ("ports", d.forward_ports.len()),
    ] {
        if n > MAX_ITEMS {
            return Err(format!(
                "{place} gives {n} {what}; at most {MAX_ITEMS} are read"
            ));
        }
    }
    Ok(d)
}

/// How deep `[` and `{` go outside strings (brackets in comments count
/// too: an over-count only refuses a file that is odd anyway).
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for c in text.chars() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (true, ..) => {}
            (false, _, '"') => in_string = true,
            (false, _, '[' | '{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, _, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn image(value: &Value) -> Result<String, String> {
    let image = value.as_str().ok_or("is not a string")?.trim();
    if image.is_empty() || image.starts_with('-') || image.contains(char::is_whitespace) {
        return Err(format!("`{image}` is not an image reference"));
    }
    Ok(image.to_string())
}

fn build(base: &Path, value: &Value, not_honoured: &mut Vec<String>) -> Result<Build, String> {
    let object = value.as_object().ok_or("is not an object")?;
    let dockerfile = object
        .get("dockerfile")
        .and_then(Value::as_str)
        .ok_or("has no `dockerfile`")?;
    let context = object.get("context").and_then(Value::as_str).unwrap_or(".");
    for key in object.keys() {
        if !matches!(key.as_str(), "dockerfile" | "context") {
            not_honoured.push(format!("build.{key} (not supported by Cofer)"));
        }
    }
    Ok(Build {
        dockerfile: inside(base, dockerfile)?,
        context: inside(base, context)?,
    })
}

/// `path`, relative to the file's folder `base`, as a path relative to the
/// repository; one that leaves it is refused.
fn inside(base: &Path, path: &str) -> Result<String, String> {
    if Path::new(path).is_absolute() {
        return Err(format!(
            "`{path}` is absolute: write it relative to the file"
        ));
    }
    let mut parts: Vec<String> = Vec::new();
    for component in base.join(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(format!("`{path}` leads out of the repository"));
                }
            }
            _ => return Err(format!("`{path}` is not a relative path")),
        }
    }
    Ok(if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    })
}

fn envs(key: &str, value: &Value, not_honoured: &mut Vec<String>) -> Result<Vec<String>, String> {
    let object: &Map<String, Value> = value.as_object().ok_or("is not an object")?;
    let mut envs = Vec::new();
    for (name, value) in object {
        let value = value
            .as_str()
            .ok_or(format!("gives `{name}` a value that is not a string"))?;
        if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0') {
            return Err(format!("names a variable `{name}` that cannot be one"));
        }
        // ${localEnv:…} would put this machine's variables in the container.
        if value.contains("${") {
            not_honoured.push(format!(
                "{key}.{name} (variables such as ${{localEnv:…}} are not substituted)"
            ));
            continue;
        }
        envs.push(format!("{name}={value}"));
    }
    Ok(envs)
}

/// A lifecycle command: a string for a shell, an array run as it is
/// (quoted for the shell here), or an object of named commands (the spec
/// runs them side by side; here one after another, in the file's order).
fn commands(value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::String(command) => Ok(vec![command.clone()]),
        Value::Array(argv) => {
            let words: Option<Vec<&str>> = argv.iter().map(Value::as_str).collect();
            let words = words.ok_or("is an array of something other than strings")?;
            if words.is_empty() {
                return Ok(Vec::new());
            }
            Ok(vec![
                words
                    .iter()
                    .map(|w| quoted(w))
                    .collect::<Vec<_>>()
                    .join(" "),
            ])
        }
        Value::Object(named) => named.values().try_fold(Vec::new(), |mut all, v| {
            all.extend(commands(v)?);
            Ok(all)
        }),
        _ => Err("is neither a string, an array nor an object".into()),
    }
}

/// `word` as one shell word.
fn quoted(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

fn ports(value: &Value) -> Result<Vec<u16>, String> {
    let items = value.as_array().ok_or("is not an array")?;
    let mut ports = Vec::new();
    for item in items {
        let port = match item {
            Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
            // "service:port" forwards another container's port: not one
            // of this container's.
            Value::String(s) if !s.contains(':') => s.parse().ok(),
            _ => None,
        };
        match port {
            Some(port) if port > 0 => ports.push(port),
            _ => {
                return Err(format!(
                    "gives `{item}`, which is not a port of this container (1-65535)"
                ));
            }
        }
    }
    ports.sort_unstable();
    ports.dedup();
    Ok(ports)
}

#[cfg(test)]
mod tests;
