//! A plugin asking the client from inside a call (`client` import:
//! elicitation, sampling), listed and binary resources with subscriptions
//! (`resource-list` export, `notify.resource-updated`), and completions
//! (`completion` export), over stdio and HTTP. The plugin is the
//! conformance fixture (tests/plugins/conformance).

#![allow(deprecated)] // sampling: deprecated by SEP-2577, still spoken

use std::time::Duration;

use base64::Engine as _;
use rmcp::ClientLifecycleMode;
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, CreateMessageResult, ElicitResult, ElicitationAction,
    ReadResourceRequestParams, Reference, ResourceContents, SamplingMessage,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use serde_json::json;

use crate::harness::*;

const RED_PIXEL: &[u8] = include_bytes!("../plugins/conformance/red.png");
const GRANTED: &str = "[plugins.conformance]\ncapabilities = [\"client\"]\n";

fn accepting() -> Answers {
    let mut accept = ElicitResult::new(ElicitationAction::Accept);
    accept.content = Some(json!({"username": "ada", "email": "ada@example.org"}));
    Answers {
        elicit: Some(accept),
        url: false,
        sample: Some(CreateMessageResult::new(
            SamplingMessage::assistant_text("forty-two"),
            "test-model".into(),
        )),
        stall: false,
        roots: Some(vec!["file:///home/ada/project".into()]),
        tasks: false,
    }
}

