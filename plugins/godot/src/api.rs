//! What the look-up tools do, over the host's index: class and symbol
//! look-ups (with inheritance), manual pages, class listing, "did you
//! mean" suggestions for names that are not there, and the errors every
//! tool shares (search is [`crate::search`]).

use plugin_sdk::ToolError;
use plugin_sdk::index;
use serde_json::Value;

use crate::corpus::ensure;
use crate::model::{SYMBOL_KINDS, section_of};
use crate::renames::{self, Kind};
use crate::uri;

const MAX_SUGGESTIONS: usize = 5;

pub fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new("INVALID_ARGUMENT", message)
}

fn not_found(message: String, suggestions: Vec<String>) -> ToolError {
    let message = if suggestions.is_empty() {
        message
    } else {
        format!("{message}; did you mean: {}?", suggestions.join(", "))
    };
    ToolError::new("NOT_FOUND", message)
        .with_details(serde_json::json!({ "suggestions": suggestions }))
}

/// The longest class or qualified member name taken (Godot's longest are
/// under 60 characters; a longer one only costs time to look up).
pub const MAX_NAME_CHARS: usize = 256;

/// The kind of the manual's sections in the index and in `kind`.
pub const MANUAL: &str = "manual";
pub fn manual_not_served(version: &str) -> ToolError {
    ToolError::new(
        "CONFIG_ERROR",
        format!(
            "the manual is not served with Godot {version}: set GODOT_MANUAL_DIR to a godot-docs checkout \
             (`git clone --depth 1 https://github.com/godotengine/godot-docs`); it is searched beside a 4.x reference"
        ),
    )
}

/// A manual page (or its section `anchor`) as its sections: heading,
/// prose, code, and the classes and members it links to.
pub fn manual_page(page: &str, anchor: Option<&str>) -> Result<Value, ToolError> {
    let dir = crate::corpus::manual_dir().ok_or_else(|| manual_not_served("4"))?;
    let file = dir.join(format!("{page}.rst"));
    let text = std::fs::read_to_string(&file).map_err(|e| {
        ToolError::new(
            "NOT_FOUND",
            format!(
                "no manual page `{page}` ({}: {e}); godot.search with kind `manual` finds pages",
                file.display()
            ),
        )
    })?;
    // A label's anchor (`#doc_using_character_body_2d`, as links to the
    // page's top use) names its heading's section too, with or without its
    // `doc_` (`#pausing-games` for `.. _doc_pausing_games:`).
    let label = anchor.map(|a| a.to_lowercase().replace('_', "-"));
    let named_by = |s: &crate::manual::Section, l: &str| {
        s.labels
            .iter()
            .any(|own| own == l || own.strip_prefix("doc-") == Some(l))
    };
    let sections: Vec<Value> = crate::manual::parse(page, &text)
        .into_iter()
        .filter(|s| {
            anchor.is_none_or(|a| s.anchor == a || label.as_ref().is_some_and(|l| named_by(s, l)))
        })
        .map(|s| {
            serde_json::json!({
                "uri": uri::manual(page, &s.anchor),
                "heading": s.heading,
                "text": s.prose.trim(),
                "code": s.code.trim(),
                "links": s.links,
            })
        })
        .collect();
    if sections.is_empty() {
        return Err(ToolError::new(
            "NOT_FOUND",
            format!(
                "manual page `{page}` has no section `{}`",
                anchor.unwrap_or_default()
            ),
        ));
    }
    Ok(serde_json::json!({ "page": page, "sections": sections }))
}

