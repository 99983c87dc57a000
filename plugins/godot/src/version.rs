//! Godot versions as the files say them: `4.6` of a build's
//! `4.6.3.stable.official`, a class file's `version` attribute, a
//! project's `project.godot`, and which of them a caller's `version`
//! names.

/// `4.6` of `4.6.3.stable.official`.
pub fn major_minor(version: &str) -> String {
    let label: String = version
        .split('.')
        .take(2)
        .take_while(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        .collect::<Vec<_>>()
        .join(".");
    if label.is_empty() {
        "unknown".into()
    } else {
        label
    }
}

/// The `version` attribute of a class file's `<class>` tag (Godot 3
/// writes one).
pub fn class_version(xml: &str) -> Option<&str> {
    let tag = xml
        .split_once("<class ")
        .and_then(|(_, rest)| rest.split_once('>'))
        .map_or("", |(tag, _)| tag);
    tag.split_once(" version=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(version, _)| version)
}

/// For ordering versions: `4.10` after `4.9`.
pub fn version_key(version: &str) -> Vec<u64> {
    version.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// The Godot version a `project.godot` is for: its `config/features`
/// version (`"4.3"`, Godot 4), else `3` for a Godot 3 file
/// (`config_version=4`) and `4` for a Godot 4 one (`config_version=5`).
pub fn project_version(text: &str) -> Option<String> {
    let value = |key: &str| {
        text.lines()
            .find_map(|line| {
                line.trim()
                    .strip_prefix(key)?
                    .trim_start()
                    .strip_prefix('=')
            })
            .map(str::trim)
    };
    let featured = value("config/features").and_then(|features| {
        features
            .split('"')
            .skip(1)
            .step_by(2)
            .find(|f| {
                f.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(str::to_string)
    });
    featured.or_else(|| match value("config_version")? {
        "4" => Some("3".into()),
        "5" => Some("4".into()),
        _ => None,
    })
}

/// `wanted` names `version`: the same, or more precise (`4.6.3`), or less
/// (`4` for `4.6`).
pub fn matches_version(version: &str, wanted: &str) -> bool {
    let wanted = wanted.trim_start_matches(['v', 'V']);
    version == wanted
        || wanted.starts_with(&format!("{version}."))
        || version.starts_with(&format!("{wanted}."))
}

/// `$DOCS_URL` for a file: its `version` attribute (3.x has one) or stable.
pub fn docs_url(xml: &str) -> String {
    let version = class_version(xml)
        .map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "stable".into());
    format!("https://docs.godotengine.org/en/{version}")
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_projects_godot_version_is_read() {
        let four = "config_version=5\n\n[application]\n\nconfig/name=\"Demo\"\n\
                    config/features=PackedStringArray(\"4.3\", \"GL Compatibility\")\n";
        assert_eq!(project_version(four).as_deref(), Some("4.3"));
        assert_eq!(project_version("config_version=5\n").as_deref(), Some("4"));
        assert_eq!(
            project_version("config_version=4\n[application]\n").as_deref(),
            Some("3")
        );
        assert_eq!(project_version("nothing here"), None);
    }

    use super::*;

    #[test]
    fn docs_url_uses_the_version_attribute_or_stable() {
        assert_eq!(
            docs_url(r#"<class name="A" version="3.6" >"#),
            "https://docs.godotengine.org/en/3.6"
        );
        assert_eq!(
            docs_url(r#"<class name="A" inherits="B">"#),
            "https://docs.godotengine.org/en/stable"
        );
    }
}
