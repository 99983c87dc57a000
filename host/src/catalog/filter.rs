//! Tool filters: which of a plugin's tools exist for this host. A
//! plugin's `tools.allow` / `tools.deny` (globs over its tool names) in the
//! policy, and `--tools PATTERN` for one serve (one client's host), narrow
//! what is listed and callable; a hidden tool's call is refused naming what
//! hides it (fewer tools in a model's context, a tool a team never wants
//! an agent to call).

use super::ToolDef;
use crate::policy::Grants;

/// `*` stands for any run of characters; the rest is literal.
pub fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Why tool `name` (as the plugin names it, or as exposed) is hidden, if
/// it is.
fn why_hidden(grants: &Grants, only: &[String], name: &str, exposed: &str) -> Option<String> {
    let matches = |patterns: &[String]| {
        patterns
            .iter()
            .find(|p| glob(p, name) || glob(p, exposed))
            .cloned()
    };
    let table = format!("[plugins.{}] in {}", grants.plugin, grants.config_hint);
    if let Some(pattern) = matches(&grants.tool_deny) {
        return Some(format!("it matches tools.deny `{pattern}` under {table}"));
    }
    if !grants.tool_allow.is_empty() && matches(&grants.tool_allow).is_none() {
        return Some(format!(
            "it matches no pattern of tools.allow under {table}"
        ));
    }
    if !only.is_empty() && matches(only).is_none() {
        return Some(format!(
            "this host serves only the tools matching `--tools {}`",
            only.join(" ")
        ));
    }
    None
}

/// Take the hidden tools out of `tools`; each one's exposed name and why.
pub fn apply(grants: &Grants, only: &[String], tools: &mut Vec<ToolDef>) -> Vec<(String, String)> {
    let mut hidden = Vec::new();
    tools.retain(|t| match why_hidden(grants, only, &t.name, &t.exposed) {
        Some(why) => {
            hidden.push((t.exposed.clone(), why));
            false
        }
        None => true,
    });
    hidden
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs_match_runs_anywhere() {
        assert!(glob("environment_file_*", "environment_file_delete"));
        assert!(glob("*delete", "environment_file_delete"));
        assert!(glob("godot.*", "godot.search"));
        assert!(glob("env*file*te", "environment_file_delete"));
        assert!(glob("run_test", "run_test"));
        assert!(!glob("run_test", "run_tests"));
        assert!(!glob("godot.*", "environment_list"));
        assert!(glob("*", "anything"));
    }
}
