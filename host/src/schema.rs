//! Checking tool arguments against the tool's JSON Schema before the plugin
//! runs. Errors name the key that is missing or wrong.

use jsonschema::Validator;
use serde_json::{Map, Value};

/// Problems reported for one call, at most.
const MAX_PROBLEMS: usize = 10;

/// The longest argument value quoted back in a problem.
const SHOWN_VALUE: usize = 80;

/// An input schema as every client can take it (issue 39): models send
/// `null` for optional fields they leave out, so every optional field of
/// the arguments takes `null` (and the host drops it before the plugin
/// sees it, [`without_null_optionals`]); an `enum` of a field typed
/// string-or-null lacking `null` refused it too (our own check and
/// Gemini's); and schemars' numeric `format`s (`uint32`) make Gemini warn
/// on every call. So `null` joins such a type and `enum`, and a numeric
/// format becomes the bound it means (`minimum: 0` for an unsigned one).
pub fn for_clients(schema: &mut Map<String, Value>) {
    let required = required(schema);
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if required.contains(name) {
                continue;
            }
            match property.get_mut("type") {
                Some(Value::String(one)) if one != "null" => {
                    let one = std::mem::take(one);
                    property["type"] = Value::from(vec![one, "null".to_string()]);
                }
                Some(Value::Array(types)) if !types.iter().any(|t| t == "null") => {
                    types.push("null".into());
                }
                _ => {}
            }
        }
    }
    for_clients_nested(schema);
}

/// The names an object schema requires.
fn required(schema: &Map<String, Value>) -> Vec<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `arguments` without the optional fields given as `null`: a plugin sees
/// them as not given, as the model meant.
pub fn without_null_optionals<'a>(
    schema: &Map<String, Value>,
    arguments: &'a Value,
) -> std::borrow::Cow<'a, Value> {
    let Some(given) = arguments
        .as_object()
        .filter(|g| g.values().any(Value::is_null))
    else {
        return std::borrow::Cow::Borrowed(arguments);
    };
    let required = required(schema);
    let dropped = |(k, v): (&String, &Value)| v.is_null() && !required.contains(k);
    if !given.iter().any(dropped) {
        return std::borrow::Cow::Borrowed(arguments);
    }
    let kept: Map<String, Value> = given
        .iter()
        .filter(|entry| !dropped(*entry))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    std::borrow::Cow::Owned(Value::Object(kept))
}

/// [`for_clients`]' fixes of enums and formats, on `schema` and all within.
fn for_clients_nested(schema: &mut Map<String, Value>) {
    let nullable = match schema.get("type") {
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        _ => false,
    };
    if nullable
        && let Some(Value::Array(values)) = schema.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    let numeric = schema
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| NUMERIC_FORMATS.contains(&f));
    if numeric {
        let format = schema.remove("format");
        if format.is_some_and(|f| f.as_str().is_some_and(|f| f.starts_with('u'))) {
            schema.entry("minimum").or_insert(Value::from(0));
        }
    }
    schema.values_mut().for_each(fit_nested);
}

/// [`for_clients_nested`] on every schema nested in `value`.
fn fit_nested(value: &mut Value) {
    match value {
        Value::Object(map) => for_clients_nested(map),
        Value::Array(items) => items.iter_mut().for_each(fit_nested),
        _ => {}
    }
}

/// The `format`s schemars writes for Rust's number types.
const NUMERIC_FORMATS: &[&str] = &[
    "uint", "uint8", "uint16", "uint32", "uint64", "int", "int8", "int16", "int32", "int64",
    "float", "double",
];

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
    fn optional_fields_take_null_and_numeric_formats_become_bounds() {
        let mut schema = json!({"type": "object", "required": ["offset"], "properties": {
            "kind": {"type": ["string", "null"], "enum": ["class", "method"]},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "limit": {"type": "integer", "format": "uint32", "maximum": 100},
            "ports": {"type": "array", "items": {"type": "integer", "format": "uint16"}},
            "offset": {"type": "integer", "format": "int64"},
            "when": {"type": "string", "format": "date-time"},
        }});
        for_clients(schema.as_object_mut().unwrap());
        let p = &schema["properties"];
        assert_eq!(p["kind"]["enum"], json!(["class", "method", null]));
        assert_eq!(p["mode"]["enum"], json!(["a", "b", null]));
        assert_eq!(
            p["limit"],
            json!({"type": ["integer", "null"], "minimum": 0, "maximum": 100})
        );
        assert_eq!(p["ports"]["type"], json!(["array", "null"]));
        assert_eq!(
            p["ports"]["items"],
            json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(
            p["offset"],
            json!({"type": "integer"}),
            "a required field takes no null"
        );
        assert_eq!(p["when"]["format"], "date-time", "other formats stay");
        let checked = ArgsSchema::compile(&schema).unwrap();
        assert!(
            checked
                .check(&json!({"kind": null, "mode": null, "ports": null, "offset": 1}))
                .is_ok()
        );
        assert!(checked.check(&json!({"limit": -1, "offset": 1})).is_err());
        assert!(checked.check(&json!({"offset": null})).is_err());
        // The plugin sees optional nulls as not given; others as they are.
        let args = json!({"ports": null, "offset": null, "mode": "a"});
        let object = schema.as_object().unwrap();
        assert_eq!(
            *without_null_optionals(object, &args),
            json!({"offset": null, "mode": "a"})
        );
    }

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
