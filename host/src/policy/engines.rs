//! `containers` in a plugin's policy: the images it may run and the Podman
//! engines (this machine's, or named ones elsewhere) it may use.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::connections::Surroundings;

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
    /// Named groups of engines: `team = ["lab", "local"]`. A new
    /// environment asked on `team` goes to the member with the most room.
    #[serde(default)]
    pub pools: BTreeMap<String, Vec<String>>,
    /// The file of secret references an exec may ask for by scope
    /// (`secrets-of`), written by the person (`cofer config secret`); it
    /// must lie outside every folder a plugin may write.
    pub secrets: Option<String>,
}

impl ContainersPolicy {
    /// What is wrong with its engines and pools, as the config loads
    /// (the folders plugins write are known only with the places: those
    /// checks come with [`Self::resolve_engines`]).
    pub(super) fn check(&self) -> Result<(), String> {
        if let Some((engine, why)) = self.resolve_engines(&[]).1.into_iter().next() {
            return Err(format!("engines.{engine}: {why}"));
        }
        self.check_pools().map_err(|why| format!("pools.{why}"))
    }

    /// Its engines, and those refused here with why (a key or known_hosts
    /// in a folder of `untrusted`).
    pub(super) fn resolve_engines(
        &self,
        untrusted: &[PathBuf],
    ) -> (Vec<RemoteEngine>, Vec<(String, String)>) {
        let (home, config_home) = person_folders();
        let around = Surroundings {
            home: &home,
            config_home: &config_home,
            untrusted,
        };
        let (mut engines, mut refused) = (Vec::new(), Vec::new());
        for (name, setting) in &self.engines {
            match setting.resolve(name, &around) {
                Ok(engine) => engines.push(engine),
                Err(why) => refused.push((name.clone(), why)),
            }
        }
        (engines, refused)
    }

