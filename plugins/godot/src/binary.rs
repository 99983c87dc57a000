//! The class reference an engine binary carries. Godot's editor (and
//! Debian's `godot3-server`) embed the whole reference, every description
//! included, as one zlib stream of concatenated class XML documents
//! (`doc_data_compressed`); `--doctool` writes only a skeleton without
//! descriptions. So the plugin reads the binary (through the host, as a
//! program it may run), finds the stream by its header and its first
//! bytes, and inflates it. The binary is hostile input: every read, the
//! inflated size and each class document are bounded.

use std::io::Read;

use plugin_sdk::process;

/// Bytes asked of the host per read.
const CHUNK: u64 = 16 << 20;
/// The largest binary scanned (Godot editors are 60-150 MB).
const MAX_BINARY: u64 = 512 << 20;
/// The most XML inflated (Godot 4.6's reference is about 12 MB).
const MAX_XML: u64 = 128 << 20;
/// The most classes taken, and the largest class document.
const MAX_CLASSES: usize = 5_000;
const MAX_CLASS_BYTES: usize = 4 << 20;

/// One class document: its name and XML.
pub struct ClassXml {
    pub name: String,
    pub xml: String,
}

/// The program's bytes from an offset on, read through the host.
struct ProgramBytes<'a> {
    program: &'a str,
    offset: u64,
}

impl Read for ProgramBytes<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = (buf.len() as u64).min(1 << 20);
        let bytes = process::read_program(self.program, self.offset, want)
            .map_err(|e| std::io::Error::other(plugin_sdk::ToolError::from(e).message))?;
        buf[..bytes.len()].copy_from_slice(&bytes);
        self.offset += bytes.len() as u64;
        Ok(bytes.len())
    }
}

/// The class reference in `program`'s binary, if it carries one.
pub fn reference(program: &str) -> Result<Option<Vec<ClassXml>>, String> {
    let mut offset = 0u64;
    while offset < MAX_BINARY {
        let chunk = process::read_program(program, offset, CHUNK)
            .map_err(|e| plugin_sdk::ToolError::from(e).message)?;
        if chunk.len() < 2 {
            return Ok(None);
        }
        for at in zlib_headers(&chunk) {
            let start = offset + at as u64;
            if starts_as_reference(program, &chunk[at..], start) {
                return inflate(program, start).map(|xml| Some(split(&xml)));
            }
        }
        // The last byte again: a header may straddle two chunks.
        offset += chunk.len() as u64 - 1;
    }
    Ok(None)
}

/// Where a zlib stream could start in `bytes`: deflate with a 32 KiB
/// window (0x78) and a valid check of the two header bytes.
fn zlib_headers(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes.windows(2).enumerate().filter_map(|(at, pair)| {
        (pair[0] == 0x78 && (u16::from(pair[0]) << 8 | u16::from(pair[1])) % 31 == 0).then_some(at)
    })
}

/// Whether the stream at `start` inflates to a class document.
fn starts_as_reference(program: &str, here: &[u8], start: u64) -> bool {
    let mut head = [0u8; 64];
    let read = if here.len() >= 4096 {
        read_full(flate2::read::ZlibDecoder::new(&here[..4096]), &mut head)
    } else {
        let near_end = ProgramBytes {
            program,
            offset: start,
        };
        read_full(
            flate2::read::ZlibDecoder::new(near_end.take(4096)),
            &mut head,
        )
    };
    let head = &head[..read];
    head.starts_with(b"<?xml") && head.windows(7).any(|w| w == b"<class ")
}

fn read_full(mut from: impl Read, into: &mut [u8]) -> usize {
    let mut filled = 0;
    while filled < into.len() {
        match from.read(&mut into[filled..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => filled += n,
        }
    }
    filled
}

/// The whole stream at `start`, inflated, at most [`MAX_XML`] bytes.
fn inflate(program: &str, start: u64) -> Result<String, String> {
    let source = ProgramBytes {
        program,
        offset: start,
    };
    let mut xml = Vec::new();
    flate2::read::ZlibDecoder::new(source)
        .take(MAX_XML + 1)
        .read_to_end(&mut xml)
        .map_err(|e| format!("the class reference in {program} does not inflate: {e}"))?;
    if xml.len() as u64 > MAX_XML {
        return Err(format!(
            "the class reference in {program} inflates past {} MiB: not read",
            MAX_XML >> 20
        ));
    }
    Ok(String::from_utf8_lossy(&xml).into_owned())
}

/// The concatenated documents, one per class (each starts `<?xml`).
fn split(xml: &str) -> Vec<ClassXml> {
    xml.split("<?xml")
        .filter(|doc| doc.len() <= MAX_CLASS_BYTES)
        .filter_map(|doc| {
            let name = doc.split_once("<class name=\"")?.1.split_once('"')?.0;
            let plain = !name.is_empty()
                && name.len() <= 128
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_@".contains(c));
            plain.then(|| ClassXml {
                name: name.to_string(),
                xml: format!("<?xml{doc}"),
            })
        })
        .take(MAX_CLASSES)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_split_and_odd_names_left_out() {
        let xml = "<?xml version=\"1.0\" ?>\n<class name=\"Node\">a</class>\n\
                   <?xml version=\"1.0\" ?>\n<class name=\"@GDScript\">b</class>\n\
                   <?xml version=\"1.0\" ?>\n<class name=\"../../etc\">c</class>\n";
        let classes = split(xml);
        let names: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Node", "@GDScript"]);
        assert!(
            classes[0].xml.starts_with("<?xml version") && classes[0].xml.contains("a</class>")
        );
    }

    #[test]
    fn zlib_headers_are_found_by_their_check() {
        let bytes = [0u8, 0x78, 0x9c, 1, 0x78, 0x9d, 0x78, 0xda];
        assert_eq!(zlib_headers(&bytes).collect::<Vec<_>>(), [1, 6]);
    }
}
