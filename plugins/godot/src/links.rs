//! What the manual's names refer to in the class reference: a section's
//! `:ref:` targets, class names and calls resolved to `Class` and
//! `Class.member` (chains through a dot by the types the reference gives:
//! `get_tree().paused` is `SceneTree.paused`), and what the manual says
//! around each of them, which the index adds to the entry's words (issue
//! 35: the manual's prose is in the words users ask in).

use std::collections::{HashMap, HashSet};

use crate::manual::Section;
use crate::model::ClassDoc;

/// What a manual section's links name in this reference.
pub struct Links<'a> {
    /// Class names by their lowercase form.
    classes: HashMap<String, &'a ClassDoc>,
    /// Each class's parent.
    parents: HashMap<&'a str, &'a str>,
    /// The classes declaring each method, property, signal and constant name.
    owners: HashMap<&'a str, Vec<&'a str>>,
}

impl<'a> Links<'a> {
    pub fn new(classes: &'a [ClassDoc]) -> Links<'a> {
        let mut owners: HashMap<&str, Vec<&str>> = HashMap::new();
        for class in classes {
            let names = (class.methods.iter().map(|m| &m.name))
                .chain(class.members.iter().map(|p| &p.name))
                .chain(class.signals.iter().map(|s| &s.name))
                .chain(class.constants.iter().map(|c| &c.name));
            for name in names {
                owners.entry(name).or_default().push(class.name.as_str());
            }
        }
        Links {
            classes: classes.iter().map(|c| (c.name.to_lowercase(), c)).collect(),
            parents: classes
                .iter()
                .filter_map(|c| Some((c.name.as_str(), c.inherits.as_deref()?)))
                .collect(),
            owners,
        }
    }

    /// `class` and its ancestors, nearest first.
    fn lineage(&self, class: &'a str) -> Vec<&'a str> {
        let mut line = vec![class];
        while let Some(&up) = line.last().and_then(|c| self.parents.get(c)) {
            if line.contains(&up) || line.len() > 64 {
                break;
            }
            line.push(up);
        }
        line
    }

    /// The classes a section's `written` links name, each with its
    /// ancestors, then `Node`'s line: the classes whose members its bare
    /// names are first taken to be. (A call without a receiver is the
    /// script's own, and a script is most often a node's: `get_tree()` is
    /// `Node.get_tree`, not `TreeItem.get_tree`.)
    pub fn context(&self, written: &[String]) -> Vec<&'a str> {
        written
            .iter()
            .filter_map(|l| self.classes.get(&l.split('.').next()?.to_lowercase()))
            .chain(self.classes.get("node"))
            .flat_map(|doc| self.lineage(doc.name.as_str()))
            .collect()
    }

    /// `Class` and `Class.member` names the `written` links refer to:
    /// classes and qualified members that exist, a member name as a member
    /// of the first class of `named` ([`Links::context`]) that declares
    /// it, or of the one or two classes that have it, and chains through a
    /// dot followed by the types the reference gives (`get_tree().paused`
    /// is `SceneTree.paused`, as `Node.get_tree` returns a `SceneTree`).
    pub fn resolve(&self, written: &[String], named: &[&'a str]) -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut add = |s: String| {
            if seen.insert(s.clone()) {
                found.push(s);
            }
        };
        for link in written {
            let mut parts = link.split('.');
            let head = parts.next().unwrap_or("");
            let mut at = match head.strip_suffix("()") {
                Some(call) => {
                    let classes = self.owners(call, named);
                    for class in &classes {
                        add(format!("{class}.{call}"));
                    }
                    classes.first().and_then(|c| self.member_type(c, call))
                }
                None => match self.classes.get(&head.to_lowercase()) {
                    Some(doc) => {
                        add(doc.name.clone());
                        Some(doc.name.as_str())
                    }
                    None if !link.contains('.') => {
                        for class in self.owners(head, named) {
                            add(format!("{class}.{head}"));
                        }
                        None
                    }
                    None => None,
                },
            };
            for part in parts {
                let member = part.trim_end_matches("()");
                let Some(class) = at.and_then(|c| self.declaring(c, member)) else {
                    break;
                };
                add(format!("{class}.{member}"));
                at = self.member_type(class, member);
            }
        }
        found
    }

    /// The classes that a member `name` is taken to be of: the first of
    /// `named` (classes with their ancestors) that declares it, else the
    /// one or two classes that have it.
    fn owners(&self, name: &str, named: &[&'a str]) -> Vec<&'a str> {
        let Some(owners) = self.owners.get(name) else {
            return Vec::new();
        };
        match named.iter().find(|c| owners.contains(c)) {
            Some(class) => vec![class],
            None if owners.len() <= 2 => owners.clone(),
            None => Vec::new(),
        }
    }

    /// `class` or the ancestor of it that declares `member`.
    fn declaring(&self, class: &'a str, member: &str) -> Option<&'a str> {
        let owners = self.owners.get(member)?;
        self.lineage(class).into_iter().find(|c| owners.contains(c))
    }

    /// The class a method returns or a property holds, when it is one.
    fn member_type(&self, class: &str, member: &str) -> Option<&'a str> {
        let doc = self.classes.get(&class.to_lowercase())?;
        let type_ = doc
            .methods
            .iter()
            .find(|m| m.name == member)
            .map(|m| m.return_type.as_str())
            .or_else(|| {
                doc.members
                    .iter()
                    .find(|p| p.name == member)
                    .map(|p| p.type_.as_str())
            })?;
        self.classes
            .get(&type_.to_lowercase())
            .map(|d| d.name.as_str())
    }
}

/// The enums, as the reference writes them in a type
/// (`DisplayServer.WindowMode`, `Key` for a global one), that `class`'s
/// constant `name` is a value of, or its property holds or its method
/// takes or returns: `WINDOW_MODE_FULLSCREEN` is how the reference says
/// fullscreen, `window_set_mode` what a user calls for it.
pub fn enums_of(class: &ClassDoc, kind: &str, name: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut add = |e: &Option<String>| {
        if let Some(e) = e
            && !found.contains(e)
        {
            found.push(e.clone());
        }
    };
    match kind {
        "constant" => {
            for constant in class.constants.iter().filter(|c| c.name == name) {
                // A constant names its enum within its class.
                add(&constant.enum_.as_ref().map(|e| {
                    if class.name.starts_with('@') {
                        e.clone()
                    } else {
                        format!("{}.{e}", class.name)
                    }
                }));
            }
        }
        "property" => {
            for property in class.members.iter().filter(|p| p.name == name) {
                add(&property.enum_);
            }
        }
        "method" => {
            for method in class.methods.iter().filter(|m| m.name == name) {
                add(&method.return_enum);
                for param in &method.params {
                    add(&param.enum_);
                }
            }
        }
        _ => {}
    }
    found
}

/// A paragraph of the manual (or a block of code with the paragraph that
/// tells it) and the classes and members it refers to.
pub struct Passage<'s> {
    pub section: &'s Section,
    /// Its place among its section's passages.
    pub number: usize,
    pub text: &'s str,
    /// `Class` and `Class.member` names, resolved ([`Links::resolve`]).
    pub links: Vec<String>,
}

/// Every passage of the manual's `sections` that refers to a class or
/// member, with what it refers to.
pub fn passages<'s>(links: &Links, sections: &'s [(Section, Vec<String>)]) -> Vec<Passage<'s>> {
    let mut out = Vec::new();
    for (section, _) in sections {
        let named = links.context(&section.links);
        for (number, passage) in section.passages.iter().enumerate() {
            let resolved = links.resolve(&passage.links, &named);
            if !resolved.is_empty() {
                out.push(Passage {
                    section,
                    number,
                    text: &passage.text,
                    links: resolved,
                });
            }
        }
    }
    out
}

