//! The `host` command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

mod call;
mod clients;
mod login;
mod manage;
pub(crate) mod printed;
mod serve;
mod view;

use crate::catalog::Loader;
use crate::engine;
use crate::inspect::{ListWhat, check, list};
use crate::policy::{Config, Places};
use crate::service::Service;

#[derive(Parser)]
#[command(
    name = "host",
    version,
    about = "MCP server whose tools are sandboxed WebAssembly components"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP: every plugin in the plugins folder, reloaded when it changes.
    Serve {
        /// Speak MCP over stdin/stdout (the default; logs go to stderr).
        #[arg(long, conflicts_with = "http")]
        stdio: bool,
        /// Speak MCP over Streamable HTTP at http://ADDR/mcp instead, e.g.
        /// 127.0.0.1:8931 (port 0: any free port, logged).
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// With --http: every request must carry `Authorization: Bearer
        /// <token>`, the token being this file's contents. Required off loopback.
        #[arg(long, value_name = "FILE", requires = "http")]
        token_file: Option<PathBuf>,
        /// With --http: also accept this `Host` name (loopback names and the
        /// bound address are accepted; others are refused against DNS rebinding).
        #[arg(long = "allow-host", value_name = "NAME", requires = "http")]
        allowed_hosts: Vec<String>,
        /// With --http: also accept requests from web pages of this origin
        /// (e.g. https://app.example.com:443; loopback pages are accepted).
        #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
        allowed_origins: Vec<String>,
        /// Do not watch the plugins folder for changes.
        #[arg(long)]
        no_watch: bool,
        #[command(flatten)]
        common: Common,
    },
    /// List the loaded plugins, the tools they serve, or their grants.
    List {
        #[arg(value_enum, default_value = "tools")]
        what: ListWhat,
        #[command(flatten)]
        common: Common,
    },
    /// Call one tool from the shell and print its result as JSON.
    Call {
        /// Tool name as `list tools` shows it.
        tool: String,
        /// Arguments as a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        #[command(flatten)]
        common: Common,
    },
    /// Print the snippet that adds this host to an MCP client's config (on
    /// stdout, in the client's format; where it goes on stderr).
    ClientConfig {
        client: crate::client_config::Client,
        /// The server's name in the client.
        #[arg(long, default_value = "wasm-host")]
        name: String,
        /// Connect to a host already serving HTTP at this URL (`host serve
        /// --http`), e.g. http://127.0.0.1:8931/mcp, instead of starting one.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// With --url: the environment variable holding the bearer token;
        /// the snippet refers to it, never to the token itself.
        #[arg(long, value_name = "VAR", requires = "url")]
        token_env: Option<String>,
        /// Print instead the client's list of tools it runs without asking,
        /// holding the loaded plugins' read-only tools (Claude Code's
        /// `permissions.allow`, Gemini CLI's `tools.allowed`).
        #[arg(long, conflicts_with = "url")]
        allow_read_only: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Make a plugin crate to start from (one typed tool, a unit test).
    New {
        /// The crate's name, which is also its tool's and its policy key.
        name: String,
        /// Where to make it. [default: current directory]
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The language: a Rust crate (the SDK), Python (componentize-py)
        /// or JavaScript (componentize-js).
        #[arg(long, value_enum, default_value = "rust")]
        lang: crate::scaffold::Lang,
        /// Also a view of its results (an MCP Apps page; Rust).
        #[arg(long)]
        view: bool,
    },
    /// Put a plugin in the plugins folder, from oci://registry/repo:tag (or
    /// @sha256:…), an https:// URL or a file, after loading it as `serve`
    /// would; record it in plugins.lock. With no source: install exactly
    /// what plugins.lock lists (same digests).
    ///
    /// The plugin's name (which keys its grants, secrets and cache) is the
    /// source's last path element, or `--name`; an artifact that declares
    /// another is refused. A name already installed from elsewhere needs
    /// `--replace`, and a name your policy grants anything needs `--yes`
    /// (or a yes at the prompt) after the grants are shown.
    Install {
        source: Option<String>,
        /// Install under this name instead of the source's.
        #[arg(long, requires = "source")]
        name: Option<String>,
        /// Put it in place of a plugin of the same name from another source.
        #[arg(long, requires = "source")]
        replace: bool,
        /// Accept the grants the name holds under your policy without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Show what a plugin is before installing it (or one installed, by
    /// name): its tools with their schemas, views, prompts, resources, the
    /// host interfaces it imports, what your policy grants its name, its
    /// digest and signature; as JSON. Nothing is written.
    Inspect {
        /// A plugin's name, oci://…, https://… or a file.
        source: String,
        #[command(flatten)]
        common: Common,
    },
    /// Resolve each locked plugin's source again (a registry's tag) and
    /// install what changed, after the same checks as `install`; the old
    /// version stays until the new one loads.
    Update {
        /// Only this plugin.
        name: Option<String>,
        /// Say what would change; install nothing.
        #[arg(long)]
        dry_run: bool,
        /// Take a build that imports more of the host than the installed
        /// one without asking.
        #[arg(long)]
        yes: bool,
        /// Take a build this plugin had before (a tag moved back).
        #[arg(long)]
        allow_downgrade: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Take a plugin out of the plugins folder and plugins.lock.
    Uninstall {
        name: String,
        #[command(flatten)]
        common: Common,
    },
    /// Push a component to an OCI registry (oci://registry/repo:tag), as
    /// `host install` and other wasm tools read it; print its digest.
    Publish {
        file: PathBuf,
        target: String,
        /// Sign it with this ECDSA P-256 private key (PKCS#8 PEM), in
        /// cosign's format: `cosign verify --key` and `host install` with
        /// the public key in `[trust] keys` check it.
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
    },
    /// Save a registry login (password on standard input) where `podman
    /// login` does, after the registry took it.
    Login(login::Login),
    /// Remove a registry login `host login` saved.
    Logout(login::Logout),
    /// Put a view (an MCP Apps page) into a plugin component built without
    /// the Rust SDK (Python, JavaScript).
    #[command(subcommand)]
    View(view::ViewAction),
    /// Keep a secret for a plugin (its value read from stdin, never an
    /// argument); the plugin sees it only if its policy's `secrets` names it.
    Secret {
        #[command(subcommand)]
        action: SecretAction,
    },
    /// Check the config and the plugins folder; exit 1 on any problem.
    Check {
        #[command(flatten)]
        common: Common,
        /// Treat warnings (unknown plugin tables, very wide grants) as problems.
        #[arg(long)]
        strict: bool,
    },
}

#[derive(Subcommand)]
enum SecretAction {
    /// Store NAME for PLUGIN; the value is standard input (one trailing
    /// line break dropped).
    Set {
        plugin: String,
        name: String,
        #[command(flatten)]
        common: Common,
    },
    /// Forget NAME of PLUGIN.
    Remove {
        plugin: String,
        name: String,
        #[command(flatten)]
        common: Common,
    },
    /// The names stored (never the values), per plugin.
    List {
        plugin: Option<String>,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args)]
struct Common {
    /// Folder of plugin components (*.wasm). [default: $XDG_DATA_HOME/mcp-host/plugins,
    /// i.e. ~/.local/share/mcp-host/plugins]
    #[arg(long, env = "MCP_HOST_PLUGINS")]
    plugins: Option<PathBuf>,
    /// Policy file merged over the shipped default (config/default.toml).
    /// [default: ~/.config/mcp-host/config.toml when it exists]
    #[arg(long, env = "MCP_HOST_CONFIG")]
    config: Option<PathBuf>,
    /// Cache of compiled components and plugin data. [default: ~/.cache/mcp-host]
    #[arg(long, env = "MCP_HOST_CACHE")]
    cache_dir: Option<PathBuf>,
    /// The directory plugins work in (`${workspace}` in the policy). [default: current directory]
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Expose tool names with `_` in place of `.`, for clients that reject dots.
    #[arg(long)]
    underscore_names: bool,
    /// Serve only the tools matching these globs (`godot.*`, `run_test`);
    /// the others are hidden, as the policy's tools.deny hides them.
    #[arg(long = "tools", value_name = "PATTERN", num_args = 1..)]
    tools: Vec<String>,
    /// Where `host secret` keeps plugins' secrets. [default: ~/.config/mcp-host/secrets]
    #[arg(long, env = "MCP_HOST_SECRETS")]
    secrets_dir: Option<PathBuf>,
    /// Sentence-embedding model folder for the `vectors` capability
    /// (config.json, tokenizer.json, model.safetensors); `none` for words
    /// only. [default: ~/.local/share/mcp-host/models/godot-minilm-l6
    /// when it exists; scripts/setup-model installs it]
    #[arg(long, env = "MCP_HOST_EMBEDDING_MODEL")]
    embedding_model: Option<PathBuf>,
}

/// Where the user's policy file is when no `--config` names one.
fn default_config() -> Option<PathBuf> {
    Some(dirs::config_dir()?.join("mcp-host/config.toml"))
}

impl Common {
    /// The user's policy file: `--config`, else the default one if it exists.
    fn user_config(&self) -> Option<PathBuf> {
        self.config
            .clone()
            .or_else(|| default_config().filter(|p| p.exists()))
    }

    fn loader(self) -> Result<Loader> {
        let home = dirs::home_dir().unwrap_or_else(|| PathBuf::from("/"));
        let user_config = self.user_config();
        let config = Config::load(user_config.as_deref())?;
        let config_hint = user_config
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| {
                "your config file (~/.config/mcp-host/config.toml or --config)".into()
            });
        let workspace = match self.workspace {
            Some(w) => w,
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let workspace = crate::paths::canonical(&workspace)
            .with_context(|| format!("workspace {} does not exist", workspace.display()))?;
        // Found once, never in the workspace: see timebox::find_host_programs.
        if let Some((_, Some(git))) = timebox::find_host_programs(&workspace)
            .into_iter()
            .find(|(name, _)| *name == "git")
        {
            hostgit::use_program(git);
        }
        let places = Places {
            workspace,
            home: home.clone(),
            // Absolute: placeholders expand to it wherever the host runs.
            cache_dir: std::path::absolute(
                self.cache_dir
                    .or_else(|| Some(dirs::cache_dir()?.join("mcp-host")))
                    .unwrap_or_else(|| home.join(".cache/mcp-host")),
            )
            .context("cannot make the cache directory's path absolute")?,
        };
        crate::install::auth::trust_helpers_outside(
            [places.workspace.clone(), places.cache_dir.clone()]
                .into_iter()
                .chain(config.plugin_write_roots(&places))
                .collect(),
        );
        let plugins_dir = self
            .plugins
            .or_else(|| Some(dirs::data_dir()?.join("mcp-host/plugins")))
            .unwrap_or_else(|| home.join(".local/share/mcp-host/plugins"));
        crate::vectors::configure(crate::vectors::Settings::new(
            self.embedding_model,
            &places.cache_dir,
        ));
        let engine = engine::new_engine()?;
        engine::start_epoch_ticker(&engine);
        let mut loader = Loader::new(
            engine,
            config,
            places,
            config_hint,
            plugins_dir,
            self.underscore_names,
        )?;
        if let Some(dir) = self.secrets_dir {
            loader.secrets = crate::secrets::Store::at(dir);
        }
        loader.only_tools = self.tools;
        // The default file is watched for even before it exists: a user
        // who writes it while serving has it applied.
        loader.config_optional = self.config.is_none();
        loader.config_file = user_config.or_else(default_config);
        Ok(loader)
    }

    fn secrets(&self) -> crate::secrets::Store {
        crate::secrets::Store::at(
            self.secrets_dir
                .clone()
                .unwrap_or_else(crate::secrets::Store::default_dir),
        )
    }
}

pub fn main() -> ExitCode {
    crate::platform::limit_heap_arenas();
    let cli = Cli::parse();
    // Nothing a call starts may outlive the host: the watchdog is forked
    // before any thread exists (crate::watchdog); a one-shot `host call`
    // (every `cofer` command) gets one too, should it be killed mid-call.
    let watchdog = matches!(cli.command, Command::Serve { .. } | Command::Call { .. })
        .then(crate::platform::start_watchdog);
    let one_shot = matches!(cli.command, Command::List { .. } | Command::Call { .. });
    if one_shot {
        quietpipe::quiet_when_the_reader_leaves();
    }
    if let Err(e) = crate::logging::init(one_shot) {
        eprintln!("error: {e:#}");
        return ExitCode::from(2);
    }
    match watchdog {
        Some(Ok(Some(pid))) => {
            tracing::info!(pid, instance = %timebox::instance(), "watchdog started")
        }
        Some(Err(e)) => tracing::warn!(
            "no watchdog ({e}): if the host is killed, its calls' processes may survive it"
        ),
        _ => {}
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(run(cli.command));
    // Blocking threads (a file watcher, a reader) must not hold the exit.
    runtime.shutdown_timeout(Duration::from_millis(100));
    // A Podman service the host started ends with it, not at the
    // watchdog's leisure (nor never, for a command without one).
    crate::podman::end_own_service();
    if one_shot {
        crate::logging::say_hidden_warnings();
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", printed::printable(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Serve {
            stdio: _,
            http,
            token_file,
            allowed_hosts,
            allowed_origins,
            no_watch,
            common,
        } => {
            let http = http
                .map(|addr| {
                    crate::http::Options::new(
                        addr,
                        token_file.as_deref(),
                        allowed_hosts,
                        allowed_origins,
                    )
                })
                .transpose()?;
            serve::serve(common.loader()?, !no_watch, http).await
        }
        Command::Install {
            source,
            name,
            replace,
            yes,
            common,
        } => {
            let choice = crate::install::Choice { name, replace, yes };
            manage::install(source, &choice, common.loader()?).await
        }
        Command::Inspect { source, common } => manage::inspect(&source, common.loader()?).await,
        Command::Update {
            name,
            dry_run,
            yes,
            allow_downgrade,
            common,
        } => {
            let asked = crate::install::update::Asked {
                only: name.as_deref(),
                dry_run,
                yes,
                allow_downgrade,
            };
            manage::update(&asked, common.loader()?).await
        }
        Command::Uninstall { name, common } => {
            manage::uninstall(&name, &common.loader()?.plugins_dir)
        }
        Command::Secret { action } => match action {
            SecretAction::Set {
                plugin,
                name,
                common,
            } => manage::secret_set(&common.secrets(), &plugin, &name),
            SecretAction::Remove {
                plugin,
                name,
                common,
            } => manage::secret_remove(&common.secrets(), &plugin, &name),
            SecretAction::List { plugin, common } => manage::secret_list(&common.secrets(), plugin),
        },
        Command::Publish { file, target, sign } => {
            manage::publish(&file, &target, sign.as_deref()).await
        }
        Command::List { what, common } => {
            let service = Service::start(common.loader()?).await;
            list(&service, what);
            Ok(ExitCode::SUCCESS)
        }
        Command::Call {
            tool,
            arguments,
            common,
        } => call::call(&tool, &arguments, common.loader()?).await,
        Command::View(action) => view::run(action),
        Command::Login(args) => login::login(args).await,
        Command::Logout(args) => login::logout(args),
        Command::Check { common, strict } => check(common.loader()?, strict).await,
        Command::ClientConfig {
            client,
            name,
            allow_read_only: true,
            common,
            ..
        } => clients::allow_list(client, &name, common.loader()?).await,
        Command::ClientConfig {
            client,
            name,
            url: Some(url),
            token_env,
            ..
        } => {
            let connection = crate::client_config::Connection::Http { url, token_env };
            print!("{}", client.snippet(&name, &connection));
            eprintln!("{}.", client.place());
            if client.needs_underscores() {
                eprintln!(
                    "This client's model API refuses dots in tool names: serve with `host serve --http … --underscore-names`."
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::ClientConfig {
            client,
            name,
            url: None,
            common,
            ..
        } => clients::client_config(client, &name, common),
        Command::New {
            name,
            dir,
            lang,
            view,
        } => {
            let parent = match dir {
                Some(dir) => dir,
                None => std::env::current_dir().context("cannot read the current directory")?,
            };
            let made = crate::scaffold::new_plugin(&name, &parent, lang, view)?;
            println!("{}", made.display());
            let plugin = crate::scaffold::plugin_name(&name);
            eprintln!(
                "made {}: {} there writes {plugin}.wasm (`host install` it); its grants go under \
                 [plugins.{plugin}]",
                made.display(),
                lang.build_command(&plugin)
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
