//! `host secret`: values a plugin needs (API keys, tokens) kept out of
//! config files. One file per plugin, `<dir>/<plugin>.toml`, readable by
//! the user only (the folder too); a plugin sees a secret, as a variable,
//! only when its policy names it (`secrets = ["NAME"]`), read when its
//! grants are. A value is never logged, printed by `host list grants`, or
//! shown by `{:?}` ([`Secret`]).

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// A secret's value; `Debug` and `Display` never show it.
#[derive(Clone, PartialEq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// The value, for the one place that hands it on.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

/// The folder of secret files.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn at(dir: PathBuf) -> Store {
        Store { dir }
    }

    /// `$XDG_CONFIG_HOME/mcp-host/secrets` (`~/.config/mcp-host/secrets`).
    pub fn default_dir() -> PathBuf {
        dirs::config_dir()
            .unwrap_or_else(|| PathBuf::from(".config"))
            .join("mcp-host/secrets")
    }

    fn file(&self, plugin: &str) -> Result<PathBuf> {
        check(plugin, "plugin")?;
        Ok(self.dir.join(format!("{plugin}.toml")))
    }

    fn read(&self, plugin: &str) -> Result<BTreeMap<String, String>> {
        let file = self.file(plugin)?;
        match std::fs::read_to_string(&file) {
            // toml's own message quotes the broken line, which may hold a
            // value: only where it is goes into the error.
            Ok(text) => toml::from_str(&text).map_err(|e| {
                let line = e
                    .span()
                    .map(|at| text.bytes().take(at.start).filter(|b| *b == b'\n').count() + 1);
                anyhow::anyhow!(
                    "{} is not a secrets file{}: fix or remove it (`host secret set` rewrites it)",
                    file.display(),
                    line.map(|n| format!(" (line {n} does not parse)"))
                        .unwrap_or_default()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
        }
    }

    /// Written whole, readable by the user only, then renamed over the old.
    fn write(&self, plugin: &str, values: &BTreeMap<String, String>) -> Result<()> {
        let file = self.file(plugin)?;
        crate::platform::create_private_dir(&self.dir)
            .with_context(|| format!("cannot make {}", self.dir.display()))?;
        let partial = self.dir.join(format!(".{plugin}.toml.partial"));
        let _ = std::fs::remove_file(&partial);
        let text = toml::to_string(values).expect("secrets serialise");
        crate::platform::create_private_file(&partial)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&partial, &file))
            .with_context(|| format!("cannot write {}", file.display()))
    }

    pub fn set(&self, plugin: &str, name: &str, value: &str) -> Result<()> {
        check(name, "secret")?;
        if value.is_empty() {
            bail!("the value read from standard input is empty: nothing was stored");
        }
        let mut values = self.read(plugin)?;
        values.insert(name.to_string(), value.to_string());
        self.write(plugin, &values)
    }

    /// Whether there was one to remove.
    pub fn remove(&self, plugin: &str, name: &str) -> Result<bool> {
        let mut values = self.read(plugin)?;
        let was = values.remove(name).is_some();
        if was {
            self.write(plugin, &values)?;
        }
        Ok(was)
    }

    /// The names stored for `plugin`.
    pub fn names(&self, plugin: &str) -> Result<Vec<String>> {
        Ok(self.read(plugin)?.into_keys().collect())
    }

    /// The plugins with a secrets file.
    pub fn plugins(&self) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".toml")
                    .filter(|n| !n.starts_with('.'))
                    .map(String::from)
            })
            .collect();
        out.sort();
        out
    }

    /// Of `wanted`, the secrets stored for `plugin`; the names not stored
    /// (or unreadable) come back apart, to be told.
    pub fn for_plugin(
        &self,
        plugin: &str,
        wanted: &[String],
    ) -> (Vec<(String, Secret)>, Vec<String>) {
        if wanted.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let stored = self.read(plugin).unwrap_or_else(|e| {
            tracing::warn!(plugin, error = %format!("{e:#}"), "cannot read the plugin's secrets");
            BTreeMap::new()
        });
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for name in wanted {
            match stored.get(name) {
                Some(value) => found.push((name.clone(), Secret(value.clone()))),
                None => missing.push(name.clone()),
            }
        }
        (found, missing)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Names are variable names and file stems: plain characters only.
fn check(name: &str, what: &str) -> Result<()> {
    let plain = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with(['.', '-'])
        && name.chars().all(|c| {
            c.is_ascii_alphanumeric() || c == '_' || (what == "plugin" && "-.".contains(c))
        });
    if !plain {
        bail!("`{name}` cannot name a {what}: letters, digits and `_` only");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_kept_apart_per_plugin_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("secrets"));
        store.set("weather", "API_KEY", "s3cr3t-value").unwrap();
        store.set("weather", "OTHER", "x").unwrap();
        store.set("godot", "API_KEY", "another").unwrap();
        let (found, missing) = store.for_plugin("weather", &["API_KEY".into(), "NOT_SET".into()]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.expose(), "s3cr3t-value");
        assert_eq!(missing, ["NOT_SET"]);
        assert!(!format!("{found:?}").contains("s3cr3t"), "{found:?}");
        assert_eq!(store.names("weather").unwrap(), ["API_KEY", "OTHER"]);
        assert_eq!(store.plugins(), ["godot", "weather"]);
        assert!(store.remove("weather", "OTHER").unwrap());
        assert!(!store.remove("weather", "OTHER").unwrap());
        for bad in ["../x", "A B", "", "a=b"] {
            assert!(store.set("weather", bad, "v").is_err(), "{bad}");
            assert!(store.set(bad, "NAME", "v").is_err(), "{bad}");
        }
        assert!(store.set("weather", "EMPTY", "").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn only_the_user_can_read_them() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("secrets"));
        store.set("weather", "API_KEY", "v").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(store.dir()), 0o700);
        assert_eq!(mode(&store.dir().join("weather.toml")), 0o600);
    }
}
