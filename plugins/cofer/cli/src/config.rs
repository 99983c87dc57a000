//! `cofer config`: the repository's defaults for new environments (base
//! image, setup commands, variables), as container-use's `config`, in
//! `.git/cofer/config.json`, which no environment can write; the plugin's
//! `environment_create` reads it. Secret references are kept apart, where
//! no plugin can write ([`crate::secrets`]).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use hostgit::Repo;
use serde::{Deserialize, Serialize};

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Show the whole configuration new environments start from.
    Show {
        #[arg(long)]
        json: bool,
    },
    /// The image new environments start from.
    #[command(subcommand)]
    BaseImage(BaseImage),
    /// Commands run once in each new environment's container, in order.
    #[command(subcommand)]
    SetupCommand(Commands),
    /// Variables set in new environments' containers.
    #[command(subcommand)]
    Env(Vars),
    /// Secrets: references resolved on this machine into each command's
    /// environment, never shown to the agent.
    #[command(subcommand)]
    Secret(crate::secrets::SecretCommand),
    /// Make an environment's configuration the default for new ones.
    Import { id: String },
    /// Start over: the file is moved aside (kept beside it as
    /// `config.json.bak`) and new environments start from the host's
    /// defaults. For a file that no longer reads.
    Reset,
}

#[derive(Subcommand)]
pub enum BaseImage {
    Set {
        image: String,
    },
    Get,
    /// Back to the host's default (COFER_DEFAULT_IMAGE).
    Reset,
}

#[derive(Subcommand)]
pub enum Commands {
    Add { command: String },
    Remove { command: String },
    List,
    Clear,
}

#[derive(Subcommand)]
pub enum Vars {
    Set { key: String, value: String },
    Unset { key: String },
    List,
    Clear,
}

/// The file's fields, as the plugin's `project` module reads them.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Project {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_image: Option<String>,
    #[serde(default)]
    pub setup_commands: Vec<String>,
    /// `KEY=VALUE`.
    #[serde(default)]
    pub envs: Vec<String>,
}

fn path(repo: &Repo) -> PathBuf {
    repo.git_dir().join("cofer/config.json")
}

