//! Rules of the repository itself, checked so they cannot rot (issues 38
//! and 60): no crate's modules import one another in a circle, no source
//! file passes 600 lines, and
//! the README, CONTRIBUTING.md and the book link only to what exists and
//! say of each shell block whether a test runs it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file under `dir` whose name ends in `.ext`, recursively.
fn files_ending(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_ending(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// The module a file under `src` defines: `caps::content` for
/// `caps/content.rs` and for `caps/content/mod.rs`, `crate` for lib.rs.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    match parts.as_slice() {
        [only] if only == "lib" || only == "main" => "crate".into(),
        _ => parts.join("::"),
    }
}

/// The modules `module` names in code (`crate::a::b::Item`, `super::x`),
/// each resolved to the longest module that exists; comments, the
/// module's own tests and its own submodules (which it declares) left out.
fn imports(module: &str, text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let code: String = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    for prefix in ["crate::", "super::"] {
        for (at, _) in code.match_indices(prefix) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = code[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // `super::` starts from the parent, each further `super` one up.
            let mut parts: Vec<&str> = match prefix {
                "super::" => module.split("::").filter(|m| *m != "crate").collect(),
                _ => Vec::new(),
            };
            let mut rest = path.split("::").filter(|p| !p.is_empty()).peekable();
            if prefix == "super::" {
                parts.pop();
                while rest.next_if_eq(&"super").is_some() {
                    parts.pop();
                }
            }
            parts.extend(rest);
            while !parts.is_empty() {
                let candidate = parts.join("::");
                if modules.contains(&candidate) {
                    let own = candidate == module || candidate.starts_with(&format!("{module}::"));
                    if !own {
                        found.insert(candidate);
                    }
                    break;
                }
                parts.pop();
            }
        }
    }
    found
}

/// A circle in `graph`, as the modules along it, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The source folder of every crate of the workspace (the host, its
/// crates, the plugins, the SDK, the test plugins and the example), from
/// the `Cargo.toml` files beside a `src`.
fn crate_sources() -> Vec<PathBuf> {
    let mut manifests = Vec::new();
    for dir in ["host", "plugins", "tests/plugins", "examples"] {
        files_ending(&repo().join(dir), "toml", &mut manifests);
    }
    let mut sources: Vec<PathBuf> = manifests
        .iter()
        .filter(|m| m.file_name().is_some_and(|n| n == "Cargo.toml"))
        .map(|m| m.parent().unwrap().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    sources.sort();
    sources
}

/// Which modules each module of the crate at `src` imports. What a
/// submodule imports from outside its parent, the parent imports too
/// (`results::jest` using `excerpt` puts `results` above `excerpt`), so a
/// circle through a submodule is found.
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    files_ending(src, "rs", &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(src, file);
        let text = std::fs::read_to_string(file).unwrap();
        let names = imports(&module, &text, &modules);
        let mut parts: Vec<&str> = module.split("::").collect();
        while !parts.is_empty() {
            let at = parts.join("::");
            let outside = names
                .iter()
                .filter(|n| *n != &at && !n.starts_with(&format!("{at}::")));
            graph
                .entry(at.clone())
                .or_default()
                .extend(outside.cloned());
            parts.pop();
        }
    }
    graph
}

/// Every crate keeps a layering (the host's: cli → transports → service
/// → catalog → runtime → caps → the call's state; a plugin's: its tool
/// table → operations → what they share → records and names): no file
/// reaches back up, so a newcomer can read a crate from the bottom.
#[test]
fn no_crates_modules_import_one_another_in_a_circle() {
    let sources = crate_sources();
    assert!(
        sources.len() >= 12
            && sources.contains(&repo().join("plugins/cofer/src"))
            && sources.contains(&repo().join("host/hostgit/src")),
        "every crate is found: {sources:#?}"
    );
    let host = import_graph(&repo().join("host/src"));
    assert!(
        host["caps::content"].contains("store") && host["catalog"].contains("runtime"),
        "the check reads imports: {host:#?}"
    );
    let circles: Vec<String> = sources
        .iter()
        .filter_map(|src| {
            let found = circle(&import_graph(src))?;
            Some(format!("{}: {}", src.display(), found.join(" → ")))
        })
        .collect();
    assert!(
        circles.is_empty(),
        "imports go in a circle; move what both need into the lower module: {circles:#?}"
    );
}

/// A source file stays one subject a reader can hold (issues 38 and 60:
/// at most 600 lines in any crate; split along a seam past that).
#[test]
fn no_source_file_grows_past_600_lines() {
    let mut files = Vec::new();
    for src in crate_sources() {
        files_ending(&src, "rs", &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, lines)| *lines > 600)
        .map(|(f, lines)| format!("{} ({lines} lines)", f.display()))
        .collect();
    assert!(long.is_empty(), "split these along their seams: {long:#?}");
}

#[test]
fn a_circle_through_a_submodule_is_found() {
    let src = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = src.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod excerpt;\nmod results;\n");
    write("excerpt.rs", "use crate::results::Counts;\n");
    write("results/mod.rs", "pub struct Counts;\nmod jest;\n");
    write("results/jest.rs", "use crate::excerpt::strip_ansi;\n");
    let found = circle(&import_graph(src.path())).expect("a circle");
    assert_eq!(found, ["excerpt", "results", "excerpt"]);
}

