//! Views: MCP Apps (the `io.modelcontextprotocol/ui` extension). A plugin
//! ships HTML pages in its component (the custom section
//! `mcphost:plugin-views`, written by the SDK's `view!` or by `host view
//! add`) and links tools to them (`x-view` in a tool's input schema). The
//! host serves each as the resource `ui://<plugin>/<view>`
//! (`text/html;profile=mcp-app`) and puts `_meta.ui.resourceUri` on the
//! linked tools, for clients that declare the extension only: others see
//! exactly what they saw before. A client shows the page in a sandboxed
//! iframe beside the tool's answer and relays its `tools/call`s, which are
//! calls like any other (the same tools, policy and checks).
//!
//! A view is hostile input like the rest of the component: bounded, UTF-8
//! HTML, and self-contained. It may name no remote origin (no `http:`,
//! `https:` or `//` source, link, import or form target), so the
//! restrictive default CSP of the extension is all it needs; a view that
//! breaks a rule is reported and left out, the plugin still loads.

use anyhow::{Result, bail};

pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";
pub const SECTION: &str = "mcphost:plugin-views";
/// One view; the bundled ones are under 40 KiB.
const MAX_VIEW_BYTES: usize = 512 * 1024;
/// All of one plugin's views.
pub const MAX_VIEWS_BYTES: usize = 2 << 20;

/// One view as the component declares it.
#[derive(Clone, Debug)]
pub struct View {
    pub name: String,
    pub title: String,
    pub html: String,
}

/// The views in one `mcphost:plugin-views` section: entries of the form
/// `<name>\t<title>\n<html>`, each ended by a NUL byte (the SDK's `view!`
/// writes one per view; the linker joins them in one section). A broken
/// entry is reported in the second list, by name where it has one.
pub fn parse_section(data: &[u8]) -> (Vec<View>, Vec<String>) {
    let mut views = Vec::new();
    let mut broken = Vec::new();
    for entry in data
        .split(|b| *b == 0)
        .filter(|e| !e.iter().all(u8::is_ascii_whitespace))
    {
        match parse_entry(entry) {
            Ok(view) => views.push(view),
            Err(e) => broken.push(format!("{e:#}")),
        }
    }
    (views, broken)
}

fn parse_entry(entry: &[u8]) -> Result<View> {
    let Ok(text) = std::str::from_utf8(entry) else {
        bail!("a view in `{SECTION}` is not UTF-8 text");
    };
    let Some((head, html)) = text.split_once('\n') else {
        bail!("a view in `{SECTION}` has no `<name>\\t<title>` line");
    };
    let (name, title) = head.split_once('\t').unwrap_or((head, head));
    let name = name.trim();
    if !valid_name(name) {
        bail!("view name {name:?} is not 1-64 of a-z, 0-9 and `-`");
    }
    if html.len() > MAX_VIEW_BYTES {
        bail!(
            "view `{name}` is {} bytes, above the {MAX_VIEW_BYTES} a view may have",
            html.len()
        );
    }
    if !html.to_ascii_lowercase().contains("<html") {
        bail!("view `{name}` is not an HTML document (no <html>)");
    }
    if let Some(origin) = remote_origin(html) {
        bail!(
            "view `{name}` names a remote origin ({origin}): a view must be self-contained (inline its scripts, styles and images)"
        );
    }
    Ok(View {
        name: name.to_string(),
        title: title.trim().chars().take(200).collect(),
        html: html.to_string(),
    })
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The first place the page would reach another origin: an attribute or
/// CSS `url(`/`@import` whose value starts `http:`, `https:` or `//`.
fn remote_origin(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let openers = [
        "src=", "href=", "action=", "url(", "@import", "import(", "from ",
    ];
    for opener in openers {
        for (at, _) in lower.match_indices(opener) {
            let value = lower[at + opener.len()..].trim_start_matches([' ', '"', '\'', '(']);
            if value.starts_with("http:") || value.starts_with("https:") || value.starts_with("//")
            {
                let shown: String = html[at..].chars().take(60).collect();
                return Some(shown);
            }
        }
    }
    None
}

/// A view's resource URI.
pub fn uri(plugin: &str, view: &str) -> String {
    format!("ui://{plugin}/{view}")
}

/// `(plugin, view)` of a `ui://` URI.
pub fn parse_uri(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix("ui://")?.split_once('/')
}

/// Whether a client declared the extension (and HTML views in it).
pub fn wanted(capabilities: Option<&rmcp::model::ClientCapabilities>) -> bool {
    capabilities
        .and_then(|c| c.extensions.as_ref())
        .and_then(|e| e.get(EXTENSION))
        .is_some_and(|settings| match settings.get("mimeTypes") {
            Some(serde_json::Value::Array(types)) => types.iter().any(|t| t == MIME_TYPE),
            // No list: the extension's only type.
            _ => true,
        })
}

/// The `_meta.ui` a view's resource carries: no origins beyond its own
/// (the extension's restrictive default CSP), a border.
pub fn resource_meta() -> serde_json::Value {
    serde_json::json!({"ui": {"csp": {"connectDomains": [], "resourceDomains": []}, "prefersBorder": true}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_hold_checked_views() {
        let data = b"results\tTest results\n<!doctype html><html><body>ok</body></html>\0\
                     bad name\tX\n<html></html>\0\
                     remote\tR\n<html><script src=\"https://cdn.example/x.js\"></script></html>\0";
        let (views, broken) = parse_section(data);
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].name, "results");
        assert_eq!(views[0].title, "Test results");
        assert_eq!(broken.len(), 2, "{broken:?}");
        assert!(broken[1].contains("remote origin"), "{broken:?}");
        assert_eq!(
            parse_uri("ui://run_test/results"),
            Some(("run_test", "results"))
        );
    }
}
