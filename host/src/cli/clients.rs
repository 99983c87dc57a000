//! `host client-config CLIENT`: how a client starts this host, and with
//! `--allow-read-only` its own list of the tools it may run without asking.

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::catalog::Loader;
use crate::policy::Config;
use crate::service::Service;

/// `client`'s allow-list of the read-only tools the plugins serve, named
/// as the client calls them.
pub async fn allow_list(
    client: crate::client_config::Client,
    name: &str,
    mut loader: Loader,
) -> Result<ExitCode> {
    if let Err(why) = client.allow_list(name, &[]) {
        eprintln!("{why}");
        return Ok(ExitCode::FAILURE);
    }
    // Named as this client is served them.
    loader.underscore_names = client.needs_underscores();
    let service = Service::start(loader).await;
    let catalog = service.catalog();
    let read_only: Vec<String> = catalog
        .served_tools()
        .into_iter()
        .filter(|(_, def)| {
            def.annotations
                .as_ref()
                .is_some_and(|a| a.read_only_hint == Some(true))
        })
        .map(|(exposed, _)| exposed.to_string())
        .collect();
    match client.allow_list(name, &read_only) {
        Ok((text, place)) => {
            print!("{text}");
            eprintln!("{place}.");
            // The hint is the plugin's own word: say whose, and what power
            // each of them holds, so the user can take out any they doubt.
            eprintln!(
                "These tools are listed because their plugins declare them read-only; the host \
                 does not check that claim. Each plugin and what your policy lets it do:"
            );
            for exposed in &read_only {
                if let Some((plugin, _)) = catalog.tool(exposed) {
                    let held = plugin.grants.capabilities.join(", ");
                    let held = if held.is_empty() {
                        "nothing".into()
                    } else {
                        held
                    };
                    eprintln!("  {exposed}\t(plugin `{}`, granted: {held})", plugin.name);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!("{why}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The host as `client` should start it: this binary, the folders given
/// here, and the host variables the policy reads that are set now.
pub fn client_config(
    client: crate::client_config::Client,
    name: &str,
    common: super::Common,
) -> Result<ExitCode> {
    let command = std::env::current_exe().context("cannot find this program's path")?;
    let mut extra_args = Vec::new();
    for (flag, value) in [
        ("--plugins", &common.plugins),
        ("--config", &common.config),
        ("--cache-dir", &common.cache_dir),
        ("--workspace", &common.workspace),
    ] {
        if let Some(value) = value {
            let value = std::path::absolute(value)?;
            extra_args.extend([flag.to_string(), value.to_string_lossy().into_owned()]);
        }
    }
    let env = Config::load(common.user_config().as_deref())?
        .host_variables()
        .into_iter()
        .filter_map(|var| {
            Some((
                var.clone(),
                std::env::var(&var).ok().filter(|v| !v.is_empty())?,
            ))
        })
        .collect();
    let launch = crate::client_config::Connection::Stdio {
        command: command.to_string_lossy().into_owned(),
        extra_args,
        env,
    };
    print!("{}", client.snippet(name, &launch));
    eprintln!("{}.", client.place());
    Ok(ExitCode::SUCCESS)
}
