//! What an environment is made of, and where each part lives:
//! - a worktree `<repo>/.cofer/worktrees/<id>` on branch `cofer/<id>`,
//!   pushed to the `cofer` remote (git: survives anything but `destroy`);
//! - a record `<repo>/.git/cofer/environments/<id>.json` (title, image, base);
//! - containers labelled `cofer.env=<id>`, `cofer.source=<repo>`,
//!   `cofer.repository=<the repository's id>` and `cofer.role=main|service`
//!   (Podman; the host adds the plugin and the machine).
//!
//! Nothing is kept in memory: every call finds these again, so a restarted
//! host sees the environments the last one made.

use plugin_sdk::ToolError;
use plugin_sdk::containers::{self, ContainerInfo, CreateRequest, ExecRequest, Mount};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::errors::{error, from_container};

/// The engine name of this machine's Podman.
pub const LOCAL: &str = "local";

/// Inside every environment's container, the worktree is mounted here.
pub const WORKDIR: &str = "/workdir";
/// The remote `cofer init` creates and environments are pushed to.
pub const REMOTE: &str = "cofer";

pub const LABEL_ENV: &str = "cofer.env";
pub const LABEL_SOURCE: &str = "cofer.source";
pub const LABEL_ROLE: &str = "cofer.role";
pub const LABEL_REPOSITORY: &str = "cofer.repository";

/// One environment of one repository.
pub struct Env {
    pub id: String,
    pub repo: String,
    /// The repository's own id, once it has one ([`repository_id`]).
    pub repo_id: Option<String>,
    /// The engine its containers are on ([`crate::engine`]).
    pub engine: String,
    /// Whether /workdir is a volume the worktree is copied to and from
    /// (the engine cannot mount it).
    pub copies_files: bool,
}

/// Where a repository keeps its id: made at its first environment, so that
/// a repository at a path where another one was (removed, cloned again)
/// does not take the other's containers for its own.
fn repository_id_path(repo: &str) -> String {
    format!("{}/id", state_dir(repo))
}

/// Where Cofer keeps a repository's state (its remote, records and id):
/// inside the git directory, which no checkout writes, so no branch an
/// environment made can change it (issue 34).
pub fn state_dir(repo: &str) -> String {
    format!("{}/.git/cofer", repo.trim_end_matches('/'))
}

/// The bare repository `cofer init` makes as the `cofer` remote.
pub fn remote_dir(repo: &str) -> String {
    format!("{}/remote.git", state_dir(repo))
}

/// The folder of the environments' records.
pub fn records_dir(repo: &str) -> String {
    format!("{}/environments", state_dir(repo))
}

/// Refuse a repository where an older Cofer kept its state in the working
/// tree (`.cofer/remote.git`, `.cofer/environments`, `.cofer/id`), where a
/// checkout of an environment's branch could have written it.
pub fn check_layout(repo: &str) -> Result<(), ToolError> {
    let old = format!("{}/.cofer", repo.trim_end_matches('/'));
    let found: Vec<&str> = ["remote.git", "environments", "id"]
        .into_iter()
        .filter(|name| std::fs::symlink_metadata(format!("{old}/{name}")).is_ok())
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    Err(error(
        "precondition_failed",
        format!(
            "{repo} keeps Cofer's state in its working tree ({}), where a checkout can change it",
            found
                .iter()
                .map(|name| format!(".cofer/{name}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        &format!(
            "run `cofer init` in {repo} once: it moves the state to .git/cofer/, then call the tool again"
        ),
    ))
}

/// The repository's id, if it has one.
pub fn repository_id(repo: &str) -> Option<String> {
    let id = std::fs::read_to_string(repository_id_path(repo)).ok()?;
    let id = id.trim();
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_hexdigit())).then(|| id.to_string())
}

/// The repository's id, made now if it has none. Written by the host
/// (plugins write nothing inside `.git`), only if none is there, so two
/// environments created at once in a new repository get the same id: the
/// one that was there first.
pub fn ensure_repository_id(repo: &str) -> Result<String, ToolError> {
    if let Some(id) = repository_id(repo) {
        return Ok(id);
    }
    let id = format!("{:016x}", plugin_sdk::random_u64());
    let path = repository_id_path(repo);
    plugin_sdk::git::state_write(repo, "id", &format!("{id}\n"), true)
        .map_err(|e| crate::errors::from_git(&format!("write the repository's id to {path}"), e))?;
    repository_id(repo).ok_or_else(|| {
        error(
            "step_failed",
            format!("{path} holds no repository id"),
            "remove the file; the next environment makes a new one",
        )
    })
}

