//! `plugins.lock`, beside the plugins: what `host install` put there,
//! from where, with which digest, so `host install` with no source puts
//! exactly the same plugins on another machine.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub const FILE: &str = "plugins.lock";

#[derive(Default, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    #[serde(default, rename = "plugin", skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<Entry>,
}

#[derive(Clone, Serialize, Deserialize, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The plugin's name (its policy table), which is also its file's stem.
    pub name: String,
    /// What was installed, as given: `oci://…`, `https://…` or a path.
    pub source: String,
    /// `sha256:<hex>` of the component's bytes.
    pub digest: String,
    /// For a registry: the manifest it came in, so a tag moved since does
    /// not change what is installed again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// The trusted key whose signature it carried, when it was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    /// The digests this name held from the same source before, oldest
    /// first (at most [`REMEMBERED`]): `host update` refuses to go back
    /// to one unless asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<String>,
}

/// How many replaced builds an entry remembers.
pub const REMEMBERED: usize = 32;

impl Entry {
    /// The builds replaced once `digest` from `source` takes this entry's
    /// place: this one's added when it is replaced by another build of the
    /// same source; `digest` itself is not among them.
    pub fn replaced_by(&self, source: &str, digest: &str) -> Vec<String> {
        if self.source != source {
            return Vec::new();
        }
        let mut replaced: Vec<String> = self
            .replaced
            .iter()
            .filter(|d| *d != digest && **d != self.digest)
            .cloned()
            .collect();
        if self.digest != digest {
            replaced.push(self.digest.clone());
        }
        let extra = replaced.len().saturating_sub(REMEMBERED);
        replaced.drain(..extra);
        replaced
    }
}

impl Lock {
    pub fn path(plugins_dir: &Path) -> PathBuf {
        plugins_dir.join(FILE)
    }

    /// The lock file of `plugins_dir`; empty when there is none.
    pub fn read(plugins_dir: &Path) -> Result<Lock> {
        let path = Lock::path(plugins_dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).with_context(|| {
                format!(
                    "{} is not a lock file this host wrote: fix or remove it",
                    path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Lock::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Written whole beside the old one, then renamed over it: a reader
    /// sees the old lock or the new one.
    pub fn write(&self, plugins_dir: &Path) -> Result<()> {
        let path = Lock::path(plugins_dir);
        let text = format!(
            "# Written by `host install`: what it put in this folder. `host install` with\n\
             # no source installs exactly these again (same digests).\n\n{}",
            toml::to_string(self).expect("a lock serialises")
        );
        let partial = plugins_dir.join(format!(".{FILE}.partial"));
        std::fs::write(&partial, text)
            .and_then(|()| std::fs::rename(&partial, &path))
            .with_context(|| format!("cannot write {}", path.display()))
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.plugins.iter().find(|e| e.name == name)
    }

    /// `entry` in place of any entry of the same name.
    pub fn put(&mut self, entry: Entry) {
        self.remove(&entry.name);
        self.plugins.push(entry);
        self.plugins.sort_by(|a, b| a.name.cmp(&b.name));
    }

    pub fn remove(&mut self, name: &str) -> Option<Entry> {
        let at = self.plugins.iter().position(|e| e.name == name)?;
        Some(self.plugins.remove(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Lock::read(dir.path()).unwrap().plugins.is_empty());
        let mut lock = Lock::default();
        let entry = |name: &str| Entry {
            name: name.into(),
            source: format!("oci://127.0.0.1:5000/{name}:1"),
            digest: "sha256:00".into(),
            manifest: Some("sha256:11".into()),
            signer: None,
            replaced: vec!["sha256:ff".into()],
        };
        lock.put(entry("b"));
        lock.put(entry("a"));
        lock.put(entry("b"));
        lock.write(dir.path()).unwrap();
        let back = Lock::read(dir.path()).unwrap();
        assert_eq!(back.plugins, [entry("a"), entry("b")]);
        std::fs::write(Lock::path(dir.path()), "[[plugin]]\nname = 1\n").unwrap();
        let err = format!("{:#}", Lock::read(dir.path()).unwrap_err());
        assert!(err.contains("fix or remove it"), "{err}");
    }
}
