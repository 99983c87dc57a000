//! The typed class reference: what `godot.get_class` and
//! `godot.get_symbol` return. Sections a class lacks are empty lists.

use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ClassDoc {
    pub name: String,
    pub inherits: Option<String>,
    pub brief_description: String,
    pub description: String,
    /// `Some("")` when deprecated without a note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experimental: Option<String>,
    pub keywords: Vec<String>,
    pub tutorials: Vec<Tutorial>,
    pub methods: Vec<Method>,
    pub members: Vec<Property>,
    pub signals: Vec<Signal>,
    pub constants: Vec<Constant>,
    pub theme_items: Vec<ThemeItem>,
    pub annotations: Vec<Method>,
    pub operators: Vec<Method>,
    pub constructors: Vec<Method>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Tutorial {
    pub title: String,
    pub url: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Param {
    pub index: u32,
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(rename = "enum", skip_serializing_if = "Option::is_none")]
    pub enum_: Option<String>,
}

/// A method, annotation, operator or constructor.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Method {
    pub name: String,
    pub return_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_enum: Option<String>,
    pub qualifiers: String,
    pub params: Vec<Param>,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experimental: Option<String>,
}

/// A `<member>`: a property.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Property {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub setter: String,
    pub getter: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(rename = "enum", skip_serializing_if = "Option::is_none")]
    pub enum_: Option<String>,
    /// Set when this entry overrides the default of an inherited property.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overrides: Option<String>,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experimental: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Signal {
    pub name: String,
    pub params: Vec<Param>,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experimental: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Constant {
    pub name: String,
    pub value: String,
    #[serde(rename = "enum", skip_serializing_if = "Option::is_none")]
    pub enum_: Option<String>,
    pub is_bitfield: bool,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experimental: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ThemeItem {
    pub name: String,
    pub data_type: String,
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    pub description: String,
}

/// The kinds of symbol, as they appear in URIs and the `kind` filter.
pub const SYMBOL_KINDS: [&str; 8] = [
    "method",
    "property",
    "signal",
    "constant",
    "annotation",
    "constructor",
    "operator",
    "theme_item",
];

/// The section of a class's JSON that holds each kind of symbol.
pub fn section_of(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "method" => "methods",
        "property" => "members",
        "signal" => "signals",
        "constant" => "constants",
        "annotation" => "annotations",
        "constructor" => "constructors",
        "operator" => "operators",
        "theme_item" => "theme_items",
        _ => return None,
    })
}

/// One symbol of a class, as the index takes it. (`get_symbol` answers
/// from the class's JSON: storing each symbol's own took a third of the
/// time to build an index.)
pub struct Symbol<'a> {
    pub kind: &'static str,
    pub name: &'a str,
    pub description: &'a str,
    pub deprecated: bool,
    /// Its parameters (a method's, a signal's); none for the rest.
    pub params: &'a [Param],
    /// Which of the class's members of this kind and name it is (0: the
    /// first; constructors and operators are overloaded).
    pub overload: usize,
}

impl Symbol<'_> {
    /// The name in its URI: `Vector2` for the first, `Vector2~2` for the
    /// second overload, so each has a URI of its own.
    pub fn uri_name(&self) -> String {
        overload_name(self.name, self.overload)
    }
}

/// `name` for overload number `overload` (0-based) in a URI.
pub fn overload_name(name: &str, overload: usize) -> String {
    match overload {
        0 => name.to_string(),
        n => format!("{name}~{}", n + 1),
    }
}

/// A URI's member name as the name and the overload it picks (0-based).
pub fn split_overload(name: &str) -> (&str, usize) {
    match name.rsplit_once('~') {
        Some((base, n)) => match n.parse::<usize>() {
            Ok(n) if n >= 2 => (base, n - 1),
            _ => (name, 0),
        },
        None => (name, 0),
    }
}

impl ClassDoc {
    /// Every symbol, in the order of [`SYMBOL_KINDS`].
    pub fn symbols(&self) -> Vec<Symbol<'_>> {
        fn all<'a, T>(
            out: &mut Vec<Symbol<'a>>,
            kind: &'static str,
            items: &'a [T],
            fields: impl Fn(&'a T) -> (&'a str, &'a str, bool, &'a [Param]),
        ) {
            let mut seen: std::collections::HashMap<&str, usize> = Default::default();
            for item in items {
                let (name, description, deprecated, params) = fields(item);
                let count = seen.entry(name).or_default();
                let overload = *count;
                *count += 1;
                out.push(Symbol {
                    kind,
                    name,
                    description,
                    deprecated,
                    params,
                    overload,
                });
            }
        }
        fn method(m: &Method) -> (&str, &str, bool, &[Param]) {
            (&m.name, &m.description, m.deprecated.is_some(), &m.params)
        }
        let mut out = Vec::new();
        all(&mut out, "method", &self.methods, method);
        all(&mut out, "property", &self.members, |p| {
            (&p.name, &p.description, p.deprecated.is_some(), &[])
        });
        all(&mut out, "signal", &self.signals, |s| {
            (&s.name, &s.description, s.deprecated.is_some(), &s.params)
        });
        all(&mut out, "constant", &self.constants, |c| {
            (&c.name, &c.description, c.deprecated.is_some(), &[])
        });
        all(&mut out, "annotation", &self.annotations, method);
        all(&mut out, "constructor", &self.constructors, method);
        all(&mut out, "operator", &self.operators, method);
        all(&mut out, "theme_item", &self.theme_items, |t| {
            (&t.name, &t.description, false, &[])
        });
        out
    }
}