/// A member as `owner`'s JSON holds it, with its kind, class and URI;
/// `None` when `owner` has no such member.
fn symbol_json(
    index: &str,
    owner: &str,
    kind: &str,
    name: &str,
) -> Result<Option<Value>, ToolError> {
    let uri = uri::symbol(owner, kind, name);
    let Some(section) = section_of(kind) else {
        return Ok(None);
    };
    if stored(index, &uri, "kind")?.is_none() {
        return Ok(None);
    }
    let class: Value = match stored(index, &uri::class(owner), "json")? {
        Some(json) => serde_json::from_str(&json)
            .map_err(|e| internal(format!("stored class is not JSON: {e}")))?,
        None => return Ok(None),
    };
    // `Vector2~2`: the second of the members of that name (overloads).
    let (base, overload) = crate::model::split_overload(name);
    let same: Vec<&Value> = class[section]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["name"] == base)
        .collect();
    let Some(mut value) = same.get(overload).map(|v| (*v).clone()) else {
        return Err(internal(format!("{uri} is indexed but not in its class")));
    };
    if let Some(object) = value.as_object_mut() {
        object.insert("kind".into(), kind.into());
        object.insert("class".into(), owner.into());
        object.insert("uri".into(), uri.into());
        if same.len() > 1 {
            // Every overload's own URI, this one's among them.
            let all: Vec<String> = (0..same.len())
                .map(|n| uri::symbol(owner, kind, &crate::model::overload_name(base, n)))
                .collect();
            object.insert("overloads".into(), all.into());
        }
    }
    Ok(Some(value))
}

/// A stored field of a document of `index`.
fn stored(index: &str, id: &str, field: &str) -> Result<Option<String>, ToolError> {
    Ok(index::get(index, id, &[field.to_string()])
        .map_err(from_index)?
        .and_then(|doc| doc.into_iter().next().map(|(_, v)| v)))
}

/// The sections of a class that hold members (see `model::ClassDoc`).
pub const MEMBER_SECTIONS: [&str; 8] = [
    "methods",
    "members",
    "signals",
    "constants",
    "theme_items",
    "annotations",
    "operators",
    "constructors",
];

/// The class; with `include_ancestors`, also what it inherits, grouped by
/// ancestor (nearest first), each member without its description; with a
/// `part`, a long one as [`crate::budget::fit`] makes it (a resource read
/// gets it whole).
pub fn get_class(
    version: Option<&str>,
    name: &str,
    include_ancestors: bool,
    part: Option<&crate::budget::Part<'_>>,
) -> Result<Value, ToolError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(invalid(
            "`name` is empty: give a class name, e.g. {\"name\": \"Node2D\"}",
        ));
    }
    let (docs, _, _) = ensure(version)?;
    let index = docs.index();
    let class_json = |class: &str| -> Result<Option<Value>, ToolError> {
        stored(&index, &uri::class(class), "json")?
            .map(|json| {
                serde_json::from_str::<Value>(&json)
                    .map_err(|e| internal(format!("stored class is not JSON: {e}")))
            })
            .transpose()
    };
    let major = major_of(&docs.version);
    let (mut class, renamed) = match class_json(name)? {
        Some(class) => (class, None),
        // A name from the other side of the 3→4 renames: the class it is now.
        None => match renames::across(Kind::Class, name, major)
            .map(|(other, note)| class_json(other).map(|c| c.map(|c| (c, note))))
            .transpose()?
            .flatten()
        {
            Some((class, note)) => (class, Some(note)),
            None => {
                // Its file may be here and broken: say so, not just "no class".
                if let Some(why) = docs.unparsed(name) {
                    return Err(ToolError::new(
                        "NOT_FOUND",
                        format!(
                            "class `{name}` is not served: its file does not parse ({why}); fix or replace the file, the rest of the reference is served"
                        ),
                    ));
                }
                return Err(not_found(
                    format!("no class named `{name}` in Godot {}", docs.version),
                    closest(name, &all_classes(&index)?),
                ));
            }
        },
    };
    if let Some(note) = renamed {
        class["renamed"] = serde_json::json!({ "from": name, "note": note });
    }
    if include_ancestors {
        let mut inherited = Vec::new();
        let mut at = class["inherits"].as_str().map(str::to_string);
        while let Some(ancestor) = at.take().filter(|_| inherited.len() < 64) {
            let Some(found) = class_json(&ancestor)? else {
                break;
            };
            let mut group = serde_json::json!({ "class": ancestor });
            for section in MEMBER_SECTIONS {
                let members: Vec<Value> = found[section]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|member| {
                        let mut member = member.clone();
                        if let Some(fields) = member.as_object_mut() {
                            fields.remove("description");
                        }
                        member
                    })
                    .collect();
                if !members.is_empty() {
                    group[section] = Value::Array(members);
                }
            }
            inherited.push(group);
            at = found["inherits"].as_str().map(str::to_string);
        }
        class["inherited"] = Value::Array(inherited);
    }
    Ok(match part {
        Some(part) => crate::budget::fit(
            class,
            &MEMBER_SECTIONS,
            part,
            crate::budget::MAX_ANSWER_BYTES,
        ),
        None => class,
    })
}

