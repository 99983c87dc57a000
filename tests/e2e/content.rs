//! Content blocks a plugin adds (`content` import): images, audio and
//! resources reach the client as MCP content, byte-exact, over stdio and
//! over HTTP. The plugin is the conformance fixture (tests/plugins/conformance).

use base64::Engine as _;
use rmcp::ClientLifecycleMode;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::json;

use crate::harness::*;

const RED_PIXEL: &[u8] = include_bytes!("../plugins/conformance/red.png");

fn decode(data: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64")
}

/// The checks, whatever the transport.
async fn blocks_arrive(client: &Client) {
    let image = client.call("test_image_content", json!({})).await;
    match &image.content[..] {
        [ContentBlock::Image(i)] => {
            assert_eq!(i.mime_type, "image/png");
            assert_eq!(decode(&i.data), RED_PIXEL, "the PNG arrives byte-exact");
        }
        other => panic!("one image block, not {other:?}"),
    }

    let audio = client.call("test_audio_content", json!({})).await;
    let [ContentBlock::Audio(a)] = &audio.content[..] else {
        panic!("{audio:?}")
    };
    assert_eq!(a.mime_type, "audio/wav");
    assert!(decode(&a.data).starts_with(b"RIFF"), "{a:?}");

    // The text first, then the blocks in the order added.
    let mixed: CallToolResult = client.call("test_multiple_content_types", json!({})).await;
    match &mixed.content[..] {
        [
            ContentBlock::Text(t),
            ContentBlock::Image(_),
            ContentBlock::Resource(r),
        ] => {
            assert_eq!(t.text, "Multiple content types test:");
            match &r.resource {
                ResourceContents::TextResourceContents {
                    uri, mime_type, text, ..
                } => {
                    assert_eq!(uri, "test://mixed-content-resource");
                    assert_eq!(mime_type.as_deref(), Some("application/json"));
                    assert_eq!(text, r#"{"test":"data","value":123}"#);
                }
                other => panic!("a text resource, not {other:?}"),
            }
        }
        other => panic!("text, image, resource; not {other:?}"),
    }
}

#[tokio::test]
async fn added_blocks_reach_a_stdio_client() {
    let env = Env::new(&["conformance"], "");
    blocks_arrive(&env.start().await).await;
}

#[tokio::test]
async fn added_blocks_reach_http_clients_of_both_generations() {
    let env = Env::new(&["conformance"], "");
    let host = env.start_http(&[]).await;
    let legacy = host.connect(ClientLifecycleMode::Initialize, None).await;
    blocks_arrive(&legacy).await;
    let current = host
        .connect(
            ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
            None,
        )
        .await;
    blocks_arrive(&current).await;
}
