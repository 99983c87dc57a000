//! container-use's file tools (`environment_file_*`) on an environment's
//! /workdir, which is its worktree on the host (on an engine that cannot
//! mount it, brought back from the engine first and each change sent
//! there: [`crate::engine`]).
//!
//! Every path is opened beneath a directory handle of the worktree itself,
//! and the host's WASI resolves it there (cap-std): `..`, an absolute
//! symlink or one a command swaps in halfway cannot lead out of the
//! worktree, not even into the rest of the repository. `.git` is Cofer's
//! and refused by name. Changes are committed like a command's: one at a
//! time per environment, after what background services wrote.

use plugin_sdk::containers::{self, ContainerError};
use plugin_sdk::{ToolError, ToolOutput, text_output};
use serde_json::json;

use crate::args;
use crate::env::{self, Env};
use crate::errors::{error, from_container};
use crate::setting;
use crate::turn::{self, DEFAULT_TIMEOUT_MS, Turn};
use crate::workdir::{Workdir, relative};

pub fn read(a: args::FileRead) -> Result<ToolOutput, ToolError> {
    let (_, workdir) = open_env(&a.common, &a.environment_id)?;
    let path = relative(&a.target_file)?;
    let bytes = workdir.read(&path, &a.target_file)?;
    let text = String::from_utf8_lossy(&bytes);
    if a.should_read_entire_file {
        return Ok(text_output(text));
    }
    if a.start_line_one_indexed_inclusive.is_none() && a.end_line_one_indexed_inclusive.is_none() {
        return Ok(text_output(first_lines(&text, &a.target_file)));
    }
    let lines: Vec<&str> = text.lines().collect();
    let start = a.start_line_one_indexed_inclusive.unwrap_or(1);
    let end = a
        .end_line_one_indexed_inclusive
        .unwrap_or(lines.len())
        .min(lines.len());
    if start > lines.len().max(1) || end < start {
        return Err(error(
            "invalid_request",
            format!(
                "lines {start} to {end} are not in `{}`, which has {} lines",
                a.target_file,
                lines.len()
            ),
            "give start_line_one_indexed_inclusive <= end_line_one_indexed_inclusive within the file, or should_read_entire_file=true",
        ));
    }
    Ok(text_output(lines[start - 1..end].join("\n")))
}

/// What a read without a range shows of a file: clients show a model
/// about 20 KB of an answer whole.
const DEFAULT_READ_BYTES: usize = plugin_sdk::text::ANSWER_BYTES;

/// `text` whole when short; else its first lines within
/// [`DEFAULT_READ_BYTES`] and how to read the rest.
fn first_lines(text: &str, file: &str) -> String {
    if text.len() <= DEFAULT_READ_BYTES {
        return text.to_string();
    }
    let total = text.lines().count();
    let mut end = 0;
    let mut shown = 0;
    for line in text.split_inclusive('\n') {
        if end + line.len() > DEFAULT_READ_BYTES {
            break;
        }
        end += line.len();
        shown += 1;
    }
    if shown == 0 {
        // One line longer than the budget: its start, on a character.
        end = DEFAULT_READ_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
    }
    let mut out = text[..end].to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    let shown = match shown {
        0 => format!("the start of line 1 (longer than {DEFAULT_READ_BYTES} bytes) shown"),
        n => format!(
            "lines 1-{n} shown. Read on with start_line_one_indexed_inclusive={} (and \
             end_line_one_indexed_inclusive)",
            n + 1
        ),
    };
    out.push_str(&format!(
        "[{file}: {} bytes in {total} lines; {shown}, or the whole file with \
         should_read_entire_file=true]\n",
        text.len()
    ));
    out
}

pub fn list(a: args::FileList) -> Result<ToolOutput, ToolError> {
    let (_, workdir) = open_env(&a.common, &a.environment_id)?;
    let path = relative(&a.path)?;
    let mut names = workdir.list(&path, &a.path)?;
    names.sort();
    Ok(text_output(first_names(&names, &a.path)))
}

/// `names` one a line, as many as fit in [`DEFAULT_READ_BYTES`], saying
/// how many more there are.
fn first_names(names: &[String], dir: &str) -> String {
    let mut out = String::new();
    for (shown, name) in names.iter().enumerate() {
        if out.len() + name.len() + 1 > DEFAULT_READ_BYTES {
            return format!(
                "{out}\n[{dir}: {} entries, the first {shown} shown: list a subdirectory, or use \
                 environment_run_cmd (ls, find) to see the rest]",
                names.len()
            );
        }
        if shown > 0 {
            out.push('\n');
        }
        out.push_str(name);
    }
    out
}

pub fn write(a: args::FileWrite) -> Result<ToolOutput, ToolError> {
    let (env, workdir) = open_env(&a.common, &a.environment_id)?;
    let path = relative(&a.target_file)?;
    let message = a.common.message_or(format!("Write {}", a.target_file));
    change(&env, &message, &a.target_file, "written", || {
        workdir.write(&path, a.contents.as_bytes(), &a.target_file)?;
        send_change(&env, &path)
    })
}

