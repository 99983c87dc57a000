//! The allowed models: `config/models.json` (compiled in as the default) or
//! the file `COPILOT_MODELS_FILE` names. Checked every time it is loaded: a
//! bad file is `invalid_config` and no call runs.

use plugin_sdk::ToolError;
use serde::Deserialize;
use serde_json::json;

/// The shipped list, used when no file is configured.
const SHIPPED: &str = include_str!("../../../config/models.json");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Models {
    pub models: Vec<String>,
    pub default: Option<String>,
}

impl Models {
    /// The model to use for a request.
    pub fn pick(&self, asked: Option<&str>) -> Result<String, ToolError> {
        let name = asked.or(self.default.as_deref()).unwrap_or(&self.models[0]);
        if self.models.iter().any(|m| m == name) {
            Ok(name.to_string())
        } else {
            Err(ToolError::new(
                "invalid_request",
                format!("model `{name}` is not allowed; allowed: {}", self.models.join(", ")),
            )
            .with_details(json!({"allowed_models": self.models, "remediation": "pick one of allowed_models, or add it to models.json"})))
        }
    }
}

/// Load and check the models list.
pub fn load() -> Result<Models, ToolError> {
    // A relative path is the workspace's, as the policy's own paths are.
    let configured = std::env::var("COPILOT_MODELS_FILE")
        .ok()
        .filter(|p| !p.is_empty())
        .map(|p| {
            if std::path::Path::new(&p).is_absolute() {
                p
            } else {
                std::path::Path::new(&plugin_sdk::workspace())
                    .join(p)
                    .to_string_lossy()
                    .into_owned()
            }
        });
    let (source, text) = match &configured {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => (path.clone(), text),
            Err(e) => {
                return Err(invalid(
                    path,
                    &format!(
                        "cannot be read ({e}); it must lie in a directory of the plugin's fs.read"
                    ),
                ));
            }
        },
        None => (
            "config/models.json (built in)".to_string(),
            SHIPPED.to_string(),
        ),
    };
    parse(&source, &text)
}

pub fn parse(source: &str, text: &str) -> Result<Models, ToolError> {
    let models: Models =
        serde_json::from_str(text).map_err(|e| invalid(source, &format!("is not valid: {e}")))?;
    if models.models.is_empty() {
        return Err(invalid(
            source,
            "lists no models: `models` must have at least one name",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for name in &models.models {
        let ok = !name.is_empty()
            && name.len() <= 100
            && name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c));
        if !ok {
            return Err(invalid(
                source,
                &format!("has a bad model name {name:?}: use letters, digits and . _ : -"),
            ));
        }
        if !seen.insert(name) {
            return Err(invalid(source, &format!("lists `{name}` twice")));
        }
    }
    if let Some(default) = &models.default
        && !models.models.contains(default)
    {
        return Err(invalid(
            source,
            &format!("has default `{default}`, which is not in `models`"),
        ));
    }
    Ok(models)
}

fn invalid(source: &str, what: &str) -> ToolError {
    ToolError::new("invalid_config", format!("the models file {source} {what}")).with_details(json!({
        "file": source,
        "remediation": "fix the file: {\"models\": [\"name\", ...], \"default\": \"name\"}; nothing was run",
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_list_is_valid() {
        let models = parse("shipped", SHIPPED).unwrap();
        assert_eq!(models.pick(None).unwrap(), "auto");
        assert_eq!(models.pick(Some("gpt-5")).unwrap(), "gpt-5");
        assert_eq!(
            models.pick(Some("nope")).unwrap_err().code,
            "invalid_request"
        );
    }

    #[test]
    fn bad_files_are_invalid_config() {
        for bad in [
            "not json",
            r#"{"models": []}"#,
            r#"{"models": ["ok", "ok"]}"#,
            r#"{"models": ["--help"]}"#,
            r#"{"models": ["a"], "default": "b"}"#,
            r#"{"models": ["a"], "extra": 1}"#,
            r#"{"models": "a"}"#,
        ] {
            let e = parse("f.json", bad).unwrap_err();
            assert_eq!(e.code, "invalid_config", "{bad}");
        }
    }
}