/// Whether container `c` belongs to the repository whose id is `repo_id`:
/// it says so, or it carries no id (made before repositories had one).
pub fn of_repository(repo_id: Option<&str>, c: &ContainerInfo) -> bool {
    c.labels
        .iter()
        .find(|(k, _)| k == LABEL_REPOSITORY)
        .is_none_or(|(_, v)| Some(v.as_str()) == repo_id)
}

impl Env {
    pub fn new(repo: &str, id: &str) -> Env {
        Env {
            id: id.to_string(),
            repo: repo.trim_end_matches('/').to_string(),
            repo_id: repository_id(repo),
            engine: LOCAL.into(),
            copies_files: false,
        }
    }

    /// Environment `id` of the repository `source` is in, and its record;
    /// `not_found` when it has none. The call goes on on its engine.
    pub fn find(source: &str, id: &str) -> Result<(Env, Record), ToolError> {
        let mut env = Env::new(&crate::open_repo(source)?, id);
        let record = env.read_record().ok_or_else(|| env.not_found())?;
        env.use_engine(record.engine())?;
        Ok((env, record))
    }

    pub fn worktree(&self) -> String {
        format!("{}/.cofer/worktrees/{}", self.repo, self.id)
    }

    pub fn branch(&self) -> String {
        format!("cofer/{}", self.id)
    }

    /// What container-use calls `remote_ref`: where the work can be seen
    /// with git. Ours is the environment's branch in the source repository
    /// itself (`git log cofer/<id>`); the copy pushed to the `cofer` remote
    /// would read `cofer/cofer/<id>`, which says nothing more.
    pub fn remote_ref(&self) -> String {
        self.branch()
    }

    pub fn record_path(&self) -> String {
        format!("{}/{}.json", records_dir(&self.repo), self.id)
    }

    /// Container names are machine-wide: the repository's hash keeps two
    /// repositories' `bold-otter`s apart.
    pub fn container_name(&self) -> String {
        format!(
            "cofer-{}-{:08x}",
            self.id,
            fnv1a(self.repo.as_bytes()) as u32
        )
    }

    /// The name of service container number `n` running `command`: the
    /// environment's container name, the program's name and `n`, so
    /// `podman ps` says whose service it is and what it runs.
    pub fn service_name(&self, command: &str, n: usize) -> String {
        let program = command
            .split_whitespace()
            .find(|w| !w.contains('='))
            .and_then(|w| w.rsplit('/').next())
            .unwrap_or("service");
        let program: String = program
            .chars()
            .map(|c| c.to_ascii_lowercase())
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(16)
            .collect();
        let program = if program.is_empty() {
            "service".into()
        } else {
            program
        };
        format!("{}-{program}-{n}", self.container_name())
    }

    /// The environment's own network, where its services are reached by
    /// name: named as its main container.
    pub fn network(&self) -> String {
        self.container_name()
    }

    /// The container of the service `name` added with
    /// `environment_add_service`.
    pub fn added_service_name(&self, name: &str) -> String {
        format!("{}-svc-{name}", self.container_name())
    }

    pub fn labels(&self, role: &str) -> Vec<(String, String)> {
        let mut labels = vec![
            (LABEL_ENV.into(), self.id.clone()),
            (LABEL_SOURCE.into(), self.repo.clone()),
            (LABEL_ROLE.into(), role.into()),
        ];
        if let Some(id) = &self.repo_id {
            labels.push((LABEL_REPOSITORY.into(), id.clone()));
        }
        labels
    }

    /// A container of this environment: the record's image and `envs`,
    /// the worktree mounted at /workdir, labelled with `role`, running
    /// `command`.
    pub fn container_request(
        &self,
        record: &Record,
        role: &str,
        command: Vec<String>,
    ) -> Result<CreateRequest, ToolError> {
        Ok(CreateRequest {
            image: record.image.clone(),
            name: None,
            command,
            use_entrypoint: false,
            labels: self.labels(role),
            mounts: self.workdir_mounts(),
            workdir: Some(WORKDIR.into()),
            env: env_pairs(&record.envs)?,
            ports: Vec::new(),
        })
    }

    /// /workdir: the worktree, or on an engine that cannot mount it the
    /// environment's volume there.
    fn workdir_mounts(&self) -> Vec<Mount> {
        if self.copies_files {
            return vec![Mount {
                source: self.volume(),
                target: WORKDIR.into(),
                read_only: false,
            }];
        }
        // The worktree's `.git` file is mounted read-only over itself: the
        // container cannot point it (and so a careless git on the host) at
        // another repository or config.
        vec![
            Mount {
                source: self.worktree(),
                target: WORKDIR.into(),
                read_only: false,
            },
            Mount {
                source: format!("{}/.git", self.worktree()),
                target: format!("{WORKDIR}/.git"),
                read_only: true,
            },
        ]
    }