pub fn edit(a: args::FileEdit) -> Result<ToolOutput, ToolError> {
    let (env, workdir) = open_env(&a.common, &a.environment_id)?;
    let path = relative(&a.target_file)?;
    let message = a.common.message_or(format!("Edit {}", a.target_file));
    change(&env, &message, &a.target_file, "edited", || {
        let bytes = workdir.read(&path, &a.target_file)?;
        let Ok(contents) = String::from_utf8(bytes) else {
            return Err(error(
                "invalid_request",
                format!("`{}` is not UTF-8 text", a.target_file),
                "edit binary files with environment_run_cmd",
            ));
        };
        let edited = replace_match(
            &contents,
            &a.target_file,
            &a.search_text,
            &a.replace_text,
            a.which_match.as_deref(),
        )?;
        workdir.write(&path, edited.as_bytes(), &a.target_file)?;
        send_change(&env, &path)
    })
}

pub fn delete(a: args::FileDelete) -> Result<ToolOutput, ToolError> {
    let (env, workdir) = open_env(&a.common, &a.environment_id)?;
    let path = relative(&a.target_file)?;
    let message = a.common.message_or(format!("Delete {}", a.target_file));
    change(&env, &message, &a.target_file, "deleted", || {
        workdir.delete(&path, &a.target_file)?;
        send_change(&env, &path)
    })
}

/// Run `op` on the environment's files in a turn of its own (see
/// [`turn::turn`]) and say what became of it.
fn change(
    env: &Env,
    message: &str,
    target: &str,
    done: &str,
    op: impl FnOnce() -> Result<(), ToolError>,
) -> Result<ToolOutput, ToolError> {
    let wait_ms = setting("COHERRA_TIMEOUT_RUN", DEFAULT_TIMEOUT_MS);
    let Turn {
        background_commit: background,
        commit,
        warnings,
        ..
    } = turn::turn(env, wait_ms, message, |_| op())?;
    let mut text = match &commit {
        Some(c) => format!(
            "file {target} {done} successfully and committed to {} ({}).",
            env.remote_ref(),
            turn::short(c)
        ),
        None => {
            format!("file {target} {done}; the workdir did not change, so nothing was committed.")
        }
    };
    if let Some(c) = &background {
        text.push_str(&format!(
            "\nBefore that, what background services had written was committed on its own ({}).",
            turn::short(c)
        ));
    }
    for warning in &warnings {
        text.push_str(&format!("\nwarning: {warning}"));
    }
    Ok(ToolOutput {
        text,
        structured: Some(
            json!({ "commit": commit, "background_changes_commit": background, "warnings": warnings })
                .to_string(),
        ),
    })
}

/// The environment and a handle of its workdir.
fn open_env(common: &args::Common, id: &str) -> Result<(Env, Workdir), ToolError> {
    let (env, _) = Env::find(&common.environment_source, id)?;
    env.require_worktree()?;
    if env.copies_files {
        let wait_ms = setting("COHERRA_TIMEOUT_RUN", DEFAULT_TIMEOUT_MS);
        let _hold =
            plugin_sdk::git::hold_worktree(&env.repo, &env.worktree(), wait_ms).map_err(|e| {
                crate::errors::from_git("wait for the environment's previous command", e)
            })?;
        env.pull()?;
    }
    let workdir = Workdir::open(&env.worktree())?;
    Ok((env, workdir))
}

/// Replace one occurrence of `search` in `contents`: the only one, or the
/// one `which` names (container-use's match ids).
fn replace_match(
    contents: &str,
    target: &str,
    search: &str,
    replace: &str,
    which: Option<&str>,
) -> Result<String, ToolError> {
    let matches: Vec<usize> = contents.match_indices(search).map(|(i, _)| i).collect();
    let id = |n: usize| {
        format!(
            "{:08x}",
            env::fnv1a(format!("{target}:{search}:{replace}:{n}").as_bytes()) as u32
        )
    };
    let at = match (matches.as_slice(), which.filter(|w| !w.is_empty())) {
        ([], _) => {
            return Err(error(
                "not_found",
                format!("search_text was not found in `{target}`"),
                "read the file (environment_file_read) and copy the text exactly, whitespace included",
            ));
        }
        ([only], None) => *only,
        (_, None) => {
            let listed: Vec<String> = matches
                .iter()
                .enumerate()
                .map(|(n, &at)| {
                    format!(
                        "Match {} (ID: {}):\n{}",
                        n + 1,
                        id(n),
                        context(contents, at)
                    )
                })
                .collect();
            return Err(error(
                "invalid_request",
                format!(
                    "search_text occurs {} times in `{target}`:\n\n{}",
                    matches.len(),
                    listed.join("\n\n")
                ),
                "call again with which_match set to one of the IDs, or a longer search_text",
            ));
        }
        (_, Some(which)) => match (0..matches.len()).find(|&n| id(n) == which) {
            Some(n) => matches[n],
            None => {
                return Err(error(
                    "invalid_request",
                    format!("which_match `{which}` is none of the matches in `{target}`"),
                    "call without which_match to get the IDs of the matches",
                ));
            }
        },
    };
    Ok(format!(
        "{}{replace}{}",
        &contents[..at],
        &contents[at + search.len()..]
    ))
}

