//! A class's answer within what clients show a model whole (issue 39,
//! item 4): Claude Code previews 2 KB of a long result, Gemini CLI keeps
//! 40,000 characters, opencode only a file path. `godot.get_class` of
//! `Control` was 95 KB, `ProjectSettings` 350 KB.
//!
//! A class that fits is answered whole. One that does not is made compact
//! (each member's description becomes its first sentence, `summary`; the
//! class's own description is cut), then, if still too long, each section
//! lists as many members as fit; the answer says what it left out and how
//! to get it (`section` and `offset`, or `godot.get_symbol` for one
//! member's full text).

use serde_json::{Value, json};

/// The most an answer holds by default, in bytes of JSON.
pub const MAX_ANSWER_BYTES: usize = 20_000;
/// The class's own description, when the answer is compact.
const MAX_DESCRIPTION_CHARS: usize = 1_500;
/// A member's summary.
const MAX_SUMMARY_CHARS: usize = 160;

/// Which part of a long class to list.
pub struct Part<'a> {
    /// Only this section's members (the others only counted).
    pub section: Option<&'a str>,
    /// The first member listed, in that section.
    pub offset: usize,
}

fn size(value: &Value) -> usize {
    serde_json::to_string(value).map_or(usize::MAX, |s| s.len())
}

/// `text` in at most `max` characters: cut after the last sentence or
/// paragraph that fits, never inside a fenced code block (the block is
/// left out whole) nor a word.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let end = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
    let mut kept = &text[..end];
    // An opened fence not closed in what is kept: cut before it.
    if kept.matches("```").count() % 2 == 1
        && let Some(fence) = kept.rfind("```")
    {
        kept = &kept[..fence];
    }
    // The last paragraph's or sentence's end, if it keeps half of it.
    let boundary = [kept.rfind("\n"), kept.rfind(". ").map(|i| i + 1)]
        .into_iter()
        .flatten()
        .max()
        .filter(|&i| i >= kept.len() / 2);
    let kept = match boundary {
        Some(i) => &kept[..i],
        // Else the last whole word.
        None => kept.rfind(char::is_whitespace).map_or(kept, |i| &kept[..i]),
    };
    format!("{} …", kept.trim_end())
}

/// A member with its description's first sentence as `summary`.
fn compact(member: &Value) -> Value {
    let mut member = member.clone();
    if let Some(fields) = member.as_object_mut()
        && let Some(Value::String(description)) = fields.remove("description")
    {
        let first = crate::bbcode::first_sentence(description.trim());
        if !first.is_empty() {
            fields.insert("summary".into(), cut(first, MAX_SUMMARY_CHARS).into());
        }
    }
    member
}

/// `class` (a class document, with its `sections`) as it fits in
/// `budget` bytes; `part` picks a section and where in it to start.
pub fn fit(mut class: Value, sections: &[&str], part: &Part<'_>, budget: usize) -> Value {
    if part.section.is_none() && part.offset == 0 && size(&class) <= budget {
        return class;
    }
    if let Some(Value::String(description)) = class.get("description") {
        class["description"] = cut(description, MAX_DESCRIPTION_CHARS).into();
    }
    // The members, compact, taken out to be put back as they fit.
    let mut lists: Vec<(&str, Vec<Value>)> = Vec::new();
    for section in sections {
        let members: Vec<Value> = class[*section]
            .as_array()
            .map(|a| a.iter().map(compact).collect())
            .unwrap_or_default();
        class[*section] = json!([]);
        lists.push((section, members));
    }
    let inherited = class.get_mut("inherited").map(Value::take);
    let mut omitted = serde_json::Map::new();
    let mut room = budget.saturating_sub(size(&class) + 600);
    // Ancestors' members by name only (asked for with include_ancestors:
    // they come before the class's own), as far as they fit.
    if let Some(Value::Array(groups)) = inherited {
        let mut kept = Vec::new();
        let mut left_out = 0;
        for group in groups {
            let named = names_only(&group, sections);
            let cost = size(&named) + 1;
            if cost > room {
                left_out += 1;
                continue;
            }
            room -= cost;
            kept.push(named);
        }
        class["inherited"] = Value::Array(kept);
        if left_out > 0 {
            omitted.insert(
                "inherited".into(),
                json!({ "ancestors_left_out": left_out }),
            );
        }
    }
    // Where each section's listing starts, and how many of it are wanted.
    let ranges: Vec<(usize, usize)> = lists
        .iter()
        .map(|(section, members)| match part.section {
            Some(wanted) if wanted != *section => (0, 0),
            Some(_) => {
                let start = part.offset.min(members.len());
                (start, members.len() - start)
            }
            None => (0, members.len()),
        })
        .collect();
    // Each section first gets an equal share of the room, then what the
    // others left, in order: a long `methods` does not crowd out `signals`.
    let mut shown = vec![0usize; lists.len()];
    let wanting = ranges.iter().filter(|(_, n)| *n > 0).count().max(1);
    for share in [room / wanting, usize::MAX] {
        for (k, (_, members)) in lists.iter().enumerate() {
            let (start, wanted) = ranges[k];
            let mut used = 0;
            while shown[k] < wanted {
                let cost = size(&members[start + shown[k]]) + 1;
                if cost > room || used + cost > share {
                    break;
                }
                room -= cost;
                used += cost;
                shown[k] += 1;
            }
        }
    }
    for (k, (section, members)) in lists.iter().enumerate() {
        let (start, wanted) = ranges[k];
        let next = start + shown[k];
        if start > 0 || shown[k] < members.len() {
            let mut said = json!({ "total": members.len(), "shown": shown[k] });
            if shown[k] < wanted || (wanted == 0 && next < members.len()) {
                said["next_offset"] = next.into();
            }
            if start > 0 {
                said["offset"] = start.into();
            }
            omitted.insert(section.to_string(), said);
        }
        class[*section] = Value::Array(members[start..next].to_vec());
    }
    let mut note = String::from(
        "Long class: members carry a one-sentence `summary` (godot.get_symbol {\"qname\": \"<Class>.<member>\"} \
         gives one member in full, resources/read of godot://class/<Class> the whole class)",
    );
    if !omitted.is_empty() {
        note.push_str(
            "; `omitted` counts what is not listed: ask again with {\"section\": \"<section>\", \"offset\": \
             <next_offset>} for the rest of a section",
        );
        class["omitted"] = Value::Object(omitted);
    }
    note.push('.');
    class["note"] = note.into();
    class
}

