//! Godot class XML (4.x and 3.x) to [`ClassDoc`], with quick-xml.
//!
//! The file is first read into a small element tree (entities resolved,
//! CDATA kept verbatim), then mapped to the model. Differences between
//! versions handled here: 3.x `<argument>` is a parameter; the 4.0-4.2
//! `is_deprecated="true"` / `is_experimental="true"` attributes and the
//! 4.3+ `deprecated="note"` / `experimental="note"` ones both land in
//! `deprecated` / `experimental`; missing sections are empty lists.

use quick_xml::Reader;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::Event;

use crate::bbcode::{dedent, to_text};
use crate::model::*;

/// A parse failure, located in its file.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

#[derive(Debug, Default)]
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    text: String,
    children: Vec<Element>,
}

impl Element {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn attr_or_empty(&self, name: &str) -> String {
        self.attr(name).unwrap_or_default().to_string()
    }
    fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }
    /// The `item` children of the `section` child (empty when absent).
    fn items<'a>(&'a self, section: &str, item: &'a str) -> impl Iterator<Item = &'a Element> {
        self.child(section)
            .into_iter()
            .flat_map(move |s| s.children.iter().filter(move |c| c.name == item))
    }
}

/// The name and parent a class file's `<class>` tag gives, read without
/// parsing the rest; `None` when there is no such tag before an error.
pub fn class_header(xml: &str) -> Option<(String, Option<String>)> {
    let mut reader = Reader::from_str(xml);
    loop {
        match reader.read_event().ok()? {
            Event::Start(tag) | Event::Empty(tag) if tag.name().as_ref() == "class" => {
                let attr = |key: &str| {
                    let found = tag.attributes().flatten().find(|a| a.key.as_ref() == key)?;
                    let value = found.normalized_value(quick_xml::XmlVersion::Implicit1_0);
                    value.ok().map(|v| v.into_owned())
                };
                return Some((attr("name")?, attr("inherits")));
            }
            Event::Start(_) | Event::Empty(_) | Event::Eof => return None,
            _ => {}
        }
    }
}

/// Parse one class file. `file` names it in errors; `docs_url` replaces
/// `$DOCS_URL`.
pub fn parse_class(file: &str, xml: &str, docs_url: &str) -> Result<ClassDoc, ParseError> {
    let root = tree(file, xml)?;
    if root.name != "class" {
        return Err(ParseError {
            file: file.into(),
            line: 1,
            column: 1,
            message: format!("root element is <{}>, not <class>", root.name),
        });
    }
    let name = root
        .attr("name")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ParseError {
            file: file.into(),
            line: 1,
            column: 1,
            message: "<class> has no name attribute".into(),
        })?;
    let text = |e: Option<&Element>| {
        e.map(|e| to_text(&dedent(&e.text), docs_url))
            .unwrap_or_default()
    };
    let (deprecated, experimental) = status(&root, docs_url);
    Ok(ClassDoc {
        name: name.to_string(),
        inherits: root
            .attr("inherits")
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        brief_description: text(root.child("brief_description")),
        description: text(root.child("description")),
        deprecated,
        experimental,
        keywords: keywords(&root),
        tutorials: root
            .items("tutorials", "link")
            .map(|l| Tutorial {
                title: l.attr_or_empty("title"),
                url: l.text.trim().replace("$DOCS_URL", docs_url),
            })
            .collect(),
        methods: root
            .items("methods", "method")
            .map(|m| method(m, docs_url))
            .collect(),
        members: root
            .items("members", "member")
            .map(|m| {
                let (deprecated, experimental) = status(m, docs_url);
                Property {
                    name: m.attr_or_empty("name"),
                    type_: m.attr_or_empty("type"),
                    setter: m.attr_or_empty("setter"),
                    getter: m.attr_or_empty("getter"),
                    default: m.attr("default").map(str::to_string),
                    enum_: m.attr("enum").map(str::to_string),
                    overrides: m.attr("overrides").map(str::to_string),
                    description: to_text(&dedent(&m.text), docs_url),
                    deprecated,
                    experimental,
                }
            })
            .collect(),
        signals: root
            .items("signals", "signal")
            .map(|s| {
                let (deprecated, experimental) = status(s, docs_url);
                Signal {
                    name: s.attr_or_empty("name"),
                    params: params(s),
                    description: text(s.child("description")),
                    deprecated,
                    experimental,
                }
            })
            .collect(),
        constants: root
            .items("constants", "constant")
            .map(|c| {
                let (deprecated, experimental) = status(c, docs_url);
                Constant {
                    name: c.attr_or_empty("name"),
                    value: c.attr_or_empty("value"),
                    enum_: c.attr("enum").map(str::to_string),
                    is_bitfield: c.attr("is_bitfield") == Some("true"),
                    description: to_text(&dedent(&c.text), docs_url),
                    deprecated,
                    experimental,
                }
            })
            .collect(),
        theme_items: root
            .items("theme_items", "theme_item")
            .map(|t| ThemeItem {
                name: t.attr_or_empty("name"),
                data_type: t.attr_or_empty("data_type"),
                type_: t.attr_or_empty("type"),
                default: t.attr("default").map(str::to_string),
                description: to_text(&dedent(&t.text), docs_url),
            })
            .collect(),
        annotations: root
            .items("annotations", "annotation")
            .map(|m| method(m, docs_url))
            .collect(),
        operators: root
            .items("operators", "operator")
            .map(|m| method(m, docs_url))
            .collect(),
        constructors: root
            .items("constructors", "constructor")
            .map(|m| method(m, docs_url))
            .collect(),
    })
}

