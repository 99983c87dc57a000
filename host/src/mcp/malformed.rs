//! Requests rmcp could not read as the method they name. rmcp files a
//! request whose params do not fit its method's shape as a custom request,
//! which would be answered "method not found" (-32601): a `tools/call`
//! whose `arguments` is a string was told the method does not exist. An
//! MCP method's name with params that do not fit is invalid params
//! (-32602), saying what does not fit.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolRequestParams, CustomRequest, GetPromptRequestParams};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The error for a request rmcp filed as custom.
pub fn refusal(request: &CustomRequest) -> McpError {
    let params = request.params.clone().unwrap_or(Value::Null);
    let why = match request.method.as_str() {
        "tools/call" => why_not::<CallToolRequestParams>(&params, &["name", "arguments"]),
        "prompts/get" => why_not::<GetPromptRequestParams>(&params, &["name", "arguments"]),
        // Any other name keeps "method not found": the conformance suites
        // send methods a server may not serve (tasks/list in a stateless
        // session) and expect -32601 for them.
        _ => None,
    };
    match why {
        Some(why) => McpError::invalid_params(format!("{}: {why}", request.method), None),
        None => McpError::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            request.method.clone(),
            None,
        ),
    }
}

/// Why `params` is not a `T`: the first of `fields` whose type is wrong
/// (an object's field must be an object), else serde's own words.
fn why_not<T: DeserializeOwned>(params: &Value, fields: &[&str]) -> Option<String> {
    let Value::Object(map) = params else {
        return Some("params must be an object".into());
    };
    for field in fields {
        let wrong = match (*field, map.get(*field)) {
            ("name", Some(v)) => !v.is_string(),
            ("name", None) => {
                return Some("`name` is missing: give the tool's or prompt's name".into());
            }
            (_, Some(v)) => !(v.is_object() || v.is_null()),
            (_, None) => false,
        };
        if wrong {
            let kind = match map.get(*field) {
                Some(Value::String(_)) => "a string",
                Some(Value::Array(_)) => "an array",
                Some(Value::Number(_)) => "a number",
                Some(Value::Bool(_)) => "a boolean",
                _ => "of another type",
            };
            let should = if *field == "name" {
                "a string"
            } else {
                "an object (name → value)"
            };
            return Some(format!("`{field}` must be {should}, not {kind}"));
        }
    }
    serde_json::from_value::<T>(params.clone())
        .err()
        .map(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(method: &str, params: Value) -> CustomRequest {
        CustomRequest::new(method, Some(params))
    }

    #[test]
    fn a_known_method_with_bad_params_is_invalid_params_naming_the_field() {
        let e = refusal(&request(
            "tools/call",
            json!({"name": "x", "arguments": "a b"}),
        ));
        assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(
            e.message.contains("`arguments` must be an object"),
            "{}",
            e.message
        );
        let e = refusal(&request("tools/call", json!({"arguments": {}})));
        assert!(e.message.contains("`name` is missing"), "{}", e.message);
        let e = refusal(&request("no/such", json!({})));
        assert_eq!(e.code, rmcp::model::ErrorCode::METHOD_NOT_FOUND);
    }
}