#[test]
fn a_circle_is_found() {
    let modules: BTreeSet<String> = ["a", "b", "b::c", "d"].map(String::from).into();
    let a = imports(
        "a",
        "use crate::b::c::Thing;\n// crate::d in a comment",
        &modules,
    );
    let c = imports(
        "b::c",
        "use super::super::a;\nfn f() { crate::a::g() }",
        &modules,
    );
    assert_eq!(a, BTreeSet::from(["b::c".to_string()]));
    assert_eq!(c, BTreeSet::from(["a".to_string()]));
    let graph = BTreeMap::from([
        ("a".to_string(), a),
        ("b::c".to_string(), c),
        ("d".to_string(), BTreeSet::new()),
    ]);
    assert_eq!(circle(&graph).unwrap(), ["a", "b::c", "a"]);
}

/// The Markdown a reader meets: the README, CONTRIBUTING.md and every
/// chapter of the book.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md"), repo().join("CONTRIBUTING.md")];
    files_ending(&repo().join("docs/src"), "md", &mut files);
    files
}

/// The text outside fenced code blocks, and the blocks as (info string,
/// body).
fn split_fences(text: &str) -> (String, Vec<(String, String)>) {
    let (mut prose, mut blocks) = (String::new(), Vec::new());
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match (&mut open, trimmed.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_string(), String::new())),
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some((_, body)), None) => {
                body.push_str(trimmed);
                body.push('\n');
            }
            (None, None) => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    (prose, blocks)
}

/// A heading's anchor as GitHub and mdBook make it: lower case, spaces to
/// `-`, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors_of(text: &str) -> BTreeSet<String> {
    let (prose, _) = split_fences(text);
    prose
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| anchor(h.trim_start_matches('#')))
        .collect()
}

/// `[text](target)` links of the prose (inline code left out).
fn links(prose: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose.lines() {
        let outside_code: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = outside_code.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            found.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    found
}

/// Every link to a file of the repository or a heading leads somewhere;
/// every chapter is in the book's table of contents; the README stays a
/// front door.
#[test]
fn the_docs_link_only_to_what_exists() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let (prose, _) = split_fences(&text);
        for link in links(&prose) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", file.display()));
            } else if !fragment.is_empty()
                && target.extension().is_some_and(|e| e == "md")
                && !anchors_of(&std::fs::read_to_string(&target).unwrap()).contains(fragment)
            {
                broken.push(format!("{}: {link} (no such heading)", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");

    let summary = std::fs::read_to_string(repo().join("docs/src/SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let src = repo().join("docs/src");
    for file in markdown_files().iter().filter(|f| f.starts_with(&src)) {
        let relative = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        assert!(
            relative == "SUMMARY.md" || listed.contains(&relative),
            "docs/src/{relative} is not in docs/src/SUMMARY.md: the book would leave it out"
        );
    }
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        readme.lines().count() <= 200,
        "the README has {} lines: it is the front door, the rest goes to the book",
        readme.lines().count()
    );
}

/// A shell block a reader may copy is run by CI or says it is not: its
/// info string is `sh,not-run`, or `sh,run-by=FILE` where FILE holds each
/// of its commands.
#[test]
fn every_shell_block_is_run_or_marked() {
    let mut unmarked = Vec::new();
    for file in markdown_files() {
        let (_, blocks) = split_fences(&std::fs::read_to_string(&file).unwrap());
        for (info, body) in blocks {
            let mut words = info.split(',');
            let language = words.next().unwrap_or_default();
            if !matches!(language, "sh" | "bash" | "shell" | "console") {
                continue;
            }
            let marks: Vec<&str> = words.collect();
            if marks.contains(&"not-run") {
                continue;
            }
            let runner = marks.iter().find_map(|m| m.strip_prefix("run-by="));
            let ran = runner.is_some_and(|runner| {
                let script = std::fs::read_to_string(repo().join(runner)).unwrap_or_default();
                body.lines()
                    .map(|l| l.split(" #").next().unwrap().trim())
                    .filter(|l| !l.is_empty())
                    .all(|command| script.lines().any(|s| s.trim() == command))
            });
            if !ran {
                unmarked.push(format!("{}: ```{info}\n{body}", file.display()));
            }
        }
    }
    assert!(
        unmarked.is_empty(),
        "shell blocks neither run nor marked `not-run`: {unmarked:#?}"
    );
}

#[test]
fn anchors_and_links_are_read_as_github_reads_them() {
    assert_eq!(anchor(" Over HTTP"), "over-http");
    assert_eq!(
        anchor("`run_test` (plugins/run-test)"),
        "run_test-pluginsrun-test"
    );
    let (prose, blocks) = split_fences("see [a](b.md#c) and `[x](y)`\n```sh\n[z](w)\n```\n");
    assert_eq!(links(&prose), ["b.md#c"]);
    assert_eq!(blocks, [("sh".to_string(), "[z](w)\n".to_string())]);
}
