//! A mock model API on 127.0.0.1 for real CLIs: OpenAI-compatible for
//! `copilot` and `pi` (`/v1/chat/completions` streamed as server-sent
//! events, and a model list for `GET`), Anthropic's Messages API for
//! Claude Code (`/v1/messages`, streamed), Google's Gemini API for Gemini
//! CLI (`/v1beta/models/M:generateContent`, streamed or not), OpenAI's
//! Responses API for Codex (`/v1/responses`, streamed). What it answers
//! depends on its [`Script`].

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

pub const MODEL: &str = "mock-model";

#[derive(Clone)]
pub enum Script {
    /// Stream `text` as the answer; with `tool_first` = (name, arguments
    /// as JSON text), first a call of that tool, and the answer once a
    /// request carries the tool's result.
    Answer {
        text: String,
        tool_first: Option<(String, String)>,
    },
    /// Read the request and never answer.
    Hang,
    /// Refuse the key, as OpenAI's API does (HTTP 401).
    Unauthorized,
    /// Answer every chat request with HTTP `status` (`"429 Too Many
    /// Requests"`), `message` as OpenAI words its errors and, if given, a
    /// `retry-after` header of that many seconds.
    Fails {
        status: &'static str,
        message: String,
        retry_after: Option<u32>,
    },
}

pub struct MockLlm {
    pub port: u16,
    /// Every chat request body received, in order.
    pub requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockLlm {
    pub async fn start(script: Script) -> MockLlm {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (script, seen) = (script.clone(), seen.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, &script, &seen).await;
                });
            }
        });
        MockLlm {
            port,
            requests,
            task,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

/// What the model says next in a conversation.
enum Turn<'a> {
    /// Call tool `name` with `arguments` (JSON text).
    Call(&'a str, &'a str),
    Say(&'a str),
}

impl Script {
    /// The scripted tool first, the text once a request carries the tool's
    /// result (`answered`).
    fn turn(&self, answered: bool) -> Turn<'_> {
        match self {
            Script::Answer {
                tool_first: Some((name, arguments)),
                ..
            } if !answered => Turn::Call(name, arguments),
            Script::Answer { text, .. } => Turn::Say(text),
            Script::Hang | Script::Unauthorized | Script::Fails { .. } => {
                unreachable!("answered before any turn")
            }
        }
    }
}

