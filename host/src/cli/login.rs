//! `host login` and `host logout`: a registry's login in the file `podman
//! login` writes, so either command's login serves both (see
//! `install/auth.rs` for the files and the order they are read in).

use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::install::auth::{self, Credentials};
use crate::install::fetch::Repository;

#[derive(clap::Args)]
pub struct Login {
    /// The registry: `host[:port]`, as in oci://host[:port]/repository:tag.
    registry: String,
    /// The user name.
    #[arg(short = 'u', long)]
    username: String,
    /// Read the password from standard input (it is never an argument;
    /// accepted for `podman login`'s spelling).
    #[arg(long)]
    password_stdin: bool,
}

#[derive(clap::Args)]
pub struct Logout {
    /// The registry whose login to remove.
    registry: String,
}

/// Check the login against the registry, then save it.
pub async fn login(args: Login) -> Result<ExitCode> {
    let registry = registry_name(&args.registry)?;
    let mut password = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut password)
        .context("cannot read the password from standard input")?;
    let password = password.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        bail!(
            "no password on standard input: pipe it in, e.g. `printf %s \"$TOKEN\" | host login -u USER --password-stdin {registry}`"
        );
    }
    let login = Credentials {
        username: args.username,
        password,
    };
    Repository::check_login(registry, login.clone())
        .await
        .with_context(|| format!("{registry} did not take this login; nothing was saved"))?;
    let file = auth::login_file()?;
    auth::store(&file, registry, &login)?;
    eprintln!(
        "Login Succeeded: saved for {registry} in {}",
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn logout(args: Logout) -> Result<ExitCode> {
    let registry = registry_name(&args.registry)?;
    let file = auth::login_file()?;
    if !auth::remove(&file, registry)? {
        bail!(
            "{} holds no login for {registry} (a login in ~/.docker/config.json or a credential helper is removed with `docker logout`)",
            file.display()
        );
    }
    eprintln!("Removed the login for {registry} from {}", file.display());
    Ok(ExitCode::SUCCESS)
}

/// `host[:port]`, from that or an `oci://` reference's start.
fn registry_name(text: &str) -> Result<&str> {
    let name = text.strip_prefix("oci://").unwrap_or(text);
    let name = name.split('/').next().unwrap_or(name);
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
    {
        bail!("`{text}` is not a registry: write its host, e.g. ghcr.io or 127.0.0.1:5000");
    }
    Ok(name)
}
