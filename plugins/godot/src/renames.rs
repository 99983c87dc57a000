//! Godot's own 3→4 renames (classes, methods, properties, signals,
//! constants), so an old name found in a tutorial leads to the new one:
//! `KinematicBody2D` to `CharacterBody2D`. The table is data the plugin
//! ships (`data/renames_3_to_4.tsv`), made from Godot's
//! `editor/renames_map_3_to_4.cpp` (MIT) by this module's test, which
//! keeps it equal to that file.

/// `kind \t old \t new` lines; `#` starts a comment.
const TABLE: &str = include_str!("../data/renames_3_to_4.tsv");

/// What a rename is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Class,
    Method,
    Property,
    Signal,
    Constant,
}

impl Kind {
    fn from_label(label: &str) -> Option<Kind> {
        Some(match label {
            "class" => Kind::Class,
            "method" => Kind::Method,
            "property" => Kind::Property,
            "signal" => Kind::Signal,
            "constant" => Kind::Constant,
            _ => return None,
        })
    }
}

fn entries() -> impl Iterator<Item = (Kind, &'static str, &'static str)> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let mut parts = line.split('\t');
            let kind = Kind::from_label(parts.next()?)?;
            Some((kind, parts.next()?, parts.next()?))
        })
}

/// The Godot 4 name of Godot 3's `old` (a `kind`), if it was renamed.
pub fn to_4(kind: Kind, old: &str) -> Option<&'static str> {
    entries()
        .find(|(k, from, _)| *k == kind && *from == old)
        .map(|(_, _, to)| to)
}

/// The Godot 3 name of Godot 4's `new` (a `kind`), if it was renamed.
pub fn to_3(kind: Kind, new: &str) -> Option<&'static str> {
    entries()
        .find(|(k, _, to)| *k == kind && *to == new)
        .map(|(_, from, _)| from)
}

/// `name` as the other major version calls it, and what to say about it:
/// to a 4.x reference an old name is new, to a 3.x one a new name is old.
pub fn across(kind: Kind, name: &str, served_major: u32) -> Option<(&'static str, String)> {
    if served_major >= 4 {
        to_4(kind, name).map(|new| (new, format!("`{name}` was renamed in Godot 4.0 to `{new}`")))
    } else {
        to_3(kind, name).map(|old| {
            (
                old,
                format!("`{name}` is Godot 4's name; Godot 3 calls it `{old}`"),
            )
        })
    }
}

/// Every name `word` stands for across the rename (either way), when it
/// is written as that name is (`Area`, not the plain word `area`).
pub fn others(word: &str) -> Vec<&'static str> {
    entries()
        .filter_map(|(_, from, to)| {
            if from == word {
                Some(to)
            } else if to == word {
                Some(from)
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Godot's rename source, as the tests find it (`GODOT_DOCS`).
    fn source() -> Option<String> {
        let root = std::env::var("GODOT_DOCS").unwrap_or_else(|_| {
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/data/godot-docs"
            )
            .into()
        });
        let path = std::path::Path::new(&root).join("renames_map_3_to_4.cpp");
        match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "{}: {e} (set GODOT_DOCS)",
                    path.display()
                );
                eprintln!("skipped: {} not found (set GODOT_DOCS)", path.display());
                None
            }
        }
    }

    /// The table made from Godot's file: its enabled `{ "old", "new" },`
    /// entries of the GDScript maps (the C# ones repeat them PascalCased).
    fn table_from(cpp: &str) -> String {
        let sections = [
            ("class_renames", "class"),
            ("builtin_types_renames", "class"),
            ("gdscript_function_renames", "method"),
            ("gdscript_properties_renames", "property"),
            ("gdscript_signals_renames", "signal"),
            ("enum_renames", "constant"),
        ];
        let mut out = String::from(
            "# Godot 3 -> 4 renames: kind, old name, new name.\n\
             # Made from godotengine/godot editor/renames_map_3_to_4.cpp (MIT License,\n\
             # Copyright (c) 2014-present Godot Engine contributors; Copyright (c)\n\
             # 2007-2014 Juan Linietsky, Ariel Manzur) by renames.rs's test.\n",
        );
        let mut kind = None;
        for line in cpp.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("const char *RenamesMap3To4::") {
                kind = sections
                    .iter()
                    .find(|(name, _)| rest.starts_with(&format!("{name}[")))
                    .map(|(_, kind)| *kind);
                continue;
            }
            let Some(kind) = kind else { continue };
            let Some(pair) = line.strip_prefix("{ \"") else {
                continue;
            };
            let Some((old, rest)) = pair.split_once("\", \"") else {
                continue;
            };
            let Some((new, _)) = rest.split_once('"') else {
                continue;
            };
            out.push_str(&format!("{kind}\t{old}\t{new}\n"));
        }
        out
    }

    #[test]
    fn the_shipped_table_is_godots() {
        let Some(cpp) = source() else { return };
        let made = table_from(&cpp);
        assert!(made.lines().count() > 500, "{} lines", made.lines().count());
        if made != TABLE {
            std::fs::write(
                concat!(env!("CARGO_MANIFEST_DIR"), "/data/renames_3_to_4.tsv"),
                &made,
            )
            .unwrap();
            panic!(
                "data/renames_3_to_4.tsv was out of date and has been rewritten: rebuild the plugin"
            );
        }
    }

    #[test]
    fn old_names_lead_to_new_ones_and_back() {
        assert_eq!(
            to_4(Kind::Class, "KinematicBody2D"),
            Some("CharacterBody2D")
        );
        assert_eq!(
            to_3(Kind::Class, "CharacterBody2D"),
            Some("KinematicBody2D")
        );
        assert_eq!(to_4(Kind::Class, "Node2D"), None);
        let (new, note) = across(Kind::Class, "Spatial", 4).unwrap();
        assert_eq!(new, "Node3D");
        assert!(note.contains("renamed in Godot 4.0"), "{note}");
        assert!(others("KinematicBody2D").contains(&"CharacterBody2D"));
        assert!(others("area").is_empty(), "a plain word is not a name");
    }
}
