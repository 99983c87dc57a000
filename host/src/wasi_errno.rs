//! Plugins see the OS through WASI, so an I/O error a plugin prints reads
//! "Operation not permitted (os error 63)": 63 is WASI's number for EPERM,
//! not the host's (1 on Linux), and misleads whoever looks it up. The host
//! names them in a plugin's error messages: `(os error 63)` → `(EPERM)`.

use std::borrow::Cow;

/// WASI's errno values (`wasi_snapshot_preview1`, as wasi-libc numbers
/// them), from 1.
const NAMES: [&str; 76] = [
    "E2BIG",
    "EACCES",
    "EADDRINUSE",
    "EADDRNOTAVAIL",
    "EAFNOSUPPORT",
    "EAGAIN",
    "EALREADY",
    "EBADF",
    "EBADMSG",
    "EBUSY",
    "ECANCELED",
    "ECHILD",
    "ECONNABORTED",
    "ECONNREFUSED",
    "ECONNRESET",
    "EDEADLK",
    "EDESTADDRREQ",
    "EDOM",
    "EDQUOT",
    "EEXIST",
    "EFAULT",
    "EFBIG",
    "EHOSTUNREACH",
    "EIDRM",
    "EILSEQ",
    "EINPROGRESS",
    "EINTR",
    "EINVAL",
    "EIO",
    "EISCONN",
    "EISDIR",
    "ELOOP",
    "EMFILE",
    "EMLINK",
    "EMSGSIZE",
    "EMULTIHOP",
    "ENAMETOOLONG",
    "ENETDOWN",
    "ENETRESET",
    "ENETUNREACH",
    "ENFILE",
    "ENOBUFS",
    "ENODEV",
    "ENOENT",
    "ENOEXEC",
    "ENOLCK",
    "ENOLINK",
    "ENOMEM",
    "ENOMSG",
    "ENOPROTOOPT",
    "ENOSPC",
    "ENOSYS",
    "ENOTCONN",
    "ENOTDIR",
    "ENOTEMPTY",
    "ENOTRECOVERABLE",
    "ENOTSOCK",
    "ENOTSUP",
    "ENOTTY",
    "ENXIO",
    "EOVERFLOW",
    "EOWNERDEAD",
    "EPERM",
    "EPIPE",
    "EPROTO",
    "EPROTONOSUPPORT",
    "EPROTOTYPE",
    "ERANGE",
    "EROFS",
    "ESPIPE",
    "ESRCH",
    "ESTALE",
    "ETIMEDOUT",
    "ETXTBSY",
    "EXDEV",
    // Not a POSIX error: WASI's own "the plugin was not granted this".
    "ENOTCAPABLE",
];

/// The descriptions both WASI's libc and the host's print, with the name
/// each stands for. A message may carry the *host's* number (a capability
/// passing a host error on: "Permission denied (os error 13)", where WASI's
/// 13 is ECONNABORTED): the words before the number decide, and only words
/// not listed here fall back to WASI's numbering (issue 54, item 20).
const SAID: [(&str, &str); 24] = [
    ("Operation not permitted", "EPERM"),
    ("No such file or directory", "ENOENT"),
    ("Permission denied", "EACCES"),
    ("File exists", "EEXIST"),
    ("Not a directory", "ENOTDIR"),
    ("Is a directory", "EISDIR"),
    ("Invalid argument", "EINVAL"),
    ("Too many open files", "EMFILE"),
    ("No space left on device", "ENOSPC"),
    ("Read-only file system", "EROFS"),
    ("Directory not empty", "ENOTEMPTY"),
    ("Broken pipe", "EPIPE"),
    ("Connection refused", "ECONNREFUSED"),
    ("Connection reset by peer", "ECONNRESET"),
    ("Connection aborted", "ECONNABORTED"),
    ("Resource temporarily unavailable", "EAGAIN"),
    ("Bad file descriptor", "EBADF"),
    ("Input/output error", "EIO"),
    ("I/O error", "EIO"),
    ("File name too long", "ENAMETOOLONG"),
    ("Too many levels of symbolic links", "ELOOP"),
    ("Symbolic link loop", "ELOOP"),
    ("Not supported", "ENOTSUP"),
    ("Capabilities insufficient", "ENOTCAPABLE"),
];

/// `text` with every `(os error N)` replaced by the error's name: the one
/// its words say ([`SAID`]), else WASI's for the number.
pub fn named(text: &str) -> Cow<'_, str> {
    const MARK: &str = "(os error ";
    if !text.contains(MARK) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        let after = &rest[at + MARK.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let before = rest[..at].trim_end();
        let by_words = SAID
            .iter()
            .find(|(words, _)| before.ends_with(words))
            .map(|(_, name)| name);
        let name = after[..digits]
            .parse::<usize>()
            .ok()
            .and_then(|n| by_words.or(NAMES.get(n.checked_sub(1)?)))
            .filter(|_| after[digits..].starts_with(')'));
        match name {
            Some(name) => {
                out.push_str(&rest[..at]);
                out.push('(');
                out.push_str(name);
                out.push(')');
                rest = &after[digits + 1..];
            }
            None => {
                out.push_str(&rest[..at + MARK.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wasi_numbers_are_named() {
        assert_eq!(
            named(
                "open a: Operation not permitted (os error 63); b: No such file or directory (os error 44)"
            ),
            "open a: Operation not permitted (EPERM); b: No such file or directory (ENOENT)"
        );
        assert_eq!(
            named("Capabilities insufficient (os error 76)"),
            "Capabilities insufficient (ENOTCAPABLE)"
        );
        // A host's number passed on: its words name it, not WASI's table.
        assert_eq!(
            named("cannot open x: Permission denied (os error 13)"),
            "cannot open x: Permission denied (EACCES)"
        );
        assert_eq!(
            named("Not a directory (os error 54)"),
            "Not a directory (ENOTDIR)"
        );
        for kept in [
            "no error here",
            "(os error 0)",
            "(os error 99)",
            "(os error 12",
            "(os error x)",
        ] {
            assert_eq!(named(kept), kept);
        }
    }
}
