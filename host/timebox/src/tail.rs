//! A bounded buffer of the most recent output, both streams interleaved in
//! arrival order. Memory stays at `cap` bytes however much is written.

use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

#[derive(Debug)]
pub struct Tail {
    chunks: VecDeque<(Stream, Vec<u8>)>,
    len: usize,
    cap: usize,
    truncated: bool,
}

impl Tail {
    pub fn new(cap: usize) -> Self {
        Tail {
            chunks: VecDeque::new(),
            len: 0,
            cap,
            truncated: false,
        }
    }

    pub fn push(&mut self, stream: Stream, data: &[u8]) {
        let data = if data.len() > self.cap {
            self.truncated = true;
            &data[data.len() - self.cap..]
        } else {
            data
        };
        match self.chunks.back_mut() {
            Some((s, last)) if *s == stream => last.extend_from_slice(data),
            _ => self.chunks.push_back((stream, data.to_vec())),
        }
        self.len += data.len();
        while self.len > self.cap {
            let excess = self.len - self.cap;
            let (_, front) = self.chunks.front_mut().expect("len > 0 means a chunk");
            if front.len() <= excess {
                self.len -= front.len();
                self.chunks.pop_front();
            } else {
                front.drain(..excess);
                self.len -= excess;
            }
            self.truncated = true;
        }
    }

    /// Whether output was dropped to stay within the cap.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The kept output as text chunks (invalid UTF-8 replaced).
    pub fn chunks(&self) -> Vec<(Stream, String)> {
        self.chunks
            .iter()
            .map(|(s, d)| (*s, String::from_utf8_lossy(d).into_owned()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_last_bytes_in_order_across_streams() {
        let mut t = Tail::new(10);
        t.push(Stream::Stdout, b"abcdef");
        t.push(Stream::Stderr, b"ghij");
        t.push(Stream::Stdout, b"kl");
        assert_eq!(t.len, 10);
        assert!(t.truncated());
        let got: Vec<_> = t.chunks();
        assert_eq!(
            got,
            vec![
                (Stream::Stdout, "cdef".into()),
                (Stream::Stderr, "ghij".into()),
                (Stream::Stdout, "kl".into())
            ]
        );
    }

    #[test]
    fn a_chunk_bigger_than_the_cap_keeps_its_end() {
        let mut t = Tail::new(4);
        t.push(Stream::Stdout, b"0123456789");
        assert_eq!(t.chunks(), vec![(Stream::Stdout, "6789".into())]);
        assert!(t.len <= t.cap);
    }

    #[test]
    fn merges_adjacent_chunks_of_one_stream() {
        let mut t = Tail::new(100);
        t.push(Stream::Stderr, b"a");
        t.push(Stream::Stderr, b"b");
        assert_eq!(t.chunks(), vec![(Stream::Stderr, "ab".into())]);
        assert!(!t.truncated());
    }
}
