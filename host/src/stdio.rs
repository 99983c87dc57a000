//! The MCP transport on stdin and stdout: one JSON-RPC message per line.
//!
//! Our own rather than rmcp's `AsyncRwTransport` for one reason: a request
//! the host cannot take must still be answered, or the client waits
//! forever. rmcp drops a line over its length limit, and JSON it cannot
//! parse (arguments nested past serde_json's 128 levels among it), without
//! a word. Here such a request gets a JSON-RPC error carrying its `id` when
//! one can be read (`-32600`), and `-32700` with a null id otherwise;
//! notifications, which take no answer, are only logged.
//!
//! tokio's `stdin()`/`stdout()` hand every read and write to a blocking
//! thread: two thread hops per message, a good part of a tool call's round
//! trip. When they are pipes, as they are when an MCP client starts the
//! host, they are registered with the runtime's event loop instead. Files
//! and terminals keep tokio's blocking-thread versions.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

// What may wait for a client that does not read its stdout: rmcp sends
// every response from a task of its own, so without a bound the answers of
// a client that never reads pile up in the host (3.2 GB was seen). A
// message past it is dropped, and said so on stderr.
use crate::mcp::unread::MAX_UNREAD_BYTES;

pub type Reader = Box<dyn AsyncRead + Send + Unpin>;
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// The longest request line read (rmcp's limit, and its HTTP client's).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Of a line over the limit, the beginning kept to find its `id` in.
const KEPT_HEAD: usize = 64 * 1024;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

pub struct Stdio {
    read: BufReader<Reader>,
    /// The line being read; kept across a cancelled `receive` (rmcp polls
    /// it inside a `select!`) so no part of a request is lost.
    line: Vec<u8>,
    /// Bytes of the current line beyond `line`, when it is over the limit.
    dropped: usize,
    write: Arc<Mutex<Writer>>,
    /// Bytes serialised and waiting for the client to read them.
    unread: Arc<AtomicUsize>,
    /// Cancelled when stdin ends: the client is gone, and so must its
    /// calls be (rmcp would wait for them before it reports the end).
    closed: CancellationToken,
}

impl Stdio {
    pub fn new() -> Stdio {
        let (reader, writer) = crate::platform::std_streams();
        Stdio {
            read: BufReader::new(reader),
            line: Vec::new(),
            dropped: 0,
            write: Arc::new(Mutex::new(writer)),
            unread: Arc::default(),
            closed: CancellationToken::new(),
        }
    }

    /// Cancelled once stdin has ended.
    pub fn closed(&self) -> CancellationToken {
        self.closed.clone()
    }

    /// Read up to the end of the current line; `false` at the end of input.
    /// Past [`MAX_LINE_BYTES`] only the head is kept and the rest counted.
    async fn read_line(&mut self) -> std::io::Result<bool> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(false);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let body = &available[..newline.unwrap_or(take)];
            if self.dropped == 0 && self.line.len() + body.len() <= MAX_LINE_BYTES {
                self.line.extend_from_slice(body);
            } else {
                let room = KEPT_HEAD.saturating_sub(self.line.len()).min(body.len());
                self.line.extend_from_slice(&body[..room]);
                // What was kept past the head counts as dropped too: the
                // size said is the request's own.
                let cut = self.line.len().saturating_sub(KEPT_HEAD);
                self.line.truncate(self.line.len() - cut);
                self.dropped += cut + body.len() - room;
            }
            self.read.consume(take);
            if newline.is_some() {
                return Ok(true);
            }
        }
    }
}

impl Default for Stdio {
    fn default() -> Self {
        Stdio::new()
    }
}

