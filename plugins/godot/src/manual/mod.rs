//! The Godot manual (a godot-docs checkout's `*.rst`, `GODOT_MANUAL_DIR`)
//! as sections: page, heading, prose, and what each section links to in
//! the class reference (`:ref:` roles to classes and members, class names
//! and calls written as code). Its prose is in the words users ask in
//! ("To make the character jump…"); its links lead from those words to
//! the API (issue 35).

use std::path::Path;

use crate::source::Source;

mod refs;

use refs::{chains, links};

/// One section of a manual page: from a heading to the next.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Section {
    /// The page's path in the checkout, without `.rst` (`tutorials/physics/using_character_body_2d`).
    pub page: String,
    pub page_title: String,
    pub heading: String,
    /// The HTML anchor Sphinx gives the heading.
    pub anchor: String,
    /// The anchors its labels give it (`.. _doc_using_bodies:` before the
    /// heading: `doc-using-bodies`), which links to it use.
    pub labels: Vec<String>,
    pub prose: String,
    pub code: String,
    /// Class names (`CharacterBody2D`), qualified members
    /// (`CharacterBody2D.move_and_slide`) and called names (`is_on_floor`)
    /// the section refers to, as written; checked against the reference
    /// when indexed.
    pub links: Vec<String>,
    /// The section's paragraphs, each with what it refers to: what the
    /// manual says of a class or member, in the words of the sentences
    /// around it.
    pub passages: Vec<Passage>,
    /// Each block of code with the paragraph that introduces it.
    blocks: Vec<(String, String)>,
}

/// A paragraph of a section, or a block of code told by the paragraph
/// before it and the code's comments, and what it refers to (as
/// [`Section::links`], and also names reached through a dot from a class
/// or a call: `Input.mouse_mode`, `get_tree().paused`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Passage {
    pub text: String,
    pub links: Vec<String>,
}

/// Characters that underline (or overline) a heading in reStructuredText.
const ADORNMENTS: &str = "=-~^*\"'#+`:._";

fn is_adornment(line: &str) -> bool {
    let line = line.trim_end();
    let mut chars = line.chars();
    match chars.next() {
        Some(c) if ADORNMENTS.contains(c) => line.len() >= 3 && chars.all(|d| d == c),
        _ => false,
    }
}

/// Directives whose text is prose (admonitions) and those whose block is
/// code; any other directive's block is left out (images, tables of
/// contents, raw HTML).
const PROSE_DIRECTIVES: &[&str] = &[
    "note",
    "tip",
    "warning",
    "important",
    "caution",
    "danger",
    "seealso",
    "attention",
    "hint",
    "admonition",
];
const CODE_DIRECTIVES: &[&str] = &["code-block", "code", "code-tab", "tab", "tabs"];