/// The checks, whatever the transport: the answer reaches the plugin, and
/// the client saw the question the plugin asked.
async fn questions_are_answered(client: &Client) {
    let elicited = client
        .call("test_elicitation", json!({"message": "Who are you?"}))
        .await;
    assert!(!is_error(&elicited), "{elicited:?}");
    let said = text(&elicited);
    assert!(said.contains("action=accept"), "{said}");
    assert!(said.contains(r#""username":"ada""#), "{said}");
    let asked = client
        .wait_note(Duration::from_secs(5), |n| matches!(n, Note::Asked(_)))
        .await;
    let Some(Note::Asked(asked)) = asked else {
        panic!("the client was asked")
    };
    assert_eq!(asked["message"], "Who are you?");
    assert_eq!(
        asked["requestedSchema"]["required"],
        json!(["username", "email"])
    );

    let sampled = client
        .call(
            "test_sampling",
            json!({"prompt": "What is six times seven?"}),
        )
        .await;
    assert_eq!(
        text(&sampled),
        "LLM response: forty-two (model test-model)",
        "{sampled:?}"
    );
    let Some(Note::Asked(asked)) = client
        .wait_note(Duration::from_secs(5), |n| matches!(n, Note::Asked(_)))
        .await
    else {
        panic!("the client was asked for a completion")
    };
    assert_eq!(asked["maxTokens"], 100);
    assert_eq!(
        asked["messages"][0]["content"]["text"],
        "What is six times seven?"
    );

    // Three questions at once, each answered under its name.
    let all = client
        .call("test_input_required_result_multiple_inputs", json!({}))
        .await;
    assert_eq!(
        text(&all),
        r#"Got: {"email":"ada@example.org","username":"ada"}; forty-two; file:///home/ada/project"#,
        "{all:?}"
    );

    // A prompt asks too (a 2026-07-28 client: in rounds as well).
    let filled = client
        .service
        .get_prompt(rmcp::model::GetPromptRequestParams::new(
            "test_input_required_result_prompt",
        ))
        .await
        .expect("prompts/get");
    let said = serde_json::to_value(&filled.messages[0].content).unwrap();
    assert_eq!(
        said["text"], r#"Use this context: {"email":"ada@example.org","username":"ada"}"#,
        "{filled:?}"
    );
}

#[tokio::test]
async fn a_plugin_asks_the_person_and_the_model_over_stdio() {
    let env = Env::new(&["conformance"], GRANTED);
    questions_are_answered(&env.start_answering(&[], accepting()).await).await;
}

#[tokio::test]
async fn a_plugin_asks_over_an_http_session() {
    let env = Env::new(&["conformance"], GRANTED);
    let host = env.start_http(&[]).await;
    let client = host
        .connect_answering(ClientLifecycleMode::Initialize, None, accepting())
        .await;
    questions_are_answered(&client).await;
}

#[tokio::test]
async fn declined_unsupported_and_denied_questions_are_told_apart() {
    let env = Env::new(&["conformance"], GRANTED);
    let decline = Answers {
        elicit: Some(ElicitResult::new(ElicitationAction::Decline)),
        ..Answers::default()
    };
    let client = env.start_answering(&[], decline).await;
    let declined = client
        .call("test_elicitation", json!({"message": "Who are you?"}))
        .await;
    assert!(
        text(&declined).contains("action=decline, content={}"),
        "{declined:?}"
    );
    // This client declared elicitation but not sampling nor URL mode.
    let unsampled = client.call("test_sampling", json!({"prompt": "hi"})).await;
    assert!(is_error(&unsampled));
    assert_eq!(
        structured(&unsampled)["code"],
        "unsupported",
        "{unsampled:?}"
    );
    let no_url = client
        .call("elicit_url", json!({"url": "https://example.org/login"}))
        .await;
    assert_eq!(structured(&no_url)["code"], "unsupported", "{no_url:?}");
    let bad_url = client
        .call("elicit_url", json!({"url": "file:///etc/passwd"}))
        .await;
    assert_eq!(
        structured(&bad_url)["code"],
        "invalid_request",
        "{bad_url:?}"
    );

    // Without the grant, nothing is asked: the error names the key.
    let env = Env::new(&["conformance"], "");
    let client = env.start_answering(&[], accepting()).await;
    let denied = client
        .call("test_elicitation", json!({"message": "Who are you?"}))
        .await;
    assert_eq!(structured(&denied)["code"], "denied", "{denied:?}");
    let message = structured(&denied)["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("capabilities") && message.contains("\"client\""),
        "{message}"
    );
    assert!(
        client
            .drain_notes()
            .await
            .iter()
            .all(|n| !matches!(n, Note::Asked(_))),
        "a denied plugin asks nobody"
    );
}

#[tokio::test]
async fn url_questions_reach_a_client_that_takes_them() {
    let env = Env::new(&["conformance"], GRANTED);
    let answers = Answers {
        url: true,
        ..accepting()
    };
    let client = env.start_answering(&[], answers).await;
    let result = client
        .call("elicit_url", json!({"url": "https://example.org/login"}))
        .await;
    assert_eq!(text(&result), "accept", "{result:?}");
    let Some(Note::Asked(asked)) = client
        .wait_note(Duration::from_secs(5), |n| matches!(n, Note::Asked(_)))
        .await
    else {
        panic!("asked")
    };
    assert_eq!(asked["mode"], "url");
    assert_eq!(asked["url"], "https://example.org/login");
    assert!(
        asked["elicitationId"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
}

/// A question nobody answers ends with the call: when it is cancelled, or
/// at its deadline.
#[tokio::test]
async fn an_unanswered_question_ends_with_the_call() {
    let walked_away = Answers {
        stall: true,
        ..accepting()
    };
    let env = Env::new(&["conformance"], GRANTED);
    let client = env.start_answering(&[], walked_away.clone()).await;
    let handle = client
        .start_call("test_elicitation", json!({"message": "Still there?"}), "c1")
        .await;
    client
        .wait_note(Duration::from_secs(10), |n| matches!(n, Note::Asked(_)))
        .await
        .expect("asked");
    handle.cancel(Some("test cancels".into())).await.unwrap();
    // The plugin hears its question went unanswered and ends the call.
    env.wait_for_log("outcome=failed", 1).await;

    let env = Env::new(
        &["conformance"],
        &format!("{GRANTED}[plugins.conformance.limits]\ntimeout_ms = 1000\n"),
    );
    let client = env.start_answering(&[], walked_away).await;
    let result = client
        .call("test_elicitation", json!({"message": "Still there?"}))
        .await;
    // The wait ends at the deadline; the plugin is stopped there too.
    let code = structured(&result)["code"].clone();
    assert!(code == "plugin_timeout" || code == "failed", "{result:?}");
}

/// MCP 2026-07-28 has no server-to-client requests: the call answers
/// `input_required`, the client calls again with the answer (rmcp's client
/// does this by itself), and the plugin, waiting all along, goes on.
#[tokio::test]
async fn a_2026_client_is_asked_in_rounds() {
    let env = Env::new(&["conformance"], GRANTED);
    let host = env.start_http(&[]).await;
    let current = ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let client = host
        .connect_answering(current.clone(), None, accepting())
        .await;
    questions_are_answered(&client).await;

    // A client that did not declare what a tool asks is not asked; the
    // tool, unable to do without it, gets MCP's missing-capability error
    // naming it (a 2025 session gets the plugin's `unsupported` instead).
    let unable = host.connect(current, None).await;
    for (tool, needed) in [
        ("test_elicitation", json!({"elicitation": {}})),
        ("test_missing_capability", json!({"sampling": {}})),
    ] {
        let error = unable
            .service
            .peer()
            .call_tool_once(
                rmcp::model::CallToolRequestParams::new(tool)
                    .with_arguments(json!({"message": "?"}).as_object().unwrap().clone()),
            )
            .await
            .unwrap_err();
        let rmcp::service::ServiceError::McpError(error) = error else {
            panic!("{error:?}")
        };
        assert_eq!(
            error.code,
            rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "{tool}"
        );
        assert_eq!(
            error.data.unwrap()["requiredCapabilities"],
            needed,
            "{tool}"
        );
    }

    // Answers sent with the first call answer the questions of their names
    // at once: no round.
    let mut given = rmcp::model::InputResponses::new();
    given.insert(
        "user_name".into(),
        json!({"action": "accept", "content": {"name": "Ada"}}),
    );
    let done = client
        .service
        .peer()
        .call_tool_once(
            rmcp::model::CallToolRequestParams::new("test_input_required_result_elicitation")
                .with_input_responses(given),
        )
        .await
        .unwrap();
    let rmcp::model::CallToolResponse::Complete(done) = done else {
        panic!("a complete result, not {done:?}")
    };
    assert_eq!(text(&done), r#"Hello, {"name":"Ada"}"#);

    // A state nobody handed out resumes nothing.
    let forged = rmcp::model::CallToolRequestParams::new("test_elicitation")
        .with_arguments(json!({"message": "x"}).as_object().unwrap().clone())
        .with_request_state("0123456789abcdef0123456789abcdef");
    let error = client
        .service
        .peer()
        .call_tool_once(forged)
        .await
        .unwrap_err();
    assert!(
        format!("{error}").contains("names no `tools/call test_elicitation`"),
        "{error}"
    );
}

/// Listed resources, text and binary; a subscription hears of changes the
/// plugin announces until it is dropped.
async fn resources_are_listed_read_and_watched(client: &Client) {
    let peer = client.service.peer();
    let listed = peer.list_all_resources().await.unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "test://static-text",
            "test://static-binary",
            "test://watched-resource"
        ]
    );
    let read = peer
        .read_resource(ReadResourceRequestParams::new("test://static-binary"))
        .await
        .unwrap();
    match &read.contents[..] {
        [
            ResourceContents::BlobResourceContents {
                blob, mime_type, ..
            },
        ] => {
            assert_eq!(mime_type.as_deref(), Some("image/png"));
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(blob)
                .unwrap();
            assert_eq!(bytes, RED_PIXEL, "the PNG arrives byte-exact");
        }
        other => panic!("one blob, not {other:?}"),
    }

    peer.subscribe(SubscribeRequestParams::new("test://watched-resource"))
        .await
        .unwrap();
    client.call("touch_watched_resource", json!({})).await;
    let updated = client
        .wait_note(Duration::from_secs(10), |n| {
            matches!(n, Note::ResourceUpdated(_))
        })
        .await;
    let Some(Note::ResourceUpdated(updated)) = updated else {
        panic!("the subscriber hears of the change")
    };
    assert_eq!(updated.uri, "test://watched-resource");
    assert!(
        client
            .wait_note(Duration::from_secs(10), |n| matches!(
                n,
                Note::ResourceListChanged
            ))
            .await
            .is_some()
    );

    peer.unsubscribe(UnsubscribeRequestParams::new("test://watched-resource"))
        .await
        .unwrap();
    client.call("touch_watched_resource", json!({})).await;
    // Changes are told in order: by the list change, an update would have come.
    let mut seen = Vec::new();
    client
        .wait_note(Duration::from_secs(10), |n| {
            seen.push(format!("{n:?}"));
            matches!(n, Note::ResourceListChanged)
        })
        .await
        .expect("the list change still arrives");
    assert!(
        !seen.iter().any(|n| n.contains("ResourceUpdated")),
        "no update after unsubscribing: {seen:?}"
    );
}

#[tokio::test]
async fn resources_over_stdio() {
    let env = Env::new(&["conformance"], "");
    resources_are_listed_read_and_watched(&env.start().await).await;
}

#[tokio::test]
async fn resources_over_an_http_session() {
    let env = Env::new(&["conformance"], "");
    let host = env.start_http(&[]).await;
    let client = host.connect(ClientLifecycleMode::Initialize, None).await;
    resources_are_listed_read_and_watched(&client).await;
}

/// Completion, whatever the transport.
async fn arguments_are_completed(client: &Client) {
    let peer = client.service.peer();
    let complete = |name: &str, value: &str| {
        peer.complete(CompleteRequestParams::new(
            Reference::for_prompt(name),
            ArgumentInfo::new("arg1", value),
        ))
    };
    let done = complete("test_prompt_with_arguments", "par").await.unwrap();
    assert_eq!(done.completion.values, ["paris", "park", "party"]);
    assert_eq!(done.completion.has_more, Some(false));
    let error = complete("no_such_prompt", "x").await.unwrap_err();
    assert!(
        format!("{error}").contains("no prompt `no_such_prompt`"),
        "{error}"
    );
}

#[tokio::test]
async fn prompt_arguments_are_completed_over_stdio_and_http() {
    let env = Env::new(&["conformance"], "");
    arguments_are_completed(&env.start().await).await;
    let host = env.start_http(&[]).await;
    for lifecycle in [
        ClientLifecycleMode::Initialize,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        },
    ] {
        arguments_are_completed(&host.connect(lifecycle, None).await).await;
    }
}

/// A plugin whose tools change at run time says so (`notify.tools-changed`):
/// the host lists them again and the client hears of it and sees the new
/// ones.
#[tokio::test]
async fn a_plugin_that_says_its_tools_changed_is_listed_again() {
    let env = Env::new(
        &["conformance"],
        "[plugins.conformance]\ncapabilities = [\"client\", \"fs\"]\nfs.write = [\"${plugin_cache}\"]\n",
    );
    let client = env.start().await;
    let description = |tools: Vec<rmcp::model::Tool>| {
        tools
            .into_iter()
            .find(|t| t.name == "test_trigger_tool_change")
            .and_then(|t| t.description)
            .unwrap()
            .to_string()
    };
    assert_eq!(description(client.tools().await), "Changes the tool list.");
    for n in 1..=2 {
        let result = client.call("test_trigger_tool_change", json!({})).await;
        assert_eq!(text(&result), format!("tool list changed ({n} times)"));
        assert!(client.tools_changed_within(Duration::from_secs(10)).await);
        assert_eq!(
            description(client.tools().await),
            format!("Changes the tool list (changed {n} times).")
        );
    }
    // Without the grant the fixture cannot count a change, and says why.
    let env = Env::new(&["conformance"], GRANTED);
    let client = env.start().await;
    let refused = client.call("test_trigger_tool_change", json!({})).await;
    assert!(text(&refused).contains("denied"), "{refused:?}");
}
