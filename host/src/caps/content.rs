//! `content`: blocks a plugin adds to the current call's result (images,
//! audio, resource links, resources inline), collected for the reply as
//! MCP content blocks.

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
        let block = to_mcp(block)?;
        let mut added = self.call.attached.0.lock().expect("content lock");
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

/// A block as MCP content (also a prompt message's content).
pub fn to_mcp(block: Block) -> Result<ContentBlock, CapabilityError> {
    Ok(match block {
        Block::Text(text) => ContentBlock::text(text),
        Block::Image(m) => ContentBlock::image(BASE64.encode(&m.data), mime(m.mime_type)?),
        Block::Audio(m) => ContentBlock::audio(BASE64.encode(&m.data), mime(m.mime_type)?),
        Block::ResourceLink(link) => {
            let mut resource = Resource::new(link.uri, link.name);
            resource.description = link.description;
            resource.mime_type = link.mime_type.map(mime).transpose()?;
            ContentBlock::resource_link(resource)
        }
        Block::Embedded(e) => {
            let contents = match e.body {
                ResourceBody::Text(text) => ResourceContents::TextResourceContents {
                    uri: e.uri,
                    mime_type: None,
                    text,
                    meta: None,
                },
                ResourceBody::Blob(data) => ResourceContents::blob(BASE64.encode(&data), e.uri),
            };
            let contents = match e.mime_type {
                Some(m) => contents.with_mime_type(mime(m)?),
                None => contents,
            };
            ContentBlock::resource(contents)
        }
    })
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
    use super::mime;

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
