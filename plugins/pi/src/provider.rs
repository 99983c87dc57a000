//! Which model provider pi uses, from the host's config (the plugin's
//! environment, set by the policy's `vars`), and whether it is ready. A
//! provider that is not ready is refused before pi starts.
//!
//! pi reads its provider settings from an agent directory; the plugin
//! writes them into its own (`PI_AGENT_DIR`, under the host's cache),
//! never the user's `~/.pi/agent`.

use plugin_sdk::ToolError;
use serde_json::{Value, json};

/// The environment variable pi reads the custom provider's key from: the
/// key itself never goes into a file.
pub const KEY_VAR: &str = "PI_PROVIDER_API_KEY";

#[derive(Debug, PartialEq)]
pub enum Provider {
    /// Anthropic's Claude, with OAuth credentials.
    Claude { model: String },
    /// An OpenAI-compatible endpoint.
    Custom {
        base_url: String,
        model: String,
        api_key: String,
    },
}

fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The configured provider, if it is ready.
pub fn configured(agent_dir: &str) -> Result<Provider, ToolError> {
    match var("PI_PROVIDER").as_deref().unwrap_or("custom") {
        "claude" | "anthropic" => {
            let oauth_env = var("ANTHROPIC_OAUTH_TOKEN").is_some();
            if !oauth_env && !oauth_in_auth_file(&format!("{agent_dir}/auth.json")) {
                return Err(ToolError::new(
                    "claude_auth_required",
                    "Claude is selected but there are no OAuth credentials; pi was not started",
                )
                .with_details(json!({
                    "missing": ["ANTHROPIC_OAUTH_TOKEN or an anthropic OAuth entry in auth.json"],
                    "auth_file": format!("{agent_dir}/auth.json"),
                    "remediation": format!(
                        "set ANTHROPIC_OAUTH_TOKEN for the host, or log in once with \
                         `PI_CODING_AGENT_DIR={agent_dir} pi` and `/login`"
                    ),
                })));
            }
            Ok(Provider::Claude {
                model: var("PI_CLAUDE_MODEL").unwrap_or_else(|| "claude-sonnet-4-5".into()),
            })
        }
        "custom" => {
            let (base_url, model, api_key) =
                (var("PI_BASE_URL"), var("PI_MODEL"), var("PI_API_KEY"));
            let missing: Vec<&str> = [
                ("baseUrl", &base_url),
                ("model", &model),
                ("apiKey", &api_key),
            ]
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| *k)
            .collect();
            if !missing.is_empty() {
                return Err(ToolError::new(
                    "custom_provider_incomplete",
                    format!("the custom provider is missing {}; pi was not started", missing.join(", ")),
                )
                .with_details(json!({
                    "missing": missing,
                    "remediation": "set PI_BASE_URL, PI_MODEL and PI_API_KEY for the host (see [plugins.pi] in the config)",
                })));
            }
            let base_url = base_url.expect("checked");
            if !is_http_url(&base_url) {
                return Err(ToolError::new(
                    "invalid_config",
                    format!("PI_BASE_URL is `{base_url}`, which is not an http(s) URL; pi was not started"),
                )
                .with_details(json!({
                    "remediation": "set PI_BASE_URL to the provider's API root, e.g. https://api.openai.com/v1",
                })));
            }
            Ok(Provider::Custom {
                base_url,
                model: model.expect("checked"),
                api_key: api_key.expect("checked"),
            })
        }
        other => Err(ToolError::new(
            "invalid_config",
            format!("PI_PROVIDER is `{other}`; use `claude` or `custom`"),
        )
        .with_details(json!({"remediation": "set PI_PROVIDER to claude or custom"}))),
    }
}

/// `http://host…` or `https://host…`: a base URL a provider can have.
fn is_http_url(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once("://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    matches!(scheme, "http" | "https")
        && !host.is_empty()
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// An `anthropic` entry of type oauth in pi's auth.json (or a key that is
/// an OAuth token, `sk-ant-oat...`).
fn oauth_in_auth_file(path: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let Ok(auth) = serde_json::from_str::<Value>(&text) else {
        return false;
    };
    let entry = &auth["anthropic"];
    // An OAuth entry counts only with a token in it: one left empty (a
    // login that did not finish) would start pi only to fail.
    let has = |field: &str| entry[field].as_str().is_some_and(|t| !t.trim().is_empty());
    (entry["type"] == "oauth" && (has("access") || has("refresh")))
        || entry["key"]
            .as_str()
            .is_some_and(|k| k.contains("sk-ant-oat"))
}

impl Provider {
    /// pi's `--provider` and `--model` values.
    pub fn pi_args(&self) -> Vec<String> {
        let (provider, model) = match self {
            Provider::Claude { model } => ("anthropic", model),
            Provider::Custom { model, .. } => ("custom", model),
        };
        vec![
            "--provider".into(),
            provider.into(),
            "--model".into(),
            format!("{provider}/{model}"),
        ]
    }

    /// Variables pi needs besides the policy's pass-through ones.
    pub fn env(&self, agent_dir: &str) -> Vec<(String, String)> {
        let mut env = vec![("PI_CODING_AGENT_DIR".to_string(), agent_dir.to_string())];
        if let Provider::Custom { api_key, .. } = self {
            env.push((KEY_VAR.into(), api_key.clone()));
        }
        env
    }

    /// Write pi's configuration for this provider into the private agent
    /// directory: models.json (custom provider) and settings.json (retries).
    pub fn write_config(&self, agent_dir: &str) -> Result<(), ToolError> {
        let write = |name: &str, value: &Value| {
            let path = format!("{agent_dir}/{name}");
            std::fs::create_dir_all(agent_dir)
                .and_then(|()| std::fs::write(&path, serde_json::to_vec_pretty(value).expect("JSON")))
                .map_err(|e| {
                    ToolError::new("invalid_config", format!("cannot write {path}: {e}"))
                        .with_details(json!({"remediation": "check that PI_AGENT_DIR is inside the plugin's fs.write"}))
                })
        };
        if let Provider::Custom {
            base_url, model, ..
        } = self
        {
            write(
                "models.json",
                &json!({"providers": {"custom": {
                    "baseUrl": base_url,
                    "api": "openai-completions",
                    "apiKey": KEY_VAR,
                    "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
                    "models": [{"id": model}],
                }}}),
            )?;
        }
        let setting = |name: &str, default: u64| {
            var(name)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(default)
        };
        write(
            "settings.json",
            &json!({"retry": {
                "enabled": true,
                "maxRetries": setting("PI_MAX_RETRIES", 3),
                "baseDelayMs": setting("PI_RETRY_BASE_DELAY_MS", 2000),
            }}),
        )
    }
}
