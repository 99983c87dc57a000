//! `content`: blocks a plugin adds to the current call's result (images,
//! audio, resource links, resources inline), collected for the reply as
//! MCP content blocks.
//!
//! A client shows these to a person, so what a plugin may put there is an
//! allow-list per kind of block (issue 34): images are `image/*` (an SVG
//! only without scripts, handlers or outside references), audio `audio/*`,
//! resources plain data (text other than HTML and script, JSON, images,
//! audio, video, archives); a link or a resource's URI is `https:`,
//! `http:` or the plugin's own resource scheme. Tool icons follow the
//! image rule ([`icon_src`]).

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rmcp::model::{ContentBlock, Resource, ResourceContents};

use crate::bindings::Refusal;
use crate::bindings::mcphost::plugin::content::{Block, Host, ResourceBody};
use crate::bindings::mcphost::plugin::types::CapabilityError;
use crate::store::CallState;

/// What one call's blocks may hold in all: their data stays in the host's
/// memory until the reply is sent.
const MAX_BYTES: usize = 16 << 20;

/// The blocks one call added, shared by its store and the service that
/// builds its reply.
#[derive(Clone, Default)]
pub struct Attached(Arc<Mutex<Added>>);

#[derive(Default)]
struct Added {
    blocks: Vec<ContentBlock>,
    bytes: usize,
}

impl Attached {
    /// The blocks added so far, in order; the call keeps none.
    pub fn take(&self) -> Vec<ContentBlock> {
        std::mem::take(&mut self.0.lock().expect("content lock").blocks)
    }
}

impl Host for CallState {
    async fn add(&mut self, block: Block) -> Result<(), Refusal<CapabilityError>> {
        let size = match &block {
            Block::Text(text) => text.len(),
            Block::Image(m) | Block::Audio(m) => m.data.len(),
            Block::ResourceLink(_) => 0,
            Block::Embedded(e) => match &e.body {
                ResourceBody::Text(text) => text.len(),
                ResourceBody::Blob(data) => data.len(),
            },
        };
        let block = to_mcp(block, self.call.own_scheme())?;
        // A call nobody replies to (a refresh) keeps nothing.
        let Some(attached) = self.call.attached::<Attached>() else {
            return Ok(());
        };
        let mut added = attached.0.lock().expect("content lock");
        if added.bytes + size > MAX_BYTES {
            return Err(CapabilityError::Invalid(format!(
                "this call's content would exceed {} MiB: return large data as a file or resource instead",
                MAX_BYTES >> 20
            ))
            .into());
        }
        added.bytes += size;
        added.blocks.push(block);
        Ok(())
    }
}

/// A block as MCP content (also a prompt message's content); `own_scheme`
/// is the plugin's resource scheme, which its URIs may use.
pub fn to_mcp(block: Block, own_scheme: Option<&str>) -> Result<ContentBlock, CapabilityError> {
    Ok(match block {
        Block::Text(text) => ContentBlock::text(text),
        Block::Image(m) => {
            let mime = shown_mime(Shown::Image, m.mime_type)?;
            inert_if_svg(&mime, &m.data)?;
            ContentBlock::image(BASE64.encode(&m.data), mime)
        }
        Block::Audio(m) => ContentBlock::audio(
            BASE64.encode(&m.data),
            shown_mime(Shown::Audio, m.mime_type)?,
        ),
        Block::ResourceLink(link) => {
            shown_uri(&link.uri, own_scheme)?;
            let mut resource = Resource::new(link.uri, link.name);
            resource.description = link.description;
            resource.mime_type = link
                .mime_type
                .map(|m| shown_mime(Shown::Resource, m))
                .transpose()?;
            ContentBlock::resource_link(resource)
        }
        Block::Embedded(e) => {
            shown_uri(&e.uri, own_scheme)?;
            let mime = e
                .mime_type
                .map(|m| shown_mime(Shown::Resource, m))
                .transpose()?;
            if let Some(mime) = &mime {
                let bytes = match &e.body {
                    ResourceBody::Text(text) => text.as_bytes(),
                    ResourceBody::Blob(data) => data,
                };
                inert_if_svg(mime, bytes)?;
            }
            let contents = match e.body {
                ResourceBody::Text(text) => ResourceContents::TextResourceContents {
                    uri: e.uri,
                    mime_type: None,
                    text,
                    meta: None,
                },
                ResourceBody::Blob(data) => ResourceContents::blob(BASE64.encode(&data), e.uri),
            };
            let contents = match mime {
                Some(m) => contents.with_mime_type(m),
                None => contents,
            };
            ContentBlock::resource(contents)
        }
    })
}

