//! Checking tool arguments against the tool's JSON Schema before the plugin
//! runs. Errors name the key that is missing or wrong.

use jsonschema::Validator;
use serde_json::Value;

/// Problems reported for one call, at most.
const MAX_PROBLEMS: usize = 10;

/// The longest argument value quoted back in a problem.
const SHOWN_VALUE: usize = 80;

pub struct ArgsSchema {
    validator: Validator,
}

/// One problem with a call's arguments.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Problem {
    /// JSON Pointer to the offending value (`""` is the arguments object).
    pub path: String,
    pub message: String,
}

impl ArgsSchema {
    pub fn compile(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema)
            .map(|validator| ArgsSchema { validator })
            .map_err(|e| e.to_string())
    }

    pub fn check(&self, arguments: &Value) -> Result<(), Vec<Problem>> {
        let problems: Vec<Problem> = self
            .validator
            .iter_errors(arguments)
            .take(MAX_PROBLEMS)
            .map(|e| {
                let path = e.instance_path().to_string();
                let at = if path.is_empty() {
                    String::new()
                } else {
                    format!("at `{path}`: ")
                };
                // A long value is not echoed back (a 1 MB argument made a
                // 3 MB answer): its size and first characters stand for it.
                let value = e.instance().to_string();
                let message = if value.len() <= SHOWN_VALUE {
                    e.to_string()
                } else {
                    let start: String = value.chars().take(SHOWN_VALUE / 2).collect();
                    e.masked_with(format!(
                        "the value ({} bytes, starting {start}…)",
                        value.len()
                    ))
                    .to_string()
                };
                Problem {
                    message: format!("{at}{message}"),
                    path,
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_long_bad_value_is_not_echoed_back() {
        let schema = ArgsSchema::compile(&json!({
            "type": "object",
            "properties": {"name": {"type": "string", "maxLength": 10}, "n": {"type": "integer"}},
        }))
        .unwrap();
        let big = "x".repeat(1 << 20);
        let problems = schema.check(&json!({"name": big, "n": big})).unwrap_err();
        let total: usize = problems.iter().map(|p| p.message.len()).sum();
        assert!(total < 1000, "{problems:?}");
        assert!(
            problems.iter().all(|p| p.message.contains("1048578 bytes")),
            "{problems:?}"
        );
    }

    #[test]
    fn names_missing_and_wrong_keys() {
        let schema = ArgsSchema::compile(&json!({
            "type": "object",
            "properties": {"runner": {"enum": ["cargo", "pytest"]}, "timeout_ms": {"type": "integer"}},
            "required": ["runner", "timeout_ms"],
            "additionalProperties": false
        }))
        .unwrap();
        assert!(
            schema
                .check(&json!({"runner": "cargo", "timeout_ms": 5}))
                .is_ok()
        );
        let missing = schema.check(&json!({"runner": "cargo"})).unwrap_err();
        assert!(missing[0].message.contains("timeout_ms"), "{missing:?}");
        let wrong = schema
            .check(&json!({"runner": "make", "timeout_ms": "soon"}))
            .unwrap_err();
        assert_eq!(wrong.len(), 2);
        assert!(wrong.iter().any(|p| p.path == "/runner"));
        assert!(
            wrong
                .iter()
                .any(|p| p.path == "/timeout_ms" && p.message.contains("soon")),
            "{wrong:?}"
        );
        let extra = schema
            .check(&json!({"runner": "cargo", "timeout_ms": 1, "cmd": "rm -rf /"}))
            .unwrap_err();
        assert!(extra[0].message.contains("cmd"), "{extra:?}");
    }
}
