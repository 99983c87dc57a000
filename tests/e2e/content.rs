//! Content blocks a plugin adds (`content` import): images, audio and
//! resources reach the client as MCP content, byte-exact, over stdio and
//! over HTTP; and prompts (`prompts` export), whose messages are such
//! blocks. The plugin is the conformance fixture (tests/plugins/conformance).

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
                    uri,
                    mime_type,
                    text,
                    ..
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

/// Prompts, whatever the transport.
async fn prompts_are_listed_and_filled_in(client: &Client) {
    use rmcp::model::{GetPromptRequestParams, Role};
    let peer = client.service.peer();
    let prompts = peer.list_all_prompts().await.unwrap();
    let with_args = prompts
        .iter()
        .find(|p| p.name == "test_prompt_with_arguments")
        .expect("listed");
    let args = with_args.arguments.as_ref().unwrap();
    assert_eq!(args.len(), 2);
    assert_eq!(args[0].name, "arg1");
    assert_eq!(args[0].required, Some(true));

    let get = |name: &str, arguments: serde_json::Value| {
        let mut params = GetPromptRequestParams::new(name);
        if let serde_json::Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        peer.get_prompt(params)
    };
    let filled = get(
        "test_prompt_with_arguments",
        json!({"arg1": "hello", "arg2": "world"}),
    )
    .await
    .unwrap();
    match &filled.messages[..] {
        [m] => {
            assert_eq!(m.role, Role::User);
            let ContentBlock::Text(t) = &m.content else {
                panic!("{m:?}")
            };
            assert_eq!(t.text, "Prompt with arguments: arg1='hello', arg2='world'");
        }
        other => panic!("{other:?}"),
    }
    let image = get("test_prompt_with_image", json!({})).await.unwrap();
    let ContentBlock::Image(i) = &image.messages[0].content else {
        panic!("{image:?}")
    };
    assert_eq!(decode(&i.data), RED_PIXEL);

    // A required argument missing, and a prompt nobody offers: the
    // client's mistake, named.
    let missing = get("test_prompt_with_arguments", json!({"arg1": "x"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(missing.contains("arg2"), "{missing}");
    let unknown = get("no_such_prompt", json!({}))
        .await
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("test_simple_prompt"), "{unknown}");
}

#[tokio::test]
async fn prompts_over_stdio_and_both_http_generations() {
    let env = Env::new(&["conformance"], "");
    prompts_are_listed_and_filled_in(&env.start().await).await;
    let host = env.start_http(&[]).await;
    for lifecycle in [
        ClientLifecycleMode::Initialize,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        },
    ] {
        prompts_are_listed_and_filled_in(&host.connect(lifecycle, None).await).await;
    }
}

#[tokio::test]
async fn tools_carry_their_title_and_icons() {
    let env = Env::new(&["conformance"], "");
    let tools = env.start().await.tools().await;
    let simple = tools
        .iter()
        .find(|t| t.name == "test_simple_text")
        .expect("listed");
    assert_eq!(simple.title.as_deref(), Some("Simple text"));
    let icons = simple.icons.as_ref().expect("icons");
    assert_eq!(icons.len(), 1);
    assert!(icons[0].src.starts_with("data:image/svg+xml;base64,"));
    assert_eq!(icons[0].mime_type.as_deref(), Some("image/svg+xml"));
    // The keyword is the host's, not part of the schema clients see.
    assert!(!simple.input_schema.contains_key("x-icons"));
    assert!(
        tools.iter().any(|t| t.icons.is_none()),
        "icons are optional"
    );
}