/// The kinds of block a MIME type is checked for.
#[derive(Clone, Copy, Debug)]
enum Shown {
    Image,
    Audio,
    Resource,
}

/// `m` if it is a MIME type (`type/subtype`, nothing a client could
/// misread) that blocks of `kind` may carry.
fn shown_mime(kind: Shown, m: String) -> Result<String, CapabilityError> {
    let m = mime(m)?;
    let essence = m
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let (top, sub) = essence.split_once('/').unwrap_or(("", ""));
    let allowed = match kind {
        Shown::Image => top == "image",
        Shown::Audio => top == "audio",
        Shown::Resource => match top {
            "image" | "audio" | "video" => true,
            // Text a client would not run: HTML and script are out.
            "text" => !matches!(sub, "html" | "javascript" | "ecmascript" | "xml" | "xsl"),
            "application" => {
                sub.ends_with("+json")
                    || matches!(
                        sub,
                        "json"
                            | "x-ndjson"
                            | "yaml"
                            | "toml"
                            | "octet-stream"
                            | "pdf"
                            | "zip"
                            | "gzip"
                            | "x-tar"
                            | "x-yaml"
                            | "wasm"
                            | "csv"
                    )
            }
            _ => false,
        },
    };
    if allowed {
        Ok(m)
    } else {
        let (block, remedy) = match kind {
            Shown::Image => ("image", "give an image/* type"),
            Shown::Audio => ("audio", "give an audio/* type"),
            Shown::Resource => (
                "resource",
                "give plain data (text/plain, text/markdown, application/json, image/*, ...); HTML and script are not shown",
            ),
        };
        Err(CapabilityError::Invalid(format!(
            "`{m}` is not a type a {block} block may carry: {remedy}"
        )))
    }
}

/// A URI a client may open or fetch: `https:`, `http:`, or the plugin's
/// own resource scheme (nothing that reaches into the machine or runs:
/// `file:`, `javascript:`, `data:`).
fn shown_uri(uri: &str, own_scheme: Option<&str>) -> Result<(), CapabilityError> {
    let scheme = uri.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
    let ok = match scheme.as_deref() {
        Some("https") | Some("http") => true,
        Some(s) => {
            own_scheme.is_some_and(|own| own.eq_ignore_ascii_case(s))
                && uri[s.len()..].starts_with("://")
        }
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(CapabilityError::Invalid(format!(
            "`{}` is not a URI a client may be given: use https:, http:{}",
            uri.chars().take(80).collect::<String>(),
            own_scheme
                .map(|s| format!(" or this plugin's {s}://"))
                .unwrap_or_default()
        )))
    }
}

/// Refuse an SVG that can run or fetch anything.
fn inert_if_svg(mime: &str, data: &[u8]) -> Result<(), CapabilityError> {
    if mime.to_ascii_lowercase().starts_with("image/svg") && !inert_svg(data) {
        return Err(CapabilityError::Invalid(
            "the SVG holds a script, an event handler, an embedded document or an outside reference; \
             send it as PNG, or without those"
                .into(),
        ));
    }
    Ok(())
}

/// Whether an SVG has nothing that runs or fetches: no `<script>`, no
/// `on…=` handler, no `javascript:`, no embedded document, and `href`s only
/// to its own fragments.
pub fn inert_svg(data: &[u8]) -> bool {
    use regex::Regex;
    use std::sync::LazyLock;
    static HANDLER: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"(?i)[\s/"']on[a-z]+\s*="#).expect("valid"));
    static HREF: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"(?i)href\s*=\s*["']?\s*([^"'\s>]*)"#).expect("valid"));
    let text = String::from_utf8_lossy(data).to_ascii_lowercase();
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let active = [
        "<script",
        "javascript:",
        "<foreignobject",
        "<iframe",
        "<embed",
        "<object",
        "<!entity",
        "@import",
        "url(",
    ];
    !active.iter().any(|a| squeezed.contains(a))
        && !HANDLER.is_match(&text)
        && HREF.captures_iter(&text).all(|c| c[1].starts_with('#'))
}

