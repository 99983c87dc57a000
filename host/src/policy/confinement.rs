//! What a plugin's programs may touch (issue 71): its grants as a
//! [`Confinement`] the kernel enforces on every program the `process` and
//! `pty` capabilities start for it, and their whole tree.
//!
//! - **Write**: its `fs.write` roots, `process.write` (a runner's caches,
//!   an agent's state; made if missing), the terminal and null devices,
//!   and a private temporary folder per call (added where the program is
//!   started, [`crate::caps::spawn`]).
//! - **Read**: everything, except what is hidden: credential stores, the
//!   host's secrets and cache, every plugin's Cofer secret file. Its
//!   `fs.read`/`fs.write` roots and `process.read` are read even there.
//! - **TCP**: `process.connect` and `process.bind` when set; else any port.

use std::path::{Path, PathBuf};

use timebox::confine::Confinement;

use super::tables::Port;
use super::{Config, Places, PluginPolicy, expand, expand_path, expand_paths};

/// Devices any program writes or talks to: its output thrown away, its
/// terminal, shared memory.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// Beneath the home folder: where credentials live (keys, tokens, cloud
/// logins, registry logins, git's and the package managers' stored
/// passwords).
const HIDDEN_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".git-credentials",
    ".netrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gh",
    ".config/gcloud",
    ".config/containers/auth.json",
    ".local/share/keyrings",
    ".password-store",
];

impl Config {
    /// The confinement of `plugin`'s programs, or `None` when its
    /// `process.confine` is false. `read_roots`/`write_roots` are its
    /// resolved `fs` roots.
    pub(super) fn confinement(
        &self,
        p: Option<&PluginPolicy>,
        places: &Places,
        plugin_cache: &Path,
        read_roots: &[PathBuf],
        write_roots: &[PathBuf],
    ) -> Option<Confinement> {
        let process = p.map(|p| &p.process);
        if process.and_then(|p| p.confine) == Some(false) {
            return None;
        }
        let list = |f: fn(&super::ProcessPolicy) -> &Vec<String>| -> Vec<PathBuf> {
            process
                .map(f)
                .into_iter()
                .flatten()
                .flat_map(|t| expand_paths(t, places, plugin_cache))
                .collect()
        };
        let mut write: Vec<PathBuf> = write_roots.to_vec();
        write.extend(list(|p| &p.write));
        write.extend(DEVICES.iter().map(PathBuf::from));
        let mut read = vec![PathBuf::from("/")];
        read.extend(read_roots.iter().cloned());
        read.extend(list(|p| &p.read));
        let ports = |f: fn(&super::ProcessPolicy) -> &Option<Vec<Port>>| {
            process.and_then(|p| f(p).as_ref()).map(|ports| {
                ports
                    .iter()
                    .filter_map(|port| port_of(port, places, plugin_cache))
                    .collect()
            })
        };
        Some(Confinement {
            write,
            read,
            hidden: self.hidden(places),
            connect: ports(|p| &p.connect),
            bind: ports(|p| &p.bind),
        })
    }

    /// What no plugin's program reads unless granted by name.
    fn hidden(&self, places: &Places) -> Vec<PathBuf> {
        let mut hidden: Vec<PathBuf> = HIDDEN_IN_HOME.iter().map(|h| places.home.join(h)).collect();
        hidden.push(places.cache_dir.clone());
        // Registry logins wherever Podman and the host look for them.
        hidden.extend(crate::install::auth::auth_files());
        hidden.extend(
            ["DOCKER_CONFIG", "GNUPGHOME"]
                .iter()
                .filter_map(|v| std::env::var_os(v).filter(|v| !v.is_empty()))
                .map(PathBuf::from),
        );
        if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
            hidden.push(Path::new(&run).join("containers"));
        }
        if let Some(config) = dirs::config_dir() {
            hidden.push(config.join("gh"));
        }
        // Every plugin's Cofer secret references: they name where the
        // values are, and some hold them.
        for (name, p) in &self.plugins {
            if let Some(file) = &p.containers.secrets {
                hidden.push(expand_path(file, places, &places.plugin_cache(name)));
            }
        }
        hidden.sort();
        hidden.dedup();
        hidden
    }
}

/// A port setting's port: a number, or its text (placeholders expanded)
/// as [`port_in`] reads it.
fn port_of(port: &Port, places: &Places, plugin_cache: &Path) -> Option<u16> {
    match port {
        Port::Number(n) => Some(*n),
        Port::Text(text) => port_in(&expand(text, places, plugin_cache)),
    }
}

/// The port a text names: a number, or a URL's port (its scheme's when
/// it names none); nothing for an empty text or anything else.
fn port_in(text: &str) -> Option<u16> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    text.parse()
        .ok()
        .or_else(|| reqwest::Url::parse(text).ok()?.port_or_known_default())
}

/// Refuse a `process.connect`/`process.bind` entry written in the file
/// that is neither a port nor a URL, saying which. One taken from a
/// variable (`${env:PI_BASE_URL|}`) that is neither adds no port: the
/// plugin that reads the same variable says what is wrong with it.
pub(super) fn check_ports(plugin: &str, process: &super::ProcessPolicy) -> anyhow::Result<()> {
    for (key, ports) in [
        ("process.connect", &process.connect),
        ("process.bind", &process.bind),
    ] {
        for port in ports.iter().flatten() {
            if let Port::Text(text) = port
                && !text.contains("${")
                && !text.trim().is_empty()
                && port_in(text).is_none()
            {
                anyhow::bail!(
                    "[plugins.{plugin}] {key}: `{text}` is neither a port nor a URL with one: give a \
                     number (443) or a URL (https://host:8443)"
                );
            }
        }
    }
    Ok(())
}