    /// Pools name engines of this policy, and are not engines themselves.
    fn check_pools(&self) -> Result<(), String> {
        for (pool, members) in &self.pools {
            check_name(pool).map_err(|why| format!("{pool}: {why}"))?;
            if self.engines.contains_key(pool) {
                return Err(format!(
                    "{pool}: an engine has that name too: name the pool otherwise"
                ));
            }
            if members.is_empty() {
                return Err(format!("{pool}: name at least one engine"));
            }
            for member in members {
                if member != LOCAL_ENGINE && !self.engines.contains_key(member) {
                    return Err(format!(
                        "{pool}: `{member}` is not an engine of this plugin: name it under \
                         containers.engines, or use `{LOCAL_ENGINE}` for this machine's"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The person's home and config folder (`$XDG_CONFIG_HOME`), where ssh
/// and Podman keep what reaches other machines.
fn person_folders() -> (PathBuf, PathBuf) {
    let home = dirs::home_dir().unwrap_or_else(|| PathBuf::from("/"));
    let config = dirs::config_dir().unwrap_or_else(|| home.join(".config"));
    (home, config)
}

/// One entry of `containers.engines`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum EngineSetting {
    Url(String),
    Full(EngineTable),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineTable {
    /// `ssh://user@host[:port]/path/to/podman.sock`, `tcp://…` or `unix://…`.
    url: Option<String>,
    /// One of the person's Podman system connections, by name, instead
    /// of `url` (`podman system connection list`).
    connection: Option<String>,
    /// Where its published ports are reached (default: the URL's host).
    address: Option<String>,
    /// The ssh key to log in with (default: the agent's keys and ssh's own
    /// defaults).
    identity: Option<String>,
    /// The known_hosts file the engine's host key is checked against
    /// (default: `~/.ssh/known_hosts`).
    known_hosts: Option<String>,
    /// `tcp://` to another machine: an unauthenticated API that is root
    /// there. Refused unless this says the network is the person's own.
    #[serde(default)]
    insecure: bool,
}

/// A Podman service on another machine, as the policy names it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteEngine {
    pub name: String,
    /// `ssh://…`, `tcp://host:port` or `unix:///path` (a forwarded socket).
    pub url: String,
    /// Where ports published there are reached from here.
    pub address: String,
    /// How to reach it when `url` is `ssh://`.
    pub ssh: Option<SshTarget>,
}

/// An engine's socket on a machine reached with ssh: everything the
/// host's `ssh` is told, so that nothing in an ssh config file (which the
/// host does not read) chooses a program, a proxy or a key.
#[derive(Debug, Clone, PartialEq)]
pub struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    pub port: u16,
    /// The Podman socket's path on that machine.
    pub socket: String,
    pub identity: Option<PathBuf>,
    pub known_hosts: PathBuf,
}

impl SshTarget {
    /// The target on one line: its URL with the key and known_hosts as
    /// query parameters, for a record another process reads back
    /// ([`Self::from_record`]): a host's watchdog ending its runs there.
    pub fn record(&self) -> String {
        use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
        let enc = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
        let user = self
            .user
            .as_deref()
            .map(|u| format!("{}@", enc(u)))
            .unwrap_or_default();
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let mut line = format!(
            "ssh://{user}{host}:{}{}?known_hosts={}",
            self.port,
            self.socket
                .split('/')
                .map(enc)
                .collect::<Vec<_>>()
                .join("/"),
            enc(&self.known_hosts.display().to_string())
        );
        if let Some(identity) = &self.identity {
            line.push_str(&format!(
                "&identity={}",
                enc(&identity.display().to_string())
            ));
        }
        line
    }

    /// What [`Self::record`] wrote.
    pub fn from_record(line: &str) -> Result<SshTarget, String> {
        let mut parsed = url::Url::parse(line).map_err(|e| format!("`{line}`: {e}"))?;
        let mut known_hosts = None;
        let mut identity = None;
        for (key, value) in parsed.query_pairs() {
            match key.as_ref() {
                "known_hosts" => known_hosts = Some(PathBuf::from(value.as_ref())),
                "identity" => identity = Some(PathBuf::from(value.as_ref())),
                _ => {}
            }
        }
        parsed.set_query(None);
        let known_hosts = known_hosts.ok_or_else(|| format!("`{line}` names no known_hosts"))?;
        ssh_target(parsed.as_str(), identity, known_hosts)
    }
}

impl EngineSetting {
    /// The engine `name` this entry describes, or what is wrong with it.
    pub(super) fn resolve(
        &self,
        name: &str,
        around: &Surroundings,
    ) -> Result<RemoteEngine, String> {
        let table = match self {
            EngineSetting::Url(url) => EngineTable {
                url: Some(url.clone()),
                ..EngineTable::default()
            },
            EngineSetting::Full(t) => t.clone(),
        };
        check_name(name)?;
        let (url, identity) = match (&table.url, &table.connection) {
            (Some(url), None) => (url.clone(), None),
            (None, Some(connection)) => {
                let found = super::connections::find(connection, around)?;
                (found.uri, found.identity)
            }
            _ => {
                return Err(
                    "write either `url` or `connection` (a Podman system connection's name)".into(),
                );
            }
        };
        let identity = table.identity.clone().map(PathBuf::from).or(identity);
        let trusted = |what: &str, path: &Path| -> Result<(), String> {
            match around.untrusted.iter().find(|root| path.starts_with(root)) {
                Some(root) => Err(format!(
                    "its {what} {} lies in {}, which a plugin or a container may write: keep it \
                     where only you write (such as ~/.ssh)",
                    path.display(),
                    root.display()
                )),
                None => Ok(()),
            }
        };
        let (host, ssh) = if let Some(rest) = url.strip_prefix("tcp://") {
            let host = tcp_host(&url, rest)?;
            if !table.insecure && !is_loopback(&host) {
                return Err(format!(
                    "`{url}` is Podman's API without a login or encryption: whoever reaches that \
                     port is root on {host}. Reach it over ssh (`ssh://user@{host}/run/podman/podman.sock`, \
                     or `{{ connection = \"<name>\" }}` for a `podman system connection`), or, on a \
                     network only you reach, write `{{ url = \"{url}\", insecure = true }}`"
                ));
            }
            (Some(host), None)
        } else if url.starts_with("unix:///") {
            (None, None)
        } else if url.starts_with("ssh://") {
            let known_hosts = table.known_hosts.clone().map_or_else(
                || around.home.join(".ssh").join("known_hosts"),
                PathBuf::from,
            );
            let target = ssh_target(&url, identity, known_hosts)?;
            if let Some(identity) = &target.identity {
                trusted("identity file", identity)?;
            }
            trusted("known_hosts file", &target.known_hosts)?;
            (Some(target.host.clone()), Some(target))
        } else {
            return Err(format!(
                "`{url}`: the host reaches Podman services by ssh://user@host[:port]/path/to/podman.sock, \
                 unix:// or tcp:// (loopback, or `insecure = true`)"
            ));
        };
        let address = table.address.clone().or(host).ok_or_else(|| {
            format!(
                "`{url}` is a socket here, so where its published ports are reached is unknown: \
                 write it as {{ url = \"{url}\", address = \"<the engine machine's address>\" }}"
            )
        })?;
        Ok(RemoteEngine {
            name: name.to_string(),
            url,
            address,
            ssh,
        })
    }
}

fn check_name(name: &str) -> Result<(), String> {
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
    Ok(())
}

/// The host of `tcp://host:port…`.
fn tcp_host(url: &str, rest: &str) -> Result<String, String> {
    let authority = rest.split('/').next().unwrap_or_default();
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            Ok(host.trim_matches(['[', ']']).to_string())
        }
        _ => Err(format!(
            "`{url}` has no port: write tcp://<host>:<port>, as `podman system service` listens"
        )),
    }
}

/// Whether `host` names this machine over its loopback interface only.
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `ssh://[user@]host[:port]/path/to/podman.sock`, as Podman writes it.
fn ssh_target(
    url: &str,
    identity: Option<PathBuf>,
    known_hosts: PathBuf,
) -> Result<SshTarget, String> {
    let bad = |why: &str| {
        format!(
            "`{url}` {why}: write ssh://user@host[:port]/path/to/podman.sock, as `podman system connection add` does"
        )
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("has no host"))?
        .trim_matches(['[', ']'])
        .to_string();
    // An ssh argument that starts with `-` would be read as an option.
    if host.starts_with('-') || parsed.username().starts_with('-') {
        return Err(bad("has a host or user starting with `-`"));
    }
    if parsed.password().is_some() || parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("has a password, a query or a fragment"));
    }
    let socket = percent_encoding::percent_decode_str(parsed.path())
        .decode_utf8()
        .map_err(|_| bad("has a path that is not UTF-8"))?
        .into_owned();
    if socket.len() < 2 || !socket.starts_with('/') {
        return Err(bad("names no socket path"));
    }
    // ssh's -L reads `local:remote`: a `:` in the path would split it.
    if socket.contains(':') || socket.chars().any(char::is_control) {
        return Err(bad("has a socket path with `:` or a control character"));
    }
    Ok(SshTarget {
        user: Some(parsed.username().to_string()).filter(|u| !u.is_empty()),
        host,
        port: parsed.port().unwrap_or(22),
        socket,
        identity,
        known_hosts,
    })
}

/// The engine name that means this machine's own Podman.
pub const LOCAL_ENGINE: &str = "local";
