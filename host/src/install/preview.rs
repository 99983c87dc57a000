//! `host inspect` and `host update`: what a plugin is before it is put in
//! the folder (its tools, views, prompts, resources, the host interfaces it
//! imports, what your policy grants its name, its digest and signature),
//! and each locked plugin's tag resolved again, installed only after the
//! same checks as `install`.

use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use super::{Choice, Fetched, Lock, Source, Trust, claim, digest_of, read_bounded};
use crate::catalog::{Loader, Plugin};

/// A plugin as it would be installed.
pub struct Preview {
    pub name: String,
    pub source: String,
    pub digest: String,
    pub manifest: Option<String>,
    pub signer: Option<String>,
    /// What `install` would say of its signature under `[trust]`.
    pub signature: String,
    pub imports: Vec<String>,
    pub plugin: Arc<Plugin>,
    pub grants: Vec<String>,
}

/// `text`: a plugin of the folder by name, or a source `install` takes,
/// fetched and loaded as `install` would, nothing written.
pub async fn inspect(loader: &Loader, text: &str) -> Result<Preview> {
    // Read once: it says both how to fetch and what to say of the signature.
    let mut trust = Trust::of(loader)?;
    let installed = loader.plugins_dir.join(format!("{text}.wasm"));
    let (source_text, fetched, default_name) = if claim::check_name(text, text).is_ok()
        && installed.is_file()
    {
        let lock = Lock::read(&loader.plugins_dir)?;
        let entry = lock.plugins.iter().find(|e| e.name == text);
        let fetched = Fetched {
            bytes: read_bounded(&installed)?,
            manifest: entry.and_then(|e| e.manifest.clone()),
            signer: entry.and_then(|e| e.signer.clone()),
        };
        let source = entry.map_or_else(|| installed.display().to_string(), |e| e.source.clone());
        (source, fetched, text.to_string())
    } else {
        // A plain name that is neither installed nor a file here: the
        // person meant an installed plugin.
        if claim::check_name(text, text).is_ok() && !std::path::Path::new(text).exists() {
            bail!(
                "no plugin `{text}` is installed in {} (`host list plugins` shows them), and `{text}` is \
                 no file here: give an installed plugin's name, a .wasm file or a registry reference \
                 (oci://registry/name:tag)",
                loader.plugins_dir.display()
            );
        }
        let source = Source::parse(text)?;
        // Fetched whatever its signature: the answer says what install
        // would do with it.
        let required = std::mem::replace(&mut trust.required, false);
        let fetched = source.fetch(&trust).await;
        trust.required = required;
        (text.to_string(), fetched?, source.default_name())
    };
    let signature = match (&fetched.signer, fetched.manifest.is_some()) {
        (Some(signer), _) => format!("signed by {signer}, a key you trust"),
        (None, _) if trust.required => {
            "no signature by a key you trust: `[trust] require_signatures` is on, install refuses it"
                .into()
        }
        (None, true) if trust.keys.is_empty() => {
            "not checked: `[trust] keys` names no key".into()
        }
        (None, true) => "no signature by a key you trust".into(),
        (None, false) => "none (only registry artifacts carry signatures)".into(),
    };
    let name = claim::name(
        &Choice {
            name: None,
            replace: false,
            yes: false,
        },
        &default_name,
        &source_text,
        &fetched.bytes,
    )?;
    let imports = imports(&fetched.bytes)?;
    let digest = digest_of(&fetched.bytes);
    let file = loader.plugins_dir.join(format!("{name}.wasm"));
    let plugin = loader
        .try_bytes(&name, &file, fetched.bytes)
        .await
        .map_err(|e| anyhow!("{source_text} does not load in this host: {e:#}"))?;
    Ok(Preview {
        grants: claim::described(&loader.grants(&name)),
        name,
        source: source_text,
        digest,
        manifest: fetched.manifest,
        signer: fetched.signer,
        signature,
        imports,
        plugin,
    })
}

impl Preview {
    pub fn to_json(&self) -> Value {
        let tools: Vec<Value> = self
            .plugin
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.exposed,
                    "description": t.description,
                    "inputSchema": t.input_schema,
                    "outputSchema": t.output_schema,
                    "view": t.view,
                })
            })
            .collect();
        let templates: Vec<Value> = self
            .plugin
            .templates
            .iter()
            .map(|t| json!({"uriTemplate": t.uri_template, "name": t.name, "description": t.description}))
            .collect();
        let prompts: Vec<Value> = self
            .plugin
            .prompts
            .iter()
            .map(|p| json!({"name": p.name, "description": p.description}))
            .collect();
        let views: Vec<Value> = self
            .plugin
            .views
            .iter()
            .map(|v| json!({"name": v.name, "title": v.title}))
            .collect();
        json!({
            "name": self.name,
            "source": self.source,
            "digest": self.digest,
            "manifest": self.manifest,
            "signature": self.signature,
            "signer": self.signer,
            "imports": self.imports,
            "grants": self.grants,
            "tools": tools,
            "hidden_tools": self.plugin.hidden.iter().map(|(name, why)| json!({"name": name, "by": why})).collect::<Vec<_>>(),
            "views": views,
            "prompts": prompts,
            "resource_templates": templates,
        })
    }
}

/// The host interfaces a component imports (`mcphost:plugin/process@…`,
/// `wasi:filesystem/types@…`), sorted.
pub fn imports(bytes: &[u8]) -> Result<Vec<String>> {
    let mut found = std::collections::BTreeSet::new();
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.context("not a WebAssembly component")? {
            wasmparser::Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    found.insert(import?.name.name.to_string());
                }
            }
            wasmparser::Payload::ModuleSection { .. }
            | wasmparser::Payload::ComponentSection { .. } => depth += 1,
            wasmparser::Payload::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(found.into_iter().collect())
}
