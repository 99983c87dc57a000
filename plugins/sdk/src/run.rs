//! Helpers for the `process` capability: a builder for run requests (nine
//! fields, most with an obvious default) and the streams of a result.

use crate::process::{RunRequest, RunResult, Stream};

/// Output kept in memory when a request does not say: 64 KiB.
const DEFAULT_TAIL_BYTES: u64 = 64 * 1024;

impl RunRequest {
    /// Run `program` in `cwd` with no arguments, no stdin, nothing but the
    /// policy's environment, 64 KiB of tail and no log file, until the
    /// call's own deadline (the host clamps every timeout to it).
    pub fn new(program: impl Into<String>, cwd: impl Into<String>) -> RunRequest {
        RunRequest {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.into(),
            env: Vec::new(),
            stdin: None,
            timeout_ms: u64::MAX,
            no_output_timeout_ms: None,
            tail_bytes: DEFAULT_TAIL_BYTES,
            log_path: None,
        }
    }

    pub fn args<I, S>(mut self, args: I) -> RunRequest
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Variables on top of those the policy passes through.
    pub fn env(mut self, env: Vec<(String, String)>) -> RunRequest {
        self.env = env;
        self
    }

    /// Bytes written to stdin, which is then closed.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> RunRequest {
        self.stdin = Some(bytes.into());
        self
    }

    /// Kill the tree this long after it started.
    pub fn timeout_ms(mut self, ms: u64) -> RunRequest {
        self.timeout_ms = ms;
        self
    }

    /// Kill the tree after this long without output.
    pub fn no_output_timeout_ms(mut self, ms: u64) -> RunRequest {
        self.no_output_timeout_ms = Some(ms);
        self
    }

    /// How much of the end of the output to return.
    pub fn tail_bytes(mut self, bytes: u64) -> RunRequest {
        self.tail_bytes = bytes;
        self
    }

    /// Stream the whole output to this file as well.
    pub fn log_path(mut self, path: impl Into<String>) -> RunRequest {
        self.log_path = Some(path.into());
        self
    }
}

impl RunResult {
    /// What the tail holds of stdout and of stderr, each in order.
    pub fn streams(&self) -> (String, String) {
        let (mut out, mut err) = (String::new(), String::new());
        for chunk in &self.tail {
            match chunk.stream {
                Stream::Stdout => out.push_str(&chunk.text),
                Stream::Stderr => err.push_str(&chunk.text),
            }
        }
        (out, err)
    }
}