fn method(m: &Element, docs_url: &str) -> Method {
    let (deprecated, experimental) = status(m, docs_url);
    let ret = m.child("return");
    Method {
        name: m.attr_or_empty("name"),
        return_type: ret
            .and_then(|r| r.attr("type"))
            .unwrap_or("void")
            .to_string(),
        return_enum: ret.and_then(|r| r.attr("enum")).map(str::to_string),
        qualifiers: m.attr_or_empty("qualifiers"),
        params: params(m),
        description: m
            .child("description")
            .map(|d| to_text(&dedent(&d.text), docs_url))
            .unwrap_or_default(),
        deprecated,
        experimental,
    }
}

/// `<param>` (4.x) and `<argument>` (3.x) children, in index order.
fn params(e: &Element) -> Vec<Param> {
    let mut params: Vec<Param> = e
        .children
        .iter()
        .filter(|c| c.name == "param" || c.name == "argument")
        .enumerate()
        .map(|(i, p)| Param {
            index: p
                .attr("index")
                .and_then(|s| s.parse().ok())
                .unwrap_or(i as u32),
            name: p.attr_or_empty("name"),
            type_: p.attr_or_empty("type"),
            default: p.attr("default").map(str::to_string),
            enum_: p.attr("enum").map(str::to_string),
        })
        .collect();
    params.sort_by_key(|p| p.index);
    params
}

/// `(deprecated, experimental)` in either attribute form, notes as text.
fn status(e: &Element, docs_url: &str) -> (Option<String>, Option<String>) {
    let one = |note: &str, flag: &str| match e.attr(note) {
        Some(text) => Some(to_text(text.trim(), docs_url)),
        None if e.attr(flag) == Some("true") => Some(String::new()),
        None => None,
    };
    (
        one("deprecated", "is_deprecated"),
        one("experimental", "is_experimental"),
    )
}

