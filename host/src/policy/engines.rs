//! `containers` in a plugin's policy: the images it may run and the Podman
//! engines (this machine's, or named ones elsewhere) it may use.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainersPolicy {
    /// Images the plugin may run: exact names, `prefix*`, or `*`.
    #[serde(default)]
    pub images: Vec<String>,
    /// Images the host may pull from their registry when they are not in
    /// local storage (same patterns). Default none: a missing image is
    /// refused with how to get it.
    #[serde(default)]
    pub pull: Vec<String>,
    /// Image names the plugin may write with `commit` (same patterns).
    /// Default none.
    #[serde(default)]
    pub commit: Vec<String>,
    /// Memory limit of each container, MiB (default 4096).
    pub memory_mb: Option<u64>,
    /// Processes a container may have at once (default 4096).
    pub pids: Option<u64>,
    /// Podman services on other machines the plugin may use besides the
    /// local one, by name: `name = "tcp://10.0.0.5:8888"`, or a table with
    /// `url` and the `address` its published ports are reached at.
    #[serde(default)]
    pub engines: BTreeMap<String, EngineSetting>,
    /// The file of secret references an exec may ask for by scope
    /// (`secrets-of`), written by the person (`cofer config secret`); it
    /// must lie outside every folder a plugin may write.
    pub secrets: Option<String>,
}

/// One entry of `containers.engines`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum EngineSetting {
    Url(String),
    Full(EngineTable),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineTable {
    url: String,
    /// Where its published ports are reached (default: the URL's host).
    address: Option<String>,
}

/// A Podman service on another machine, as the policy names it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteEngine {
    pub name: String,
    /// `tcp://host:port` or `unix:///path` (a forwarded socket).
    pub url: String,
    /// Where ports published there are reached from here.
    pub address: String,
}

impl EngineSetting {
    /// The engine `name` this entry describes, or what is wrong with it.
    pub(super) fn resolve(&self, name: &str) -> Result<RemoteEngine, String> {
        let (url, address) = match self {
            EngineSetting::Url(url) => (url.clone(), None),
            EngineSetting::Full(t) => (t.url.clone(), t.address.clone()),
        };
        if name == LOCAL_ENGINE
            || name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "`{name}` cannot name an engine: use letters, digits, `-` and `_` (`{LOCAL_ENGINE}` is \
                 this machine's own)"
            ));
        }
        let host = if let Some(rest) = url.strip_prefix("tcp://") {
            let authority = rest.split('/').next().unwrap_or_default();
            match authority.rsplit_once(':') {
                Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                    Some(host.trim_matches(['[', ']']).to_string())
                }
                _ => {
                    return Err(format!(
                        "`{url}` has no port: write tcp://<host>:<port>, as `podman system service` listens"
                    ));
                }
            }
        } else if url.starts_with("unix:///") {
            None
        } else {
            return Err(format!(
                "`{url}`: the host reaches Podman services by tcp:// or unix:// (for ssh://, forward the \
                 engine's socket with `ssh -nNT -L /run/user/$UID/lab.sock:/run/podman/podman.sock \
                 user@machine` and name unix:///run/user/$UID/lab.sock, with `address`)"
            ));
        };
        let address = address.or(host).ok_or_else(|| {
            format!(
                "`{url}` is a socket here, so where its published ports are reached is unknown: \
                 write it as {{ url = \"{url}\", address = \"<the engine machine's address>\" }}"
            )
        })?;
        Ok(RemoteEngine {
            name: name.to_string(),
            url,
            address,
        })
    }
}

/// The engine name that means this machine's own Podman.
pub const LOCAL_ENGINE: &str = "local";