/// Three lines either side of the line holding byte `at`, that line marked.
fn context(contents: &str, at: usize) -> String {
    let line = contents[..at].matches('\n').count();
    contents
        .lines()
        .enumerate()
        .skip(line.saturating_sub(3))
        .take(line.min(3) + 4)
        .map(|(n, text)| format!("{}{text}", if n == line { "> " } else { "  " }))
        .collect::<Vec<_>>()
        .join("\n")
}

/// After a file tool changed `path` (relative to /workdir) in the
/// worktree: the same change in the main container (recreated, with
/// the whole worktree, if it is gone), when the engine cannot mount it.
fn send_change(env: &Env, path: &str) -> Result<(), ToolError> {
    if !env.copies_files {
        return Ok(());
    }
    let name = env.container_name();
    let sent = if std::fs::symlink_metadata(format!("{}/{path}", env.worktree())).is_ok() {
        containers::copy_in(
            &name,
            &env.worktree(),
            env::WORKDIR,
            &[path.to_string()],
            &[],
        )
    } else {
        let rm = vec![
            "rm".into(),
            "-rf".into(),
            "--".into(),
            format!("{}/{path}", env::WORKDIR),
        ];
        containers::exec(&name, &env::chore(rm)).map(drop)
    };
    match sent {
        Ok(()) => Ok(()),
        Err(ContainerError::NotFound(_)) => {
            let record = env.read_record().ok_or_else(|| env.not_found())?;
            crate::container::recreate(env, &record)
        }
        Err(e) => Err(from_container("send the change to the engine", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_match_is_replaced_and_several_ask_which() {
        assert_eq!(
            replace_match("a = 1\nb = 2\n", "f", "b = 2", "b = 3", None).unwrap(),
            "a = 1\nb = 3\n"
        );
        let text = "x = 1\ny\nx = 1\n";
        let e = replace_match(text, "f", "x = 1", "x = 2", None).unwrap_err();
        assert_eq!(e.code, "invalid_request");
        assert!(e.message.contains("occurs 2 times"), "{}", e.message);
        // The second match's id, as the error lists it.
        let id = e.message.split("(ID: ").nth(2).unwrap()[..8].to_string();
        assert_eq!(
            replace_match(text, "f", "x = 1", "x = 2", Some(&id)).unwrap(),
            "x = 1\ny\nx = 2\n"
        );
        assert_eq!(
            replace_match(text, "f", "zzz", "q", None).unwrap_err().code,
            "not_found"
        );
        assert_eq!(
            replace_match(text, "f", "x = 1", "q", Some("00000000"))
                .unwrap_err()
                .code,
            "invalid_request"
        );
    }

    #[test]
    fn context_marks_the_matching_line() {
        let text = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let at = text.find('5').unwrap();
        assert_eq!(context(text, at), "  2\n  3\n  4\n> 5\n  6\n  7\n  8");
        assert_eq!(context(text, 0), "> 1\n  2\n  3\n  4");
    }

    #[test]
    fn a_large_directory_is_listed_by_its_first_names() {
        let few: Vec<String> = ["a", "b"].map(String::from).to_vec();
        assert_eq!(first_names(&few, "."), "a\nb");
        let many: Vec<String> = (0..5000).map(|n| format!("file-{n:05}.txt")).collect();
        let listed = first_names(&many, "many");
        assert!(listed.len() <= DEFAULT_READ_BYTES + 200, "{}", listed.len());
        assert!(listed.starts_with("file-00000.txt\n"));
        assert!(listed.ends_with("to see the rest]") && listed.contains("5000 entries"));
    }

    #[test]
    fn a_long_file_is_shown_by_its_first_lines_and_says_how_to_read_on() {
        assert_eq!(first_lines("short\n", "a"), "short\n");
        let long: String = (1..=5000).map(|n| format!("line {n}\n")).collect();
        let shown = first_lines(&long, "big.txt");
        assert!(shown.len() <= DEFAULT_READ_BYTES + 300, "{}", shown.len());
        let note = shown.lines().last().unwrap();
        let last_line: usize = shown.lines().rev().nth(1).unwrap()[5..].parse().unwrap();
        assert!(note.contains("5000 lines"), "{note}");
        assert!(
            note.contains(&format!("lines 1-{last_line} shown")),
            "{note}"
        );
        assert!(note.contains(&format!(
            "start_line_one_indexed_inclusive={}",
            last_line + 1
        )));
        let one_line = "x".repeat(40_000);
        assert!(first_lines(&one_line, "min.js").contains("the start of line 1"));
    }
}