/// Every class of the reference, by the URIs of their own entries: the
/// `class` field also holds manual pages' titles (a section's owner), which
/// are no class to list or suggest (issue 54, item 7).
fn all_classes(index: &str) -> Result<Vec<String>, ToolError> {
    let prefix = uri::class("");
    Ok(index::terms(index, "uri", &prefix, 100_000)
        .map_err(from_index)?
        .into_iter()
        .filter_map(|u| match uri::parse(&u) {
            Ok((_, uri::Target::Class(name))) => Some(name),
            _ => None,
        })
        .collect())
}

/// `{qname}` is `<Class>.<member>`, split at the first dot (member names
/// may hold dots and slashes). Looks in the class, then its ancestors;
/// `kind` picks one kind when a name is used by several.
pub fn get_symbol(
    version: Option<&str>,
    qname: &str,
    kind: Option<&str>,
) -> Result<Value, ToolError> {
    let form = "use `<Class>.<member>`, e.g. `Node._ready`, `Vector2.x` or `Button.pressed`";
    let Some((class, member)) = qname.trim().split_once('.') else {
        return Err(invalid(format!("`qname` `{qname}` has no dot: {form}")));
    };
    if class.is_empty() || member.is_empty() {
        return Err(invalid(format!(
            "`qname` `{qname}` lacks a class or a member: {form}"
        )));
    }
    let (docs, _, _) = ensure(version)?;
    let index = docs.index();
    let major = major_of(&docs.version);
    let asked = format!("{class}.{member}");
    // A class renamed between 3 and 4 is looked up under this version's name.
    let class_note = match stored(&index, &uri::class(class), "inherits")? {
        Some(_) => None,
        None => renames::across(Kind::Class, class, major),
    };
    let class = class_note.as_ref().map_or(class, |(other, _)| *other);
    let kinds: Vec<&str> = match kind {
        Some(k) => vec![k],
        None => SYMBOL_KINDS.to_vec(),
    };
    let mut chain = Vec::new();
    let mut at = Some(class.to_string());
    while let Some(current) = at.take().filter(|c| !c.is_empty() && chain.len() < 64) {
        let Some(parent) = stored(&index, &uri::class(&current), "inherits")? else {
            if chain.is_empty() {
                return Err(not_found(
                    format!("no class named `{class}` in Godot {}", docs.version),
                    closest(class, &all_classes(&index)?),
                ));
            }
            break;
        };
        chain.push(current);
        at = Some(parent);
    }
    // Nearest class first; within a class, kinds in the order of SYMBOL_KINDS;
    // then the member's name across the 3→4 renames.
    let renamed_members: Vec<(&str, &str, Option<String>)> = kinds
        .iter()
        .map(|kind| (*kind, member, None))
        .chain(kinds.iter().filter_map(|kind| {
            let (other, note) = renames::across(rename_kind(kind)?, member, major)?;
            Some((*kind, other, Some(note)))
        }))
        .collect();
    for (kind, name, member_note) in &renamed_members {
        for owner in &chain {
            if let Some(mut value) = symbol_json(&index, owner, kind, name)? {
                value["qname"] = Value::String(format!("{class}.{name}"));
                if owner != class {
                    value["inherited_from"] = Value::String(owner.clone());
                }
                let notes: Vec<&str> = [class_note.as_ref().map(|(_, n)| n), member_note.as_ref()]
                    .into_iter()
                    .flatten()
                    .map(String::as_str)
                    .collect();
                if !notes.is_empty() {
                    value["renamed"] =
                        serde_json::json!({ "from": asked, "note": notes.join("; ") });
                }
                return Ok(value);
            }
        }
    }
    let mut names = Vec::new();
    for owner in &chain {
        for line in stored(&index, &uri::class(owner), "members")?
            .unwrap_or_default()
            .lines()
        {
            if let Some((k, name)) = line.split_once('\t')
                && kinds.contains(&k)
            {
                names.push(format!("{class}.{name}"));
            }
        }
    }
    let wanted = format!("{class}.{member}");
    let what = kind.map_or("member".to_string(), |k| k.to_string());
    Err(not_found(
        format!("`{class}` has no {what} `{member}` (its ancestors were searched too)"),
        closest(&wanted, &names),
    ))
}

