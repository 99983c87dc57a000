//! `host view add`: a view put into a plugin component that was built
//! without the Rust SDK (componentize-py, componentize-js), as the custom
//! section the SDK's `view!` writes. The page gets the same head as the
//! SDK's views (`McpView`, theme variables) unless `--whole` says it is a
//! complete document of its own.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;

/// The head the Rust SDK's `view!` puts in front of a view.
const VIEW_HEAD: &str = include_str!("../../../plugins/sdk/views/head.html");

#[derive(Subcommand)]
pub enum ViewAction {
    /// Add the page FILE to COMPONENT as view NAME; link a tool to it with
    /// `"x-view": "NAME"` at the top of the tool's input schema.
    Add {
        /// The plugin component (.wasm), changed in place.
        component: PathBuf,
        /// The view's name (a-z, 0-9, `-`), its URI `ui://<plugin>/<name>`.
        name: String,
        /// The page: what follows the SDK's head (title, styles, `</head>`,
        /// body), or a whole document with --whole.
        file: PathBuf,
        /// A title for people. [default: NAME]
        #[arg(long)]
        title: Option<String>,
        /// FILE is a complete HTML document: put nothing in front of it.
        #[arg(long)]
        whole: bool,
    },
}

pub fn run(action: ViewAction) -> Result<ExitCode> {
    let ViewAction::Add {
        component,
        name,
        file,
        title,
        whole,
    } = action;
    let page = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read the page {}", file.display()))?;
    let title = title.unwrap_or_else(|| name.clone());
    if title.contains(['\t', '\n', '\0']) || page.contains('\0') {
        bail!("the title may not hold tabs or line breaks, nor the page NUL bytes");
    }
    let html = if whole {
        page
    } else {
        format!("{VIEW_HEAD}{page}")
    };
    let entry = format!("{name}\t{title}\n{html}\0");
    // Checked as the host will check it when it loads the plugin.
    let (views, broken) = crate::views::parse_section(entry.as_bytes());
    if let Some(why) = broken.first() {
        bail!("{why}");
    }
    let mut bytes = std::fs::read(&component)
        .with_context(|| format!("cannot read the component {}", component.display()))?;
    let declared = crate::declared::declared(&bytes)
        .with_context(|| format!("{} is not a plugin component", component.display()))?;
    if declared.views.iter().any(|v| v.name == views[0].name) {
        bail!("{} already has a view `{name}`", component.display());
    }
    // A custom section (id 0) at the component's top level: its name, then
    // the entry.
    let section_name = crate::views::SECTION.as_bytes();
    let mut body = leb128(section_name.len());
    body.extend_from_slice(section_name);
    body.extend_from_slice(entry.as_bytes());
    bytes.push(0);
    bytes.extend(leb128(body.len()));
    bytes.extend(body);
    crate::declared::declared(&bytes).context("the component does not read back")?;
    let tmp = component.with_extension("wasm.tmp");
    std::fs::write(&tmp, &bytes)?;
    std::fs::rename(&tmp, &component)
        .with_context(|| format!("cannot write {}", component.display()))?;
    println!(
        "added view `{name}` to {}; link a tool with \"x-view\": \"{name}\" in its input schema",
        component.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `n` as unsigned LEB128, as WebAssembly writes sizes.
fn leb128(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}