/// Every `*.rst` page under `dir`, sorted (hidden folders and `_`-folders,
/// Sphinx's own, left out).
pub fn pages(dir: &Path) -> Vec<Source> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(['.', '_']) {
                continue;
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                _ if name.ends_with(".rst") => found.extend(Source::of(&entry)),
                _ => {}
            }
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// The sections of one page. `page` is its path without `.rst`.
pub fn parse(page: &str, text: &str) -> Vec<Section> {
    let lines: Vec<&str> = text.lines().collect();
    let mut sections: Vec<Section> = Vec::new();
    let mut current = Section {
        page: page.to_string(),
        ..Default::default()
    };
    // Where the block of a directive or a `::` paragraph ends: lines
    // indented more than this belong to it.
    let mut block: Option<(usize, Block)> = None;
    // Labels seen since the last heading: they name the next one.
    let mut labels: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        if let Some((base, kind)) = block {
            if line.trim().is_empty() || indent > base {
                match kind {
                    Block::Code => {
                        push_line(&mut current.code, line.trim());
                        if let Some((_, code)) = current.blocks.last_mut() {
                            code.push_str(line.trim_end());
                            code.push('\n');
                        }
                    }
                    Block::Prose => push_line(&mut current.prose, line.trim()),
                    Block::Skip => {}
                }
                i += 1;
                continue;
            }
            block = None;
        }
        // A heading: text underlined (and maybe overlined) by one character.
        let next = lines.get(i + 1).copied().unwrap_or("");
        let overlined = is_adornment(line) && lines.get(i + 2).is_some_and(|l| is_adornment(l));
        let (title, skip) = if overlined && !next.trim().is_empty() {
            (Some(next.trim()), 3)
        } else if indent == 0
            && !line.trim().is_empty()
            && !is_adornment(line)
            && is_adornment(next)
            && next.trim_end().len() >= line.trim_end().chars().count()
        {
            (Some(line.trim()), 2)
        } else {
            (None, 0)
        };
        if let Some(title) = title {
            if !current.heading.is_empty() || !current.prose.trim().is_empty() {
                sections.push(std::mem::take(&mut current));
            }
            let title = inline_text(title);
            current = Section {
                page: page.to_string(),
                page_title: sections
                    .first()
                    .map(|s| s.page_title.clone())
                    .unwrap_or_else(|| title.clone()),
                anchor: anchor(&title),
                heading: title,
                labels: std::mem::take(&mut labels),
                ..Default::default()
            };
            i += skip;
            continue;
        }
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix(".. ") {
            if let Some((name, after)) = rest.split_once("::") {
                let name = name.trim();
                let kind = if PROSE_DIRECTIVES.contains(&name) {
                    push_line(&mut current.prose, after.trim());
                    Block::Prose
                } else if CODE_DIRECTIVES.contains(&name) {
                    let intro = last_paragraph(&current.prose);
                    current.blocks.push((intro, String::new()));
                    Block::Code
                } else {
                    Block::Skip
                };
                block = Some((indent, kind));
            } else {
                // A label (`.. _doc_x:`), a comment or a substitution.
                if let Some(label) = rest.strip_prefix('_').and_then(|l| l.strip_suffix(':')) {
                    labels.push(label.to_lowercase().replace('_', "-"));
                }
                block = Some((indent, Block::Skip));
            }
            i += 1;
            continue;
        }
        // A paragraph ending in `::` introduces a literal (code) block.
        if trimmed.ends_with("::") {
            push_line(&mut current.prose, trimmed.trim_end_matches(':'));
            let intro = last_paragraph(&current.prose);
            current.blocks.push((intro, String::new()));
            block = Some((indent, Block::Code));
            i += 1;
            continue;
        }
        push_line(&mut current.prose, trimmed);
        i += 1;
    }
    if !current.heading.is_empty() || !current.prose.trim().is_empty() {
        sections.push(current);
    }
    for section in &mut sections {
        if section.page_title.is_empty() {
            section.page_title = section.heading.clone();
        }
        section.links = links(&section.prose, &section.code);
        let mut passages: Vec<Passage> = section
            .prose
            .split("\n\n")
            .filter(|p| !p.trim().is_empty())
            .map(|p| Passage {
                text: inline_text(p.trim()),
                links: chains(&links(p, ""), p.split("``").skip(1).step_by(2)),
            })
            .collect();
        for (intro, code) in std::mem::take(&mut section.blocks) {
            let comments: Vec<&str> = code
                .lines()
                .filter_map(|l| {
                    let l = l.trim_start();
                    l.strip_prefix('#').or_else(|| l.strip_prefix("//"))
                })
                .map(str::trim)
                .collect();
            passages.push(Passage {
                text: format!("{} {}", inline_text(&intro), comments.join(" ")),
                links: chains(&links("", &code), std::iter::once(code.as_str())),
            });
        }
        section.passages = passages;
        section.prose = inline_text(&section.prose);
    }
    sections
}

/// The last paragraph written so far.
fn last_paragraph(prose: &str) -> String {
    prose
        .trim_end()
        .rsplit("\n\n")
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

#[derive(Debug, Clone, Copy)]
enum Block {
    Prose,
    Code,
    Skip,
}

fn push_line(into: &mut String, line: &str) {
    if line.is_empty() {
        if !into.ends_with("\n\n") && !into.is_empty() {
            into.push('\n');
        }
        return;
    }
    if !into.is_empty() && !into.ends_with('\n') {
        into.push(' ');
    } else if into.ends_with('\n') && !into.ends_with("\n\n") {
        into.push('\n');
    }
    into.push_str(line);
}

/// Sphinx's id for a heading: lowercase words joined by `-`.
pub fn anchor(title: &str) -> String {
    let mut out = String::new();
    for word in title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word.to_lowercase());
    }
    out
}