impl Project {
    pub fn read(repo: &Repo) -> Result<Project> {
        let path = path(repo);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "{} is not a Cofer config: `cofer config show` shows it, `cofer config reset` starts over",
                    path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Project::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Written whole, then put in place: a create never reads half of it.
    fn write(&self, repo: &Repo) -> Result<()> {
        let path = path(repo);
        std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
    }
}

pub fn config(repo: &Repo, host: &crate::host::Host, command: ConfigCommand) -> Result<()> {
    let read = Project::read(repo);
    let mut project = match (read, &command) {
        (Ok(project), _) => project,
        (Err(e), ConfigCommand::Show { .. }) => return show_broken(repo, e),
        (Err(_), ConfigCommand::Reset) => return reset(repo),
        (Err(e), _) => return Err(e),
    };
    match command {
        ConfigCommand::Reset => return reset(repo),
        ConfigCommand::Show { json } => {
            let secrets = crate::secrets::names(repo)?;
            // What a new environment starts from, and where each came from:
            // this file, else the repository's devcontainer.json.
            let devcontainer = devcontainer::read(repo.work_tree()).map_err(|why| {
                anyhow::anyhow!("the repository's devcontainer.json cannot be used: {why}")
            })?;
            let ours = path(repo).display().to_string();
            let from = |set: bool, theirs: bool| -> String {
                match (set, &devcontainer) {
                    (true, _) => ours.clone(),
                    (false, Some(d)) if theirs => d.file.clone(),
                    _ => "the host's defaults".into(),
                }
            };
            let dc = devcontainer.clone().unwrap_or_default();
            let (mut image, mut setup, mut envs) = (
                project.base_image.clone(),
                project.setup_commands.clone(),
                project.envs.clone(),
            );
            dc.fill(&mut image, &mut setup, &mut envs);
            let origins = serde_json::json!({
                "base_image": from(project.base_image.is_some(), dc.image.is_some() || dc.build.is_some()),
                "setup_commands": from(!project.setup_commands.is_empty(), !dc.setup_commands.is_empty()),
                "envs": from(!project.envs.is_empty(), !dc.envs.is_empty()),
                "forward_ports": from(false, !dc.forward_ports.is_empty()),
            });
            if json {
                let mut value = serde_json::to_value(&project)?;
                value["base_image"] = serde_json::to_value(&image)?;
                value["setup_commands"] = serde_json::to_value(&setup)?;
                value["envs"] = serde_json::to_value(&envs)?;
                value["forward_ports"] = serde_json::to_value(&dc.forward_ports)?;
                value["from"] = origins;
                value["not_honoured"] = serde_json::to_value(&dc.not_honoured)?;
                value["secrets"] = serde_json::to_value(&secrets)?;
                println!("{}", termtext::json(&serde_json::to_string_pretty(&value)?));
            } else {
                let shown_image = match (&image, &dc.build) {
                    (Some(image), _) => image.clone(),
                    (None, Some(b)) => format!("(built from {}: not done by Cofer)", b.dockerfile),
                    (None, None) => "(the host's COFER_DEFAULT_IMAGE)".into(),
                };
                println!("base image:     {}", termtext::line(&shown_image));
                println!(
                    "  from {}",
                    termtext::line(origins["base_image"].as_str().unwrap_or(""))
                );
                list("setup commands", &setup);
                println!(
                    "  from {}",
                    termtext::line(origins["setup_commands"].as_str().unwrap_or(""))
                );
                list("variables", &envs);
                println!(
                    "  from {}",
                    termtext::line(origins["envs"].as_str().unwrap_or(""))
                );
                let ports: Vec<String> = dc.forward_ports.iter().map(u16::to_string).collect();
                list("forwarded ports", &ports);
                list("not honoured", &dc.not_honoured);
                let secrets: Vec<String> =
                    secrets.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                list("secrets", &secrets);
            }
            return Ok(());
        }
        ConfigCommand::BaseImage(BaseImage::Get) => {
            println!(
                "{}",
                termtext::line(project.base_image.as_deref().unwrap_or(""))
            );
            return Ok(());
        }
        ConfigCommand::BaseImage(BaseImage::Set { image }) => {
            check_image(&image)?;
            project.base_image = Some(image);
        }
        ConfigCommand::BaseImage(BaseImage::Reset) => project.base_image = None,
        ConfigCommand::SetupCommand(Commands::List) => {
            project
                .setup_commands
                .iter()
                .for_each(|c| println!("{}", termtext::line(c)));
            return Ok(());
        }
        ConfigCommand::SetupCommand(Commands::Add { command }) => {
            project.setup_commands.push(command)
        }
        ConfigCommand::SetupCommand(Commands::Remove { command }) => {
            let before = project.setup_commands.len();
            project.setup_commands.retain(|c| *c != command);
            if project.setup_commands.len() == before {
                bail!(
                    "`{command}` is not a setup command: `cofer config setup-command list` shows them"
                );
            }
        }
        ConfigCommand::SetupCommand(Commands::Clear) => project.setup_commands.clear(),
        ConfigCommand::Env(Vars::List) => {
            project
                .envs
                .iter()
                .for_each(|v| println!("{}", termtext::line(v)));
            return Ok(());
        }
        ConfigCommand::Env(Vars::Set { key, value }) => {
            crate::secrets::check_name(&key)?;
            project.envs.retain(|v| !v.starts_with(&format!("{key}=")));
            project.envs.push(format!("{key}={value}"));
        }
        ConfigCommand::Env(Vars::Unset { key }) => {
            project.envs.retain(|v| !v.starts_with(&format!("{key}=")))
        }
        ConfigCommand::Env(Vars::Clear) => project.envs.clear(),
        ConfigCommand::Secret(command) => return crate::secrets::secret(repo, command),
        ConfigCommand::Import { id } => {
            let described = host.call(
                "environment_open",
                serde_json::json!({"environment_id": id}),
            )?;
            let config = &described.value["config"];
            project.base_image = config["base_image"].as_str().map(str::to_string);
            project.setup_commands = strings(&config["setup_commands"]);
            project.envs = strings(&config["env"]);
        }
    }
    project.write(repo)?;
    println!(
        "saved {}; new environments start from it",
        path(repo).display()
    );
    Ok(())
}

/// A file that does not read: what is wrong, its text (made safe to
/// print), and the way out; the command fails.
fn show_broken(repo: &Repo, e: anyhow::Error) -> Result<()> {
    let path = path(repo);
    let text = std::fs::read(&path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text[..text.len().min(64 * 1024)]).into_owned();
    println!("{}", termtext::lines(&text));
    bail!(
        "{:#}\nfix it in an editor, or `cofer config reset` to move it aside and start from the host's defaults",
        e
    )
}

/// Move the file aside (`config.json.bak`, replacing an older one).
fn reset(repo: &Repo) -> Result<()> {
    let path = path(repo);
    if !path.exists() {
        println!("{} does not exist: nothing to reset", path.display());
        return Ok(());
    }
    let aside = path.with_extension("json.bak");
    std::fs::rename(&path, &aside)
        .with_context(|| format!("cannot move {} aside", path.display()))?;
    println!(
        "moved {} to {}; new environments start from the host's defaults",
        path.display(),
        aside.display()
    );
    Ok(())
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn list(what: &str, items: &[String]) {
    if items.is_empty() {
        println!("{what}: (none)");
        return;
    }
    println!("{what}:");
    for item in items {
        println!("  {}", termtext::line(item));
    }
}

/// An image reference: no option, no space.
fn check_image(image: &str) -> Result<()> {
    if image.is_empty() || image.starts_with('-') || image.contains(char::is_whitespace) {
        bail!("`{image}` is not an image reference, e.g. docker.io/library/golang:1.23");
    }
    Ok(())
}