fn keywords(e: &Element) -> Vec<String> {
    e.attr("keywords")
        .map(|k| {
            k.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Read the document into an element tree.
fn tree(file: &str, xml: &str) -> Result<Element, ParseError> {
    let mut reader = Reader::from_str(xml);
    let fail = |position: u64, message: String| {
        let (line, column) = line_column(xml, position as usize);
        ParseError {
            file: file.to_string(),
            line,
            column,
            message,
        }
    };
    let mut stack: Vec<Element> = Vec::new();
    loop {
        let event = reader
            .read_event()
            .map_err(|e| fail(reader.error_position(), e.to_string()))?;
        let is_empty = matches!(event, Event::Empty(_));
        match event {
            Event::Start(start) | Event::Empty(start) => {
                let mut element = Element {
                    name: start.name().as_ref().to_string(),
                    ..Default::default()
                };
                for attr in start.attributes() {
                    let attr = attr.map_err(|e| fail(reader.buffer_position(), e.to_string()))?;
                    let value = attr
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .map_err(|e| fail(reader.buffer_position(), e.to_string()))?;
                    element
                        .attrs
                        .push((attr.key.as_ref().to_string(), value.into_owned()));
                }
                if is_empty && stack.is_empty() {
                    return Ok(element);
                } else if is_empty {
                    attach(&mut stack, element);
                } else {
                    stack.push(element);
                }
            }
            Event::End(_) => {
                let element = stack.pop().expect("quick-xml checks that end tags match");
                if stack.is_empty() {
                    return Ok(element);
                }
                attach(&mut stack, element);
            }
            Event::Text(text) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&text.xml10_content());
                }
            }
            Event::CData(data) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&data.xml10_content());
                }
            }
            Event::GeneralRef(reference) => {
                let resolved = match reference.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    Ok(None) => {
                        let name = reference.xml10_content();
                        resolve_predefined_entity(&name)
                            .map(str::to_string)
                            .ok_or_else(|| {
                                fail(
                                    reader.buffer_position(),
                                    format!("unknown entity `&{name};`"),
                                )
                            })?
                    }
                    Err(e) => return Err(fail(reader.buffer_position(), e.to_string())),
                };
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&resolved);
                }
            }
            Event::Eof => {
                let message = match stack.last() {
                    Some(open) => format!("unexpected end of file: <{}> is not closed", open.name),
                    None => "no root element".into(),
                };
                return Err(fail(xml.len() as u64, message));
            }
            _ => {}
        }
    }
}