/// Inline markup as the reader sees it: roles by their text
/// (`:ref:`CharacterBody2D <class_CharacterBody2D>`` → CharacterBody2D),
/// literals and emphasis without their marks, links by their text.
pub fn inline_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        let (before, after) = rest.split_at(start);
        // A role's name (`:ref:`) is dropped.
        let before = match before.rfind(':').filter(|_| before.ends_with(':')) {
            Some(_) => before
                .trim_end_matches(':')
                .trim_end_matches(|c: char| c.is_ascii_alphanumeric() || c == '-')
                .trim_end_matches(':'),
            None => before,
        };
        out.push_str(before);
        let ticks = after.chars().take_while(|&c| c == '`').count();
        let body = &after[ticks..];
        let Some(end) = body.find(&"`".repeat(ticks)) else {
            out.push_str(body);
            rest = "";
            break;
        };
        let inner = &body[..end];
        // `Text <target>` shows Text.
        let shown = match inner.rfind('<') {
            Some(lt) if inner.ends_with('>') && lt > 0 => inner[..lt].trim_end(),
            _ => inner,
        };
        out.push_str(shown);
        rest = body[end + ticks..].trim_start_matches('_');
    }
    out.push_str(rest);
    out.replace("**", "").replace(['*', '|'], "")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "\
.. _doc_using_character_body_2d:

Using CharacterBody2D/3D
========================

Introduction
------------

In this tutorial, we'll look at the
:ref:`CharacterBody2D <class_CharacterBody2D>` node. Call
:ref:`move_and_slide() <class_CharacterBody2D_method_move_and_slide>` each frame.

.. note:: While this document uses ``CharacterBody2D`` in its examples, the same
          concepts apply in 3D as well.

Jumping
~~~~~~~

To make the character jump, set its velocity when it is on the floor::

    if Input.is_action_just_pressed(\"jump\") and is_on_floor():
        velocity.y = JUMP_VELOCITY

.. image:: img/jump.png
   :alt: a jump

That is all.
";

    #[test]
    fn a_label_names_the_heading_after_it() {
        let text = ".. _doc_using_bodies:\n\nUsing bodies\n============\n\nText.\n\n.. _doc_more:\n\nMore\n----\n";
        let labels: Vec<(String, Vec<String>)> = parse("p", text)
            .into_iter()
            .map(|s| (s.anchor, s.labels))
            .collect();
        assert_eq!(
            labels,
            vec![
                (
                    "using-bodies".to_string(),
                    vec!["doc-using-bodies".to_string()]
                ),
                ("more".to_string(), vec!["doc-more".to_string()])
            ]
        );
    }

    #[test]
    fn pages_become_sections_with_prose_code_and_links() {
        let sections = parse("tutorials/physics/using_character_body_2d", PAGE);
        let headings: Vec<&str> = sections.iter().map(|s| s.heading.as_str()).collect();
        assert_eq!(
            headings,
            ["Using CharacterBody2D/3D", "Introduction", "Jumping"]
        );
        let intro = &sections[1];
        assert_eq!(intro.page_title, "Using CharacterBody2D/3D");
        assert_eq!(intro.anchor, "introduction");
        assert!(
            intro.prose.contains("look at the CharacterBody2D node"),
            "{}",
            intro.prose
        );
        assert!(
            intro.prose.contains("the same concepts apply in 3D"),
            "{}",
            intro.prose
        );
        assert!(
            !intro.prose.contains(":ref:") && !intro.prose.contains('`'),
            "{}",
            intro.prose
        );
        assert!(
            intro.links.contains(&"CharacterBody2D".to_string()),
            "{:?}",
            intro.links
        );
        assert!(
            intro
                .links
                .contains(&"CharacterBody2D.move_and_slide".to_string()),
            "{:?}",
            intro.links
        );
        let jump = &sections[2];
        assert!(
            jump.prose.starts_with("To make the character jump"),
            "{}",
            jump.prose
        );
        assert!(jump.prose.contains("That is all."), "{}", jump.prose);
        assert!(!jump.prose.contains("img/jump.png") && !jump.prose.contains(":alt:"));
        assert!(
            jump.code.contains("velocity.y = JUMP_VELOCITY"),
            "{}",
            jump.code
        );
        for link in ["Input", "is_action_just_pressed", "is_on_floor"] {
            assert!(
                jump.links.contains(&link.to_string()),
                "{link}: {:?}",
                jump.links
            );
        }
        // The code is told by the paragraph before it; a chain from a
        // class is kept whole.
        let code = jump.passages.last().unwrap();
        assert!(
            code.text.starts_with("To make the character jump"),
            "{}",
            code.text
        );
        assert!(
            code.links
                .contains(&"Input.is_action_just_pressed()".to_string()),
            "{:?}",
            code.links
        );
        assert_eq!(
            anchor("What is a character body?"),
            "what-is-a-character-body"
        );
    }
}