/// An ancestor's group with each member by its name only.
fn names_only(group: &Value, sections: &[&str]) -> Value {
    let mut named = json!({ "class": group["class"] });
    for section in sections {
        if let Some(members) = group[*section].as_array() {
            let names: Vec<Value> = members
                .iter()
                .map(|m| json!({ "name": m["name"] }))
                .collect();
            named[*section] = Value::Array(names);
        }
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_is_cut_between_sentences_never_in_code_or_a_word() {
        let text = format!(
            "First sentence here. Second one.\n```gdscript\nvar tween = create_tween()\n```\n{}",
            "word ".repeat(50)
        );
        let kept = cut(&text, 60);
        assert_eq!(kept, "First sentence here. Second one. …");
        let kept = cut(&"averyveryverylongword ".repeat(10), 50);
        assert!(kept.ends_with("word …"), "{kept}");
    }

    const SECTIONS: [&str; 2] = ["methods", "members"];

    fn class(methods: usize, members: usize) -> Value {
        let member = |i: usize| json!({ "name": format!("m{i}"), "description": format!("Does thing {i}. Then much more text follows here. {}", "x".repeat(300)) });
        json!({
            "name": "Big",
            "description": "y".repeat(5000),
            "methods": (0..methods).map(member).collect::<Vec<_>>(),
            "members": (0..members).map(member).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn a_class_that_fits_is_whole() {
        let small = class(3, 3);
        assert_eq!(
            fit(
                small.clone(),
                &SECTIONS,
                &Part {
                    section: None,
                    offset: 0
                },
                MAX_ANSWER_BYTES
            ),
            small
        );
    }

    #[test]
    fn a_long_class_is_compact_and_says_what_it_left_out() {
        let answer = fit(
            class(600, 600),
            &SECTIONS,
            &Part {
                section: None,
                offset: 0,
            },
            MAX_ANSWER_BYTES,
        );
        assert!(size(&answer) <= MAX_ANSWER_BYTES, "{}", size(&answer));
        let first = &answer["methods"][0];
        assert_eq!(first["summary"], "Does thing 0.");
        assert!(first.get("description").is_none());
        assert_eq!(answer["omitted"]["methods"]["total"], 600);
        let next = answer["omitted"]["methods"]["next_offset"]
            .as_u64()
            .unwrap() as usize;
        assert!(answer["note"].as_str().unwrap().contains("offset"));
        // The rest of a section, from where the first answer stopped.
        let rest = fit(
            class(600, 600),
            &SECTIONS,
            &Part {
                section: Some("methods"),
                offset: next,
            },
            MAX_ANSWER_BYTES,
        );
        assert_eq!(rest["methods"][0]["name"], format!("m{next}"));
        assert_eq!(rest["members"], json!([]));
        assert_eq!(rest["omitted"]["members"]["shown"], 0);
        // Without a section asked for, every section gets its share.
        let shown = |s: &str| answer["omitted"][s]["shown"].as_u64().unwrap();
        assert!(
            shown("methods") > 100 && shown("members") > 100,
            "{}",
            answer["omitted"]
        );
        assert!(size(&rest) <= MAX_ANSWER_BYTES);
    }
}