/// A whole response: `status` line, `kind` of body, `body`.
async fn send_whole(
    stream: &mut TcpStream,
    status: &str,
    kind: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// The head of a response streamed as server-sent events.
const EVENT_STREAM: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";

/// Server-sent events each named by its JSON's `type` (Anthropic's and the
/// Responses API's way).
async fn send_typed_events(stream: &mut TcpStream, events: Vec<Value>) -> std::io::Result<()> {
    stream.write_all(EVENT_STREAM).await?;
    for event in events {
        let kind = event["type"].as_str().unwrap_or_default().to_string();
        stream
            .write_all(format!("event: {kind}\ndata: {event}\n\n").as_bytes())
            .await?;
    }
    stream.shutdown().await
}

async fn serve(
    stream: TcpStream,
    script: &Script,
    seen: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).await?;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).await?;
    let mut stream = reader.into_inner();
    if request_line.starts_with("GET") {
        let models = json!({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "mock"}]});
        return send_whole(
            &mut stream,
            "200 OK",
            "application/json",
            &models.to_string(),
        )
        .await;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if request_line.contains("/v1/messages") {
        return anthropic(stream, &request_line, request, script, seen).await;
    }
    if request_line.contains("/v1beta/models/") {
        return gemini(stream, &request_line, request, script, seen).await;
    }
    if request_line.contains("/v1/responses") {
        return responses(stream, request, script, seen).await;
    }
    let has_tool_result = request["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    seen.lock().unwrap().push(request);
    let events: Vec<Value> = match script {
        Script::Unauthorized => {
            let error = json!({"error": {"message": "Incorrect API key provided: sk-mock***",
                "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}});
            return send_whole(
                &mut stream,
                "401 Unauthorized",
                "application/json",
                &error.to_string(),
            )
            .await;
        }
        Script::Fails {
            status,
            message,
            retry_after,
        } => {
            let error = json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}});
            let body = error.to_string();
            let extra = retry_after.map_or(String::new(), |s| format!("retry-after: {s}\r\n"));
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            return stream.shutdown().await;
        }
        Script::Hang => {
            // Hold the connection open until the client gives up.
            let mut sink = [0u8; 1024];
            while stream.read(&mut sink).await? > 0 {}
            return Ok(());
        }
        Script::Answer { .. } => match script.turn(has_tool_result) {
            Turn::Say(text) => text_events(text),
            Turn::Call(name, arguments) => vec![
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "index": 0, "id": "call_mock_1", "type": "function",
                    "function": {"name": name, "arguments": arguments}}]}),
                json!({"finish_reason": "tool_calls"}),
            ],
        },
    };
    stream.write_all(EVENT_STREAM).await?;
    for event in events {
        let (delta, finish) = match event.get("finish_reason") {
            Some(reason) => (json!({}), reason.clone()),
            None => (event, Value::Null),
        };
        let chunk = json!({
            "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        stream
            .write_all(format!("data: {chunk}\n\n").as_bytes())
            .await?;
    }
    let usage = json!({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": MODEL, "choices": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    });
    stream
        .write_all(format!("data: {usage}\n\ndata: [DONE]\n\n").as_bytes())
        .await?;
    stream.shutdown().await
}

fn text_events(text: &str) -> Vec<Value> {
    let middle = (0..=text.len() / 2)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    let (first, second) = text.split_at(middle);
    vec![
        json!({"role": "assistant", "content": first}),
        json!({"content": second}),
        json!({"finish_reason": "stop"}),
    ]
}

/// Anthropic's Messages API, as Claude Code speaks it: token counts, and
/// messages streamed as typed events.
async fn anthropic(
    mut stream: TcpStream,
    request_line: &str,
    request: Value,
    script: &Script,
    seen: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    if request_line.contains("count_tokens") {
        let count = json!({"input_tokens": 12}).to_string();
        return send_whole(&mut stream, "200 OK", "application/json", &count).await;
    }
    let has_tool_result = request["messages"].as_array().is_some_and(|m| {
        m.iter().any(|m| {
            m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
        })
    });
    // Claude Code asks for side answers too (a title, a summary): only the
    // requests that offer tools are the conversation.
    let conversation = request["tools"].as_array().is_some_and(|t| !t.is_empty());
    if conversation {
        seen.lock().unwrap().push(request.clone());
    }
    let (block, stop) = match script.turn(!conversation || has_tool_result) {
        Turn::Call(name, arguments) => (
            vec![
                json!({"type": "content_block_start", "index": 0, "content_block":
                    {"type": "tool_use", "id": "toolu_mock_1", "name": name, "input": {}}}),
                json!({"type": "content_block_delta", "index": 0, "delta":
                    {"type": "input_json_delta", "partial_json": arguments}}),
            ],
            "tool_use",
        ),
        Turn::Say(text) => (
            vec![
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ],
            "end_turn",
        ),
    };
    let mut events = vec![json!({"type": "message_start", "message": {
        "id": "msg_mock", "type": "message", "role": "assistant", "model": request["model"],
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 1}}})];
    events.extend(block);
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": 5}}),
    );
    events.push(json!({"type": "message_stop"}));
    send_typed_events(&mut stream, events).await
}

/// Google's Gemini API, as Gemini CLI speaks it: a turn streamed as
/// server-sent events, or answered whole (its model router's questions).
async fn gemini(
    mut stream: TcpStream,
    request_line: &str,
    request: Value,
    script: &Script,
    seen: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    let has_response = request["contents"].as_array().is_some_and(|c| {
        c.iter().any(|c| {
            c["parts"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p.get("functionResponse").is_some()))
        })
    });
    // Only the requests that offer tools are the conversation.
    let conversation = request["tools"].as_array().is_some_and(|t| !t.is_empty());
    if conversation {
        seen.lock().unwrap().push(request.clone());
    }
    let part = match script.turn(!conversation || has_response) {
        Turn::Call(name, arguments) => {
            let args: Value = serde_json::from_str(arguments).unwrap_or(json!({}));
            json!({"functionCall": {"name": name, "args": args}})
        }
        Turn::Say(text) => json!({"text": text}),
    };
    let chunk = json!({
        "candidates": [{"content": {"parts": [part], "role": "model"}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17},
    });
    let (kind, body) = if request_line.contains(":streamGenerateContent") {
        ("text/event-stream", format!("data: {chunk}\r\n\r\n"))
    } else {
        ("application/json", chunk.to_string())
    };
    send_whole(&mut stream, "200 OK", kind, &body).await
}

/// OpenAI's Responses API, as Codex speaks it: the turn's output items
/// streamed as typed events. A scripted tool named `namespace/name` is
/// called in that namespace (Codex puts an MCP server's tools in one).
async fn responses(
    mut stream: TcpStream,
    request: Value,
    script: &Script,
    seen: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    let has_output = request["input"]
        .as_array()
        .is_some_and(|items| items.iter().any(|i| i["type"] == "function_call_output"));
    seen.lock().unwrap().push(request.clone());
    let mut events = vec![json!({"type": "response.created",
        "response": {"id": "resp_mock", "object": "response", "status": "in_progress", "output": []}})];
    let item = match script.turn(has_output) {
        Turn::Call(tool, arguments) => {
            let (namespace, name) = tool.rsplit_once('/').unwrap_or(("", tool));
            let mut item = json!({"type": "function_call", "id": "fc_mock", "call_id": "call_mock_1",
                "name": name, "arguments": arguments, "status": "completed"});
            if !namespace.is_empty() {
                item["namespace"] = json!(namespace);
            }
            item
        }
        Turn::Say(text) => {
            events.push(json!({"type": "response.output_item.added", "output_index": 0, "item":
                {"type": "message", "id": "msg_mock", "role": "assistant", "status": "in_progress", "content": []}}));
            events.push(
                json!({"type": "response.output_text.delta", "item_id": "msg_mock",
                "output_index": 0, "content_index": 0, "delta": text}),
            );
            json!({"type": "message", "id": "msg_mock", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]})
        }
    };
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    events.push(json!({"type": "response.completed", "response": {
        "id": "resp_mock", "object": "response", "status": "completed", "output": [item],
        "usage": {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17,
            "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}}));
    send_typed_events(&mut stream, events).await
}
