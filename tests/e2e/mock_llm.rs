//! A mock OpenAI-compatible server on 127.0.0.1 for the real `copilot` and
//! `pi` CLIs: `/v1/chat/completions` streamed as server-sent events, and a
//! model list for `GET`. What it answers depends on its [`Script`].

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
        let models = json!({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "mock"}]}).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            models.len()
        );
        stream.write_all(head.as_bytes()).await?;
        return stream.write_all(models.as_bytes()).await;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let has_tool_result = request["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    seen.lock().unwrap().push(request);
    let events: Vec<Value> = match script {
        Script::Unauthorized => {
            let error = json!({"error": {"message": "Incorrect API key provided: sk-mock***",
                "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})
            .to_string();
            let head = format!(
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                error.len()
            );
            stream.write_all(head.as_bytes()).await?;
            return stream.write_all(error.as_bytes()).await;
        }
        Script::Hang => {
            // Hold the connection open until the client gives up.
            let mut sink = [0u8; 1024];
            while stream.read(&mut sink).await? > 0 {}
            return Ok(());
        }
        Script::Answer {
            text,
            tool_first: None,
        } => text_events(text),
        Script::Answer { text, .. } if has_tool_result => text_events(text),
        Script::Answer {
            tool_first: Some((name, arguments)),
            ..
        } => vec![
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "index": 0, "id": "call_mock_1", "type": "function",
                "function": {"name": name, "arguments": arguments}}]}),
            json!({"finish_reason": "tool_calls"}),
        ],
    };
    stream
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n")
        .await?;
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