impl Transport<RoleServer> for Stdio {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        let unread = self.unread.clone();
        async move {
            let mut bytes = serde_json::to_vec(&item)?;
            drop(item);
            bytes.push(b'\n');
            let waiting = unread.fetch_add(bytes.len(), Ordering::AcqRel) + bytes.len();
            let _counted = Uncount(&unread, bytes.len());
            if waiting > MAX_UNREAD_BYTES {
                tracing::error!(
                    bytes = bytes.len(),
                    waiting,
                    "the client has not read {} MiB of answers: this message is dropped",
                    MAX_UNREAD_BYTES >> 20
                );
                return Ok(());
            }
            let mut write = write.lock().await;
            write.write_all(&bytes).await?;
            write.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(true) => {}
                Ok(false) => {
                    self.closed.cancel();
                    return None;
                }
                Err(e) => {
                    tracing::error!("cannot read stdin: {e}");
                    self.closed.cancel();
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let dropped = std::mem::take(&mut self.dropped);
            let text = trim(&line);
            if dropped > 0 {
                let why = format!(
                    "the request is {} bytes; the host reads requests of at most {MAX_LINE_BYTES} bytes: send less (e.g. a path instead of file contents)",
                    line.len() + dropped
                );
                refuse(&self.write, text, why).await;
                continue;
            }
            if text.is_empty() {
                continue;
            }
            match serde_json::from_slice(text) {
                Ok(message) => {
                    self.line = line;
                    self.line.clear();
                    return Some(message);
                }
                Err(e) => {
                    let why = if e.to_string().contains("recursion limit") {
                        "the request is nested more than 128 levels deep: flatten its arguments"
                            .to_string()
                    } else {
                        format!("the request is not a JSON-RPC message: {e}")
                    };
                    refuse(&self.write, text, why).await;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.flush().await
    }
}

/// Answer a request the host could not take, unless it is a notification.
/// Takes a message's bytes off the unread count however its send ends.
struct Uncount<'a>(&'a AtomicUsize, usize);

impl Drop for Uncount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::AcqRel);
    }
}

async fn refuse(write: &Mutex<Writer>, head: &[u8], why: String) {
    let id = top_level_id(head);
    if id.is_none() && looks_like_notification(head) {
        tracing::warn!("dropped a notification: {why}");
        return;
    }
    let code = if id.is_some() {
        INVALID_REQUEST
    } else {
        PARSE_ERROR
    };
    tracing::warn!(code, ?id, "refused a request: {why}");
    let answer = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": why}});
    let mut bytes = answer.to_string().into_bytes();
    bytes.push(b'\n');
    let mut write = write.lock().await;
    let _ = write.write_all(&bytes).await;
    let _ = write.flush().await;
}

/// The line without its `\r` and surrounding blanks (and a UTF-8 BOM).
fn trim(line: &[u8]) -> &[u8] {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    line.trim_ascii()
}

/// The `id` member of the top-level object, found without parsing the
/// whole (too big, too deep) text: only depth and strings are tracked.
pub(crate) fn top_level_id(text: &[u8]) -> Option<Value> {
    if text.first() != Some(&b'{') {
        return None;
    }
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let start = i;
                i = string_end(text, i)?;
                if depth == 1 && &text[start..i] == b"\"id\"" {
                    let rest = text[i..].trim_ascii_start().strip_prefix(b":")?;
                    return match serde_json::Deserializer::from_slice(rest)
                        .into_iter::<Value>()
                        .next()
                    {
                        Some(Ok(id @ (Value::Number(_) | Value::String(_)))) => Some(id),
                        _ => None,
                    };
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Index just past the string starting at `text[start]` (a `"`).
fn string_end(text: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// A message with a `method` near its start and no `id` at all.
pub(crate) fn looks_like_notification(text: &[u8]) -> bool {
    let has = |needle: &[u8]| text.windows(needle.len()).any(|w| w == needle);
    has(b"\"method\"") && !has(b"\"id\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_an_unparsable_request_is_found() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"a":{}1{}}},"id":7}}"#,
            "[".repeat(300),
            "]".repeat(300)
        );
        assert_eq!(top_level_id(deep.as_bytes()), Some(json!(7)));
        let quoted = r#"{"params":{"id":1,"s":"\"id\":2"},"id":"abc"}"#;
        assert_eq!(top_level_id(quoted.as_bytes()), Some(json!("abc")));
        assert_eq!(top_level_id(br#"{"method":"x","params":{"id":3}}"#), None);
        assert_eq!(top_level_id(b"not json"), None);
        assert!(looks_like_notification(br#"{"method":"notifications/x"}"#));
    }
}