/// What the manual says around each class and member it refers to, by
/// their lowercase qualified names: the page's title, the section's
/// heading and the passage, as many as fit [`MAX_MENTIONS_BYTES`].
pub fn mentions(passages: &[Passage]) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    for passage in passages {
        let section = passage.section;
        let text = format!(
            "{}. {}. {}\n",
            section.page_title, section.heading, passage.text
        );
        for link in &passage.links {
            let said = out.entry(link.to_lowercase()).or_default();
            if said.len() + text.len() <= MAX_MENTIONS_BYTES && !said.contains(&text) {
                said.push_str(&text);
            }
        }
    }
    out
}

/// The most of the manual's words one class or member carries.
const MAX_MENTIONS_BYTES: usize = 2_000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manual::parse;
    use crate::model::{Method, Property};

    fn class(name: &str, inherits: Option<&str>) -> ClassDoc {
        ClassDoc {
            name: name.into(),
            inherits: inherits.map(Into::into),
            ..Default::default()
        }
    }

    fn reference() -> Vec<ClassDoc> {
        let method = |name: &str, returns: &str| Method {
            name: name.into(),
            return_type: returns.into(),
            ..Default::default()
        };
        let property = |name: &str, type_: &str| Property {
            name: name.into(),
            type_: type_.into(),
            ..Default::default()
        };
        let mut node = class("Node", Some("Object"));
        node.methods = vec![
            method("get_tree", "SceneTree"),
            method("queue_free", "void"),
        ];
        let mut tree = class("SceneTree", Some("Object"));
        tree.members = vec![property("paused", "bool")];
        let mut item = class("CanvasItem", Some("Node"));
        item.members = vec![property("visible", "bool")];
        let mut tree_item = class("TreeItem", Some("Object"));
        tree_item.methods = vec![method("get_tree", "Tree")];
        vec![
            class("Object", None),
            node,
            tree,
            item,
            class("Sprite2D", Some("CanvasItem")),
            tree_item,
        ]
    }

    #[test]
    fn chains_follow_the_types_the_reference_gives() {
        let classes = reference();
        let links = Links::new(&classes);
        let written = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // A call without a receiver is a node's (TreeItem has a get_tree
        // too), unless the section names another class that has it.
        assert_eq!(
            links.resolve(&written(&["get_tree().paused"]), &links.context(&[])),
            ["Node.get_tree", "SceneTree.paused"]
        );
        assert_eq!(
            links.resolve(
                &written(&["get_tree()"]),
                &links.context(&written(&["TreeItem"]))
            ),
            ["TreeItem.get_tree"]
        );
        // A member an ancestor declares is that ancestor's.
        assert_eq!(
            links.resolve(&written(&["Sprite2D.visible"]), &links.context(&[])),
            ["Sprite2D", "CanvasItem.visible"]
        );
        // Names the reference does not have lead nowhere; a chain stops
        // where its type is not known.
        assert_eq!(
            links.resolve(
                &written(&["get_tree().paused.x", "Nope.visible", "nope()"]),
                &links.context(&[])
            ),
            ["Node.get_tree", "SceneTree.paused"]
        );
    }

    #[test]
    fn constants_and_members_name_the_enums_they_use() {
        use crate::model::{Constant, Param};
        let mut display = class("DisplayServer", Some("Object"));
        display.constants = vec![Constant {
            name: "WINDOW_MODE_FULLSCREEN".into(),
            enum_: Some("WindowMode".into()),
            ..Default::default()
        }];
        display.methods = vec![Method {
            name: "window_set_mode".into(),
            return_type: "void".into(),
            params: vec![Param {
                name: "mode".into(),
                enum_: Some("DisplayServer.WindowMode".into()),
                ..Default::default()
            }],
            ..Default::default()
        }];
        assert_eq!(
            enums_of(&display, "constant", "WINDOW_MODE_FULLSCREEN"),
            ["DisplayServer.WindowMode"]
        );
        assert_eq!(
            enums_of(&display, "method", "window_set_mode"),
            ["DisplayServer.WindowMode"]
        );
        let mut global = class("@GlobalScope", None);
        global.constants = vec![Constant {
            name: "KEY_A".into(),
            enum_: Some("Key".into()),
            ..Default::default()
        }];
        assert_eq!(enums_of(&global, "constant", "KEY_A"), ["Key"]);
        assert!(enums_of(&display, "signal", "window_set_mode").is_empty());
    }

    #[test]
    fn mentions_carry_the_words_around_a_name() {
        let classes = reference();
        let links = Links::new(&classes);
        let page = "Pausing games\n=============\n\n\
                    To pause the game, set the tree's paused state::\n\n    get_tree().paused = true\n\n\
                    Nodes are freed with ``queue_free()``.\n";
        let sections: Vec<(Section, Vec<String>)> = parse("pausing", page)
            .into_iter()
            .map(|s| (s, Vec::new()))
            .collect();
        let said = mentions(&passages(&links, &sections));
        let paused = &said["scenetree.paused"];
        assert!(paused.contains("To pause the game"), "{paused}");
        assert!(!paused.contains("freed"), "{paused}");
        assert!(
            said["node.queue_free"].contains("Nodes are freed"),
            "{said:?}"
        );
    }
}
