//! The person's Podman system connections (`podman system connection
//! add`), so an engine can be named as Podman users already name their
//! machines: `lab = { connection = "lab" }`. Podman 5 keeps them in
//! `podman-connections.json`, Podman 4 in containers.conf's
//! `[engine.service_destinations]`; both are read, Podman 5's first.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A connection's files are a few lines; more is not Podman's.
const MAX_BYTES: u64 = 1024 * 1024;

/// What a connection says: where, and with which key.
#[derive(Debug, PartialEq)]
pub struct Connection {
    pub uri: String,
    pub identity: Option<PathBuf>,
}

/// Podman 5's `podman-connections.json`.
#[derive(Deserialize)]
struct Connections5 {
    #[serde(rename = "Connection", default)]
    connection: Option<Table5>,
}

#[derive(Deserialize)]
struct Table5 {
    #[serde(rename = "Connections", default)]
    connections: std::collections::BTreeMap<String, Entry5>,
}

#[derive(Deserialize)]
struct Entry5 {
    #[serde(rename = "URI")]
    uri: String,
    #[serde(rename = "Identity", default)]
    identity: Option<String>,
}

/// What resolving an entry needs from outside the policy.
pub struct Surroundings<'a> {
    /// The person's home: `~/.ssh/known_hosts`.
    pub home: &'a Path,
    /// Their config folder (`$XDG_CONFIG_HOME`): Podman's connection files.
    pub config_home: &'a Path,
    /// Folders a plugin or a container may write: nothing the host reads
    /// to reach an engine may lie there.
    pub untrusted: &'a [PathBuf],
}

/// The files that may hold connections, in the order Podman prefers them.
fn candidates(around: &Surroundings) -> Vec<PathBuf> {
    let mut files = vec![
        around
            .config_home
            .join("containers/podman-connections.json"),
        PathBuf::from("/etc/containers/podman-connections.json"),
    ];
    if let Some(conf) = std::env::var_os("CONTAINERS_CONF").filter(|c| !c.is_empty()) {
        files.push(PathBuf::from(conf));
    }
    files.push(around.config_home.join("containers/containers.conf"));
    files.push(PathBuf::from("/etc/containers/containers.conf"));
    files
}

/// The connection `name`, from the first file that has it.
pub fn find(name: &str, around: &Surroundings) -> Result<Connection, String> {
    let files = candidates(around);
    for file in &files {
        let Some(text) = read(file)? else { continue };
        let found = if file.extension().is_some_and(|e| e == "json") {
            from_json(file, &text, name)?
        } else {
            from_conf(file, &text, name)?
        };
        if let Some(found) = found {
            if let Some(root) = around.untrusted.iter().find(|r| file.starts_with(r)) {
                return Err(format!(
                    "Podman connection `{name}` is in {}, which lies in {} where a plugin or a \
                     container may write: add the connection where only you write (`podman system \
                     connection add` with the default config folder)",
                    file.display(),
                    root.display()
                ));
            }
            return Ok(found);
        }
    }
    let looked: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    Err(format!(
        "there is no Podman connection `{name}` (looked in {}): add it with `podman system \
         connection add {name} ssh://user@host/run/podman/podman.sock` or write `url` instead",
        looked.join(", ")
    ))
}

/// The file's text; none when it does not exist.
fn read(file: &Path) -> Result<Option<String>, String> {
    let meta = match std::fs::metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
        Ok(meta) => meta,
    };
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return Err(format!(
            "{} is not a plain file of at most {MAX_BYTES} bytes",
            file.display()
        ));
    }
    std::fs::read_to_string(file)
        .map(Some)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))
}

fn from_json(file: &Path, text: &str, name: &str) -> Result<Option<Connection>, String> {
    let parsed: Connections5 = serde_json::from_str(text)
        .map_err(|e| format!("{} is not Podman's connection list: {e}", file.display()))?;
    Ok(parsed
        .connection
        .and_then(|mut c| c.connections.remove(name))
        .map(|e| Connection {
            uri: e.uri,
            identity: e.identity.filter(|i| !i.is_empty()).map(PathBuf::from),
        }))
}

fn from_conf(file: &Path, text: &str, name: &str) -> Result<Option<Connection>, String> {
    let parsed: toml::Table = toml::from_str(text)
        .map_err(|e| format!("{} is not a containers.conf: {e}", file.display()))?;
    let entry = parsed
        .get("engine")
        .and_then(|e| e.get("service_destinations"))
        .and_then(|d| d.get(name));
    let Some(entry) = entry else { return Ok(None) };
    let uri = entry.get("uri").and_then(|u| u.as_str()).ok_or_else(|| {
        format!(
            "{}: [engine.service_destinations.{name}] has no `uri`",
            file.display()
        )
    })?;
    Ok(Some(Connection {
        uri: uri.to_string(),
        identity: entry
            .get("identity")
            .and_then(|i| i.as_str())
            .filter(|i| !i.is_empty())
            .map(PathBuf::from),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn around<'a>(config_home: &'a Path, untrusted: &'a [PathBuf]) -> Surroundings<'a> {
        Surroundings {
            home: config_home,
            config_home,
            untrusted,
        }
    }

    #[test]
    fn podman_5_and_4_files_name_connections() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("containers")).unwrap();
        std::fs::write(
            dir.path().join("containers/podman-connections.json"),
            r#"{"Connection":{"Default":"lab","Connections":{"lab":{"URI":"ssh://core@lab:2222/run/podman/podman.sock","Identity":"/k/id","IsMachine":false}}},"Farm":{}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("containers/containers.conf"),
            "[engine]\nactive_service = \"old\"\n[engine.service_destinations.old]\nuri = \"ssh://me@old/run/user/1000/podman/podman.sock\"\n",
        )
        .unwrap();
        let a = around(dir.path(), &[]);
        assert_eq!(
            find("lab", &a).unwrap(),
            Connection {
                uri: "ssh://core@lab:2222/run/podman/podman.sock".into(),
                identity: Some("/k/id".into())
            }
        );
        assert_eq!(find("old", &a).unwrap().identity, None);
        let missing = find("gone", &a).unwrap_err();
        assert!(
            missing.contains("podman system connection add gone"),
            "{missing}"
        );
        // A connection file a plugin may write is not taken.
        let untrusted = [dir.path().to_path_buf()];
        let err = find("lab", &around(dir.path(), &untrusted)).unwrap_err();
        assert!(err.contains("may write"), "{err}");
    }
}