    pub fn read_record(&self) -> Option<Record> {
        let text = std::fs::read_to_string(self.record_path()).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The record's name in Cofer's state ([`plugin_sdk::git::state_write`]).
    fn record_name(&self) -> String {
        format!("environments/{}.json", self.id)
    }

    /// Write the record whole (a reader never sees half of it), by the host:
    /// it lives inside `.git`, which no plugin writes itself.
    pub fn write_record(&self, record: &Record) -> Result<(), ToolError> {
        let text = serde_json::to_string_pretty(record).expect("records serialise");
        plugin_sdk::git::state_write(&self.repo, &self.record_name(), &text, false)
            .map(drop)
            .map_err(|e| crate::errors::from_git("write environment record", e))
    }

    /// Remove the record; whether there was one.
    pub fn remove_record(&self) -> Result<bool, ToolError> {
        plugin_sdk::git::state_remove(&self.repo, &self.record_name())
            .map_err(|e| crate::errors::from_git("remove environment record", e))
    }

    pub fn has_worktree(&self) -> bool {
        std::fs::metadata(self.worktree()).is_ok()
    }

    /// Whether git has the worktree locked (`git worktree lock`): its
    /// admin directory, the one whose `gitdir` names it, holds `locked`.
    pub fn worktree_locked(&self) -> bool {
        let Ok(admins) = std::fs::read_dir(format!("{}/.git/worktrees", self.repo)) else {
            return false;
        };
        let gitfile = format!("{}/.git", self.worktree());
        admins.flatten().any(|admin| {
            let admin = admin.path();
            std::fs::read_to_string(admin.join("gitdir"))
                .is_ok_and(|named| named.trim_end() == gitfile)
                && admin.join("locked").exists()
        })
    }

    /// The error when the worktree is gone (removed by hand).
    pub fn require_worktree(&self) -> Result<(), ToolError> {
        if self.has_worktree() {
            return Ok(());
        }
        Err(error(
            "precondition_failed",
            format!(
                "environment `{}` has lost its worktree {}",
                self.id,
                self.worktree()
            ),
            "destroy the environment (environment_destroy with force=true) and create it again",
        ))
    }

    /// Every container of this environment (main and services).
    pub fn containers(&self) -> Result<Vec<ContainerInfo>, ToolError> {
        let mut found = containers::list(&[
            (LABEL_ENV.into(), self.id.clone()),
            (LABEL_SOURCE.into(), self.repo.clone()),
        ])
        .map_err(|e| from_container("list containers", e))?;
        found.retain(|c| of_repository(self.repo_id.as_deref(), c));
        Ok(found)
    }

    /// The error for an environment that does not exist.
    pub fn not_found(&self) -> ToolError {
        error(
            "not_found",
            format!(
                "there is no environment `{}` in {}: nothing was changed, and sending the same call again will not help",
                self.id, self.repo
            ),
            "call environment_list to see the environments of this repository, or environment_create to make one",
        )
    }

    /// The container-use shaped description of the environment.
    pub fn describe(&self, record: &Record, services: &[ContainerInfo]) -> Value {
        let mut out = json!({
            "id": self.id,
            "title": record.title,
            "config": record.config(),
            "remote_ref": self.remote_ref(),
            "checkout_command_to_share_with_user": format!("cofer checkout {}", self.id),
            "log_command_to_share_with_user": format!("cofer log {}", self.id),
            "diff_command_to_share_with_user": format!("cofer diff {}", self.id),
        });
        if let Some(engine) = &record.engine {
            out["engine"] = json!(engine);
        }
        if !services.is_empty() {
            out["services"] = services
                .iter()
                .map(|s| json!({"name": s.name, "state": s.state}))
                .collect();
        }
        out
    }
}

/// What `environment_create` decided, and `environment_config` and
/// `environment_add_service` since, kept beside the worktree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub title: String,
    pub image: String,
    pub from_git_ref: String,
    pub base_commit: String,
    pub created_at: String,
    /// Run once in every new main container, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup_commands: Vec<String>,
    /// `KEY=VALUE`, set in the environment's containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub envs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceConfig>,
    /// The engine it runs on, when not the local one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Ports a background command publishes when it names none
    /// (devcontainer.json's `forwardPorts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forward_ports: Vec<u16>,
}

/// A service added with `environment_add_service` (container-use's
/// `ServiceConfig` fields).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServiceConfig {
    pub name: String,
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exposed_ports: Vec<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

impl Record {
    pub fn engine(&self) -> &str {
        self.engine.as_deref().unwrap_or(LOCAL)
    }

