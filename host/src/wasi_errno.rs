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

/// `text` with every `(os error N)` of a WASI errno replaced by its name.
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
        let name = after[..digits]
            .parse::<usize>()
            .ok()
            .and_then(|n| NAMES.get(n.checked_sub(1)?))
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