fn attach(stack: &mut [Element], element: Element) {
    if let Some(parent) = stack.last_mut() {
        parent.children.push(element);
    }
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const URL: &str = "https://docs.godotengine.org/en/4.6";

    fn fixture(path: &str) -> String {
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/godot")
            .join(path);
        std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
    }

    #[test]
    fn the_class_tag_alone_gives_name_and_parent() {
        let xml = "<?xml version=\"1.0\"?>\n<!-- a comment -->\n\
                   <class name=\"Widget\" inherits=\"Node&amp;Co\" version=\"4.6\"><brief_description>";
        assert_eq!(
            class_header(xml),
            Some(("Widget".to_string(), Some("Node&Co".to_string())))
        );
        assert_eq!(
            class_header("<class name=\"Object\"/>"),
            Some(("Object".to_string(), None))
        );
        assert_eq!(class_header("<doc><class name=\"X\"/></doc>"), None);
        assert_eq!(class_header("<class inherits=\"Node\">"), None);
        assert_eq!(class_header("not xml <"), None);
    }

    #[test]
    fn a_4x_class_has_every_section_with_entities_cdata_and_bbcode() {
        let c = parse_class("Widget.xml", &fixture("doc/classes/Widget.xml"), URL).unwrap();
        assert_eq!(
            (c.name.as_str(), c.inherits.as_deref()),
            ("Widget", Some("Gadget"))
        );
        assert_eq!(c.brief_description, "A widget for tests & fixtures.");
        assert_eq!(c.keywords, ["thing", "part"]);
        assert!(c.description.starts_with(
            "The Widget spins when `spin()` is called with `speed` < 10. See Widgets (https://docs.godotengine.org/en/4.6/tutorials/widgets.html)."
        ), "{}", c.description);
        assert!(
            c.description
                .contains("```gdscript\nvar w = Widget.new()\nif w.speed > 1:\n\tw.spin(2)\n```"),
            "{}",
            c.description
        );
        assert!(
            c.description.contains("Raw <b>markup</b> & text stays"),
            "CDATA kept verbatim: {}",
            c.description
        );
        assert_eq!(
            c.tutorials[0].url,
            "https://docs.godotengine.org/en/4.6/tutorials/widgets.html"
        );
        let spin = &c.methods[0];
        assert_eq!(
            (
                spin.return_type.as_str(),
                spin.qualifiers.as_str(),
                spin.params.len()
            ),
            ("int", "const", 2)
        );
        assert_eq!(spin.params[1].enum_.as_deref(), Some("Widget.Mode"));
        assert_eq!(
            spin.description,
            "Spins the widget. Returns `0` on success."
        );
        assert_eq!(
            c.methods[1].deprecated.as_deref(),
            Some("Use `spin()` instead.")
        );
        assert_eq!(c.methods[1].description, "");
        assert_eq!(c.methods[2].experimental.as_deref(), Some("May change."));
        assert_eq!(c.members[1].name, "theme_override/color.x");
        assert_eq!(c.signals[0].params[0].name, "turns");
        assert!(c.constants[1].is_bitfield && c.constants[0].enum_.as_deref() == Some("Mode"));
        assert_eq!(
            (
                c.theme_items[0].data_type.as_str(),
                c.theme_items[0].type_.as_str()
            ),
            ("style", "StyleBox")
        );
        assert_eq!(c.annotations[0].name, "@widget");
        assert_eq!(c.operators[0].name, "operator ==");
        assert_eq!(c.constructors[0].return_type, "Widget");
        assert_eq!(c.symbols().len(), 12);
    }

    #[test]
    fn old_4x_flags_mark_deprecated_and_experimental() {
        let c = parse_class("Gadget.xml", &fixture("doc/classes/Gadget.xml"), URL).unwrap();
        assert_eq!(
            (c.deprecated.as_deref(), c.experimental.as_deref()),
            (Some(""), Some(""))
        );
        assert_eq!(c.methods[0].deprecated.as_deref(), Some(""));
        assert!(
            c.members.is_empty()
                && c.constants.is_empty()
                && c.theme_items.is_empty()
                && c.tutorials.is_empty()
        );
    }

    #[test]
    fn a_3x_class_reads_arguments_as_params_and_missing_sections_as_empty() {
        let c = parse_class(
            "Legacy.xml",
            &fixture("doc/modules/extra/doc_classes/Legacy.xml"),
            "https://docs.godotengine.org/en/3.6",
        )
        .unwrap();
        assert_eq!(
            c.brief_description,
            "A Godot 3.x class with \"arguments\" and few sections."
        );
        let m = &c.methods[0];
        assert_eq!(
            m.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["target", "binds"]
        );
        assert_eq!(
            (m.return_enum.as_deref(), m.params[1].default.as_deref()),
            (Some("Error"), Some("[  ]"))
        );
        assert_eq!(
            m.description,
            "Connects. See docs (https://docs.godotengine.org/en/3.6/x.html)."
        );
        assert!(
            c.members.is_empty()
                && c.signals.is_empty()
                && c.constants.is_empty()
                && c.annotations.is_empty()
        );
        assert_eq!(c.description, "");
    }

    #[test]
    fn malformed_xml_names_file_line_and_column() {
        let e = parse_class(
            "malformed/Broken.xml",
            &fixture("malformed/Broken.xml"),
            URL,
        )
        .unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.line),
            ("malformed/Broken.xml", 5),
            "{e}"
        );
        assert!(
            e.column > 1 && e.to_string().starts_with("malformed/Broken.xml:5:"),
            "{e}"
        );
        let e = parse_class("x.xml", "<class name=\"A\"><methods>", URL).unwrap_err();
        assert!(e.message.contains("<methods> is not closed"), "{e}");
        let e = parse_class("y.xml", "<class name=\"A\">&bogus;</class>", URL).unwrap_err();
        assert!(e.message.contains("&bogus;"), "{e}");
    }
}