/// A tool icon's `src`: an `https:` URL, or a `data:image/` URI (base64)
/// whose image passes the image rule.
pub fn icon_src(src: &str) -> Result<(), String> {
    let lower = src.to_ascii_lowercase();
    if lower.starts_with("https://") {
        return Ok(());
    }
    let refuse = || {
        Err(format!(
            "icon `{}` is neither an https: URL nor a data:image/ URI with an inert image",
            src.chars().take(80).collect::<String>()
        ))
    };
    let Some(rest) = lower.strip_prefix("data:") else {
        return refuse();
    };
    let Some((meta, payload)) = rest.split_once(',') else {
        return refuse();
    };
    let mime = meta.split(';').next().unwrap_or("");
    if shown_mime(Shown::Image, mime.to_string()).is_err() {
        return refuse();
    }
    let data = if meta.ends_with(";base64") {
        match BASE64.decode(&src[src.len() - payload.len()..]) {
            Ok(data) => data,
            Err(_) => return refuse(),
        }
    } else {
        payload.as_bytes().to_vec()
    };
    if mime.starts_with("image/svg") && !inert_svg(&data) {
        return refuse();
    }
    Ok(())
}

/// A MIME type as `type/subtype`, nothing a client could misread.
fn mime(m: String) -> Result<String, CapabilityError> {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let printable = m.bytes().all(|b| (0x20..0x7f).contains(&b));
    match m.split_once('/') {
        Some((kind, sub))
            if printable && token(kind) && token(sub.split(';').next().unwrap_or("")) =>
        {
            Ok(m)
        }
        _ => Err(CapabilityError::Invalid(format!(
            "`{m}` is not a MIME type: give `type/subtype`, e.g. image/png"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_block_carries_only_its_own_types() {
        assert!(shown_mime(Shown::Image, "image/png".into()).is_ok());
        assert!(shown_mime(Shown::Image, "text/html".into()).is_err());
        assert!(shown_mime(Shown::Audio, "text/html".into()).is_err());
        assert!(shown_mime(Shown::Audio, "audio/wav".into()).is_ok());
        for good in [
            "text/plain",
            "text/markdown; charset=utf-8",
            "application/json",
            "application/vnd.x+json",
            "image/png",
        ] {
            assert!(shown_mime(Shown::Resource, good.into()).is_ok(), "{good}");
        }
        for bad in [
            "text/html",
            "TEXT/HTML",
            "application/xhtml+xml",
            "text/javascript",
            "application/javascript",
            "application/x-sh",
        ] {
            assert!(shown_mime(Shown::Resource, bad.into()).is_err(), "{bad}");
        }
    }

    #[test]
    fn links_go_to_the_web_or_the_plugins_own_resources() {
        for good in [
            "https://example.org/x",
            "http://127.0.0.1:8/x",
            "godot://class/Node",
        ] {
            assert!(shown_uri(good, Some("godot")).is_ok(), "{good}");
        }
        for bad in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "vbscript:x",
            "file:///etc/passwd",
            "data:text/html,<script>",
            "other://x",
            "godot:x",
            "relative/path",
        ] {
            assert!(shown_uri(bad, Some("godot")).is_err(), "{bad}");
        }
        assert!(shown_uri("godot://x", None).is_err());
    }

    #[test]
    fn svgs_that_run_or_fetch_are_refused() {
        let plain = br##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><rect width="1" height="1" fill="red"/><use href="#a"/></svg>"##;
        assert!(inert_svg(plain));
        for bad in [
            &br#"<svg><script>alert(1)</script></svg>"#[..],
            br#"<svg onload="alert(1)"/>"#,
            br#"<svg><rect ONCLICK = "x"/></svg>"#,
            br#"<svg><a href="javascript:alert(1)"/></svg>"#,
            br#"<svg><image href="https://evil/x"/></svg>"#,
            br#"<svg><foreignObject><iframe/></foreignObject></svg>"#,
        ] {
            assert!(!inert_svg(bad), "{}", String::from_utf8_lossy(bad));
        }
        assert!(icon_src("data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAxIDEiPjxyZWN0IHdpZHRoPSIxIiBoZWlnaHQ9IjEiIGZpbGw9InJlZCIvPjwvc3ZnPg==").is_ok());
        let script = BASE64.encode(br#"<svg><script>alert(1)</script></svg>"#);
        assert!(icon_src(&format!("data:image/svg+xml;base64,{script}")).is_err());
        assert!(icon_src("data:text/html;base64,PGI+").is_err());
        assert!(icon_src("javascript:alert(1)").is_err());
        assert!(icon_src("https://example.org/i.png").is_ok());
    }

    #[test]
    fn mime_types_are_type_slash_subtype() {
        for good in [
            "image/png",
            "audio/wav",
            "application/vnd.api+json",
            "text/plain; charset=utf-8",
        ] {
            assert!(mime(good.into()).is_ok(), "{good}");
        }
        for bad in ["png", "image/", "/png", "image/png\n", "text/<b>", ""] {
            assert!(mime(bad.into()).is_err(), "{bad:?}");
        }
    }
}
