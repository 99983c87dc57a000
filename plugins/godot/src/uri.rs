//! `godot://` URIs: `class/<C>`, `symbol/<C>/<kind>/<name>` and
//! `search?q=&kind=`, each optionally after a version (`godot://4.6/class/
//! Node2D`; without one, the default version). Names keep `@`, `/` and
//! `.`; only characters that would break a URI (space, `%`, `?`, `#`) are
//! percent-encoded.

pub fn class(name: &str) -> String {
    format!("godot://class/{}", encode(name))
}

pub fn symbol(class: &str, kind: &str, name: &str) -> String {
    format!("godot://symbol/{}/{kind}/{}", encode(class), encode(name))
}

/// A section of a manual page (`tutorials/physics/using_character_body_2d`).
pub fn manual(page: &str, anchor: &str) -> String {
    format!("godot://manual/{}#{}", encode(page), encode(anchor))
}

pub fn search(query: &str, kind: Option<&str>) -> String {
    let q = encode(query).replace('&', "%26").replace('=', "%3D");
    match kind {
        Some(kind) => format!("godot://search?q={q}&kind={kind}"),
        None => format!("godot://search?q={q}"),
    }
}

/// `uri` (unversioned) with `version` in it.
pub fn versioned(uri: &str, version: &str) -> String {
    match uri.strip_prefix("godot://") {
        Some(rest) => format!("godot://{version}/{rest}"),
        None => uri.to_string(),
    }
}

/// A URI's version segment: digits and dots, starting with a digit.
fn is_version(segment: &str) -> bool {
    segment.starts_with(|c: char| c.is_ascii_digit())
        && segment.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// What a `godot://` URI points at.
#[derive(Debug, PartialEq)]
pub enum Target {
    Class(String),
    Symbol {
        class: String,
        kind: String,
        name: String,
    },
    Search {
        query: String,
        kind: Option<String>,
    },
    /// A manual page, or one of its sections (`#anchor`).
    Manual {
        page: String,
        anchor: Option<String>,
    },
}

/// Parse a URI into its version (if it names one) and target; the error
/// says which forms exist.
pub fn parse(uri: &str) -> Result<(Option<String>, Target), String> {
    let forms = "use godot://class/<Class>, godot://symbol/<Class>/<kind>/<name>, godot://search?q=<words>&kind=<kind> \
                 or godot://manual/<page>[#<section>], each optionally with a version first (godot://4.6/class/<Class>)";
    let rest = uri
        .strip_prefix("godot://")
        .ok_or_else(|| format!("`{uri}` is not a godot:// URI: {forms}"))?;
    let (version, rest) = match rest.split_once('/') {
        Some((first, rest)) if is_version(first) => (Some(first.to_string()), rest),
        _ => (None, rest),
    };
    target(rest)
        .map(|t| (version, t))
        .ok_or_else(|| format!("`{uri}` is not a valid godot:// URI: {forms}"))
}

fn target(rest: &str) -> Option<Target> {
    if let Some(path) = rest.strip_prefix("manual/") {
        let (page, anchor) = match path.split_once('#') {
            Some((p, a)) => (p, Some(decode(a)).filter(|a| !a.is_empty())),
            None => (path, None),
        };
        let page = decode(page);
        let plain = page
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
        if plain && !page.contains('\\') {
            return Some(Target::Manual { page, anchor });
        }
    } else if let Some(name) = rest.strip_prefix("class/") {
        if !name.is_empty() && !name.contains('/') {
            return Some(Target::Class(decode(name)));
        }
    } else if let Some(path) = rest.strip_prefix("symbol/") {
        let mut parts = path.splitn(3, '/');
        if let (Some(class), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next())
            && !class.is_empty()
            && !name.is_empty()
        {
            return Some(Target::Symbol {
                class: decode(class),
                kind: kind.to_string(),
                name: decode(name),
            });
        }
    } else if let Some(query) = rest.strip_prefix("search?") {
        let mut q = None;
        let mut kind = None;
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("q", v)) => q = Some(decode(&v.replace('+', " "))),
                Some(("kind", v)) if !v.is_empty() => kind = Some(decode(v)),
                _ => {}
            }
        }
        if let Some(query) = q.filter(|q| !q.trim().is_empty()) {
            return Some(Target::Search { query, kind });
        }
    }
    None
}

fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            ' ' => out.push_str("%20"),
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3F"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_pages_and_sections_parse_and_nothing_climbs_out() {
        let uri = manual(
            "tutorials/physics/using_character_body_2d",
            "platformer-movement",
        );
        assert_eq!(
            parse(&uri).unwrap().1,
            Target::Manual {
                page: "tutorials/physics/using_character_body_2d".into(),
                anchor: Some("platformer-movement".into())
            }
        );
        for bad in [
            "godot://manual/../secret",
            "godot://manual/a//b",
            "godot://manual/",
            "godot://manual/a/%2E%2E/b",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn uris_round_trip_with_at_slash_dot_and_spaces() {
        assert_eq!(
            symbol("@GlobalScope", "constant", "KEY_ESCAPE"),
            "godot://symbol/@GlobalScope/constant/KEY_ESCAPE"
        );
        let tricky = symbol("Control", "theme_item", "font/size.x");
        assert_eq!(
            parse(&tricky).unwrap().1,
            Target::Symbol {
                class: "Control".into(),
                kind: "theme_item".into(),
                name: "font/size.x".into()
            }
        );
        let op = symbol("Vector2", "operator", "operator +");
        assert_eq!(op, "godot://symbol/Vector2/operator/operator%20+");
        assert_eq!(
            parse(&op).unwrap().1,
            Target::Symbol {
                class: "Vector2".into(),
                kind: "operator".into(),
                name: "operator +".into()
            }
        );
        assert_eq!(
            parse(&class("Node2D")).unwrap(),
            (None, Target::Class("Node2D".into()))
        );
        assert_eq!(
            parse(&versioned(&class("Node2D"), "4.6")).unwrap(),
            (Some("4.6".into()), Target::Class("Node2D".into()))
        );
        assert_eq!(
            versioned(&class("Node2D"), "3.6"),
            "godot://3.6/class/Node2D"
        );
        assert_eq!(
            parse(&search("play sound & more", Some("method")))
                .unwrap()
                .1,
            Target::Search {
                query: "play sound & more".into(),
                kind: Some("method".into())
            }
        );
        assert!(
            parse("godot://class/")
                .unwrap_err()
                .contains("godot://class/<Class>")
        );
        assert!(parse("http://x").is_err());
    }
}
