//! stdin and stdout for the MCP transport.
//!
//! tokio's `stdin()`/`stdout()` hand every read and write to a blocking
//! thread: two thread hops per message, a good part of a tool call's round
//! trip. When they are pipes, as they are when an MCP client starts the
//! host, they are registered with the runtime's event loop instead. Files
//! and terminals keep tokio's blocking-thread versions.

use std::os::fd::AsFd;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

pub type Reader = Box<dyn AsyncRead + Send + Unpin>;
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

pub fn transport() -> (Reader, Writer) {
    let reader: Reader = match dup(std::io::stdin().as_fd()).and_then(pipe::Receiver::from_file) {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let writer: Writer = match dup(std::io::stdout().as_fd()).and_then(pipe::Sender::from_file) {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    };
    (reader, writer)
}

fn dup(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<std::fs::File> {
    Ok(std::fs::File::from(fd.try_clone_to_owned()?))
}