/// The major version of a served reference (`4` of `4.6`).
fn major_of(version: &str) -> u32 {
    version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(4)
}

/// The rename table's kind for a symbol kind, if it has renames.
fn rename_kind(kind: &str) -> Option<Kind> {
    Some(match kind {
        "method" => Kind::Method,
        "property" => Kind::Property,
        "signal" => Kind::Signal,
        "constant" => Kind::Constant,
        _ => return None,
    })
}

pub fn list_classes(
    version: Option<&str>,
    prefix: &str,
    limit: usize,
) -> Result<Vec<String>, ToolError> {
    let (docs, _, _) = ensure(version)?;
    let prefix = prefix.to_lowercase();
    Ok(all_classes(&docs.index())?
        .into_iter()
        .filter(|c| c.to_lowercase().starts_with(&prefix))
        .take(limit)
        .collect())
}

/// A failure of the index while answering: the plugin built the request
/// from checked input, so it is the server's failure (an I/O error, a
/// damaged file), `INTERNAL` with the details in the log, not the
/// caller's `invalid_request`.
pub fn from_index(e: plugin_sdk::CapabilityError) -> ToolError {
    let why = match e {
        plugin_sdk::CapabilityError::Denied(why)
        | plugin_sdk::CapabilityError::Invalid(why)
        | plugin_sdk::CapabilityError::NotFound(why) => why,
    };
    // The host let a damaged index go: the next call builds it again, so
    // this one is worth repeating (issue 72: it said "unexpected failure",
    // not retryable).
    if why.contains("is built again at the next call") {
        plugin_sdk::log::log(plugin_sdk::log::Level::Warn, &why);
        let mut e = ToolError::new(
            "INTERNAL",
            "the reference's index was damaged (a disk error or a copy cut short); it has been let go \
             and the next call builds it again: call again",
        );
        e.retryable = true;
        return e;
    }
    internal(format!("the reference's index failed: {why}"))
}

pub fn internal(detail: String) -> ToolError {
    plugin_sdk::log::log(plugin_sdk::log::Level::Error, &detail);
    ToolError::new(
        "INTERNAL",
        "unexpected failure; the server log has the details under this error's trace id",
    )
}

/// Up to five names closest to `wanted`: same letters ignoring case, then
/// prefix, then substring, then edit distance.
pub fn closest(wanted: &str, names: &[String]) -> Vec<String> {
    let wanted = wanted.to_lowercase();
    let mut scored: Vec<(usize, &String)> = names
        .iter()
        .map(|name| {
            let lower = name.to_lowercase();
            let rank = if lower == wanted {
                0
            } else if lower.starts_with(&wanted) || wanted.starts_with(&lower) {
                1 + lower.len().abs_diff(wanted.len()).min(20)
            } else if lower.contains(&wanted) {
                21 + lower.len() - wanted.len()
            } else {
                40 + levenshtein(&lower, &wanted)
            };
            (rank, name)
        })
        .filter(|(rank, _)| *rank < 40 + wanted.len().max(3) / 2 + 1)
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, n)| n.clone())
        .collect()
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_prefer_case_prefix_then_edit_distance() {
        let names: Vec<String> = [
            "Node",
            "Node2D",
            "Node3D",
            "NodePath",
            "Timer",
            "Tween",
            "CharacterBody2D",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(closest("node", &names)[0], "Node");
        assert_eq!(closest("Nod", &names)[..3], ["Node", "Node2D", "Node3D"]);
        assert_eq!(closest("Timmer", &names), ["Timer"]);
        assert!(closest("Qwertyuiop", &names).is_empty());
        assert!(closest("Node", &names).len() <= 5);
    }
}
