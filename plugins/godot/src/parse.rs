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
    let (deprecated, experimental) = status(&root);
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
                let (deprecated, experimental) = status(m);
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
                let (deprecated, experimental) = status(s);
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
                let (deprecated, experimental) = status(c);
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
    let (deprecated, experimental) = status(m);
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

/// `(deprecated, experimental)` in either attribute form.
fn status(e: &Element) -> (Option<String>, Option<String>) {
    let one = |note: &str, flag: &str| match e.attr(note) {
        Some(text) => Some(text.trim().to_string()),
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
