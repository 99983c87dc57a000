//! What a confined program's refusal looks like in its output (issue 71):
//! the host runs a plugin's programs confined to its grants, and a
//! program that touches more fails with the kernel's EACCES, which every
//! runtime words its own way. A family that shows output can tell the
//! person which key would grant it.

/// The first file a program's `output` says it was refused (`Permission
/// denied`, `EACCES`, `PermissionError`), if any: its path when the line
/// names one in quotes, else an empty string.
pub fn refused_path(output: &str) -> Option<String> {
    let line = output.lines().find(|line| {
        let lower = line.to_ascii_lowercase();
        lower.contains("permission denied") || line.contains("EACCES")
    })?;
    // The quoted absolute path on that line: Python's `'/x'`, node's
    // `open '/x'`, coreutils' `cannot touch '/x'`, Rust's `"/x"`.
    let path = ['\'', '"', '`'].iter().find_map(|quote| {
        let start = line.find(&format!("{quote}/"))? + 1;
        let end = line[start..].find(*quote)? + start;
        Some(line[start..end].to_string())
    });
    Some(path.unwrap_or_default())
}

/// A sentence for the person when `output` shows a refusal: what was
/// refused and the key under `[plugins.<plugin>]` that would grant it.
pub fn refusal_hint(plugin: &str, output: &str) -> Option<String> {
    let path = refused_path(output)?;
    let what = if path.is_empty() {
        "a file".to_string()
    } else {
        format!("`{path}`")
    };
    Some(format!(
        "a program was refused {what} (Permission denied): the programs of plugin `{plugin}` write only its \
         fs.write and process.write folders and read no credential store; if it needs this, add a folder \
         holding it to `process.write` (or `process.read`) under [plugins.{plugin}] in your config, with the \
         shipped entries (`host list grants` prints them)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runtimes_refusal_names_its_path() {
        for (output, path) in [
            (
                "E   PermissionError: [Errno 13] Permission denied: '/tmp/x/out'",
                "/tmp/x/out",
            ),
            (
                "Error: EACCES: permission denied, open '/srv/out.txt'",
                "/srv/out.txt",
            ),
            (
                "touch: cannot touch '/home/u/x': Permission denied",
                "/home/u/x",
            ),
            (
                "called `Result::unwrap()` on an `Err` value: Os { code: 13, kind: PermissionDenied, message: \"Permission denied\" }",
                "",
            ),
        ] {
            assert_eq!(
                refused_path(&format!("ok\n{output}\nmore")).as_deref(),
                Some(path),
                "{output}"
            );
        }
        assert_eq!(refused_path("all 3 tests passed"), None);
        let hint = refusal_hint(
            "run_test",
            "PermissionError: [Errno 13] Permission denied: '/x'",
        )
        .unwrap();
        assert!(
            hint.contains("`/x`") && hint.contains("[plugins.run_test]"),
            "{hint}"
        );
    }
}