    /// container-use's `config`, empty fields left out.
    fn config(&self) -> Value {
        let mut config = json!({"workdir": WORKDIR, "base_image": self.image});
        if !self.setup_commands.is_empty() {
            config["setup_commands"] = json!(self.setup_commands);
        }
        if !self.envs.is_empty() {
            config["env"] = json!(self.envs);
        }
        if !self.services.is_empty() {
            config["services"] = json!(self.services);
        }
        config
    }
}

/// `KEY=VALUE` strings as pairs; `invalid_request` naming the first that
/// is not one.
pub fn env_pairs(envs: &[String]) -> Result<Vec<(String, String)>, ToolError> {
    envs.iter()
        .map(|kv| match kv.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
            _ => Err(error(
                "invalid_request",
                format!("`{kv}` is not an environment variable setting"),
                "write each as KEY=VALUE, e.g. [\"FOO=bar\"]",
            )),
        })
        .collect()
}

/// A short chore in a container (rewriting /etc/hosts, removing a file):
/// 30 s at most, a little output kept for the error.
pub fn chore(argv: Vec<String>) -> ExecRequest {
    ExecRequest {
        argv,
        workdir: None,
        env: Vec::new(),
        use_entrypoint: false,
        stdin: None,
        timeout_ms: 30_000,
        no_output_timeout_ms: None,
        tail_bytes: 4096,
        secrets_of: None,
    }
}

/// The main container's process: waits forever, exits at once on SIGTERM
/// (a plain `sleep` as PID 1 would ignore it and cost the stop's grace
/// period). Needs only `sh` and `sleep` in the image.
pub fn idle_command() -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done".into(),
    ]
}

/// A short, stable hash (FNV-1a) for names and ids, not for security.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A fresh `adverb-animal` name, as container-use gives.
pub fn petname() -> String {
    const ADVERBS: &[&str] = &[
        "boldly", "calmly", "deftly", "eagerly", "fairly", "gladly", "hardly", "keenly", "lightly",
        "merely", "neatly", "openly", "partly", "quickly", "rarely", "safely", "simply", "softly",
        "subtly", "swiftly", "truly", "vastly", "warmly", "wisely", "briskly", "deeply", "firmly",
        "gently", "justly", "kindly", "loudly", "mildly",
    ];
    const ANIMALS: &[&str] = &[
        "otter", "badger", "heron", "lynx", "marten", "newt", "oriole", "panda", "quail", "raven",
        "salmon", "tapir", "urchin", "vole", "walrus", "yak", "zebra", "beaver", "cobra", "dingo",
        "eagle", "ferret", "gecko", "hare", "ibis", "jackal", "koala", "lemur", "moose", "narwhal",
        "ocelot", "puffin",
    ];
    let r = plugin_sdk::random_u64();
    format!(
        "{}-{}",
        ADVERBS[(r % ADVERBS.len() as u64) as usize],
        ANIMALS[((r >> 32) % ANIMALS.len() as u64) as usize]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        let env = Env::new("/src/repo/", "bold-otter");
        assert_eq!(env.worktree(), "/src/repo/.cofer/worktrees/bold-otter");
        assert_eq!(env.branch(), "cofer/bold-otter");
        assert_eq!(env.remote_ref(), "cofer/bold-otter");
        let name = env.service_name("PORT=8000 /usr/bin/python3 -m http.server", 2);
        assert!(
            name.starts_with("cofer-bold-otter-") && name.ends_with("-python3-2"),
            "{name}"
        );
        assert!(env.service_name("", 1).ends_with("-service-1"));
        assert!(env.container_name().starts_with("cofer-bold-otter-"));
        assert_ne!(
            env.container_name(),
            Env::new("/src/other", "bold-otter").container_name()
        );
    }

    #[test]
    fn petnames_look_like_container_use_ids() {
        for _ in 0..50 {
            let name = petname();
            let (adverb, animal) = name.split_once('-').unwrap();
            assert!(adverb.ends_with("ly") && !animal.is_empty(), "{name}");
        }
    }

    #[test]
    fn description_has_container_use_fields() {
        let env = Env::new("/r", "x");
        let record = Record {
            id: "x".into(),
            title: "t".into(),
            image: "img".into(),
            from_git_ref: "HEAD".into(),
            base_commit: "abc".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            setup_commands: Vec::new(),
            envs: Vec::new(),
            services: Vec::new(),
            engine: None,
            forward_ports: Vec::new(),
        };
        let d = env.describe(&record, &[]);
        for key in [
            "id",
            "title",
            "config",
            "remote_ref",
            "checkout_command_to_share_with_user",
            "log_command_to_share_with_user",
            "diff_command_to_share_with_user",
        ] {
            assert!(d.get(key).is_some(), "{key}");
        }
        assert!(d.get("services").is_none(), "empty fields are left out");
        assert_eq!(d["config"]["workdir"], "/workdir");
    }
}
