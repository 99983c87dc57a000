//! Rules of the repository itself, checked so they cannot rot: the host's
//! modules import one another without going in circles (issue 38).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
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

/// The layering the host keeps (cli → transports → service → catalog →
/// runtime → caps → the call's state): no file reaches back up.
#[test]
fn the_hosts_modules_import_one_another_without_circles() {
    let src = repo().join("host/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    let graph: BTreeMap<String, BTreeSet<String>> = files
        .iter()
        .map(|file| {
            let module = module_of(&src, file);
            let text = std::fs::read_to_string(file).unwrap();
            let names = imports(&module, &text, &modules);
            (module, names)
        })
        .collect();
    assert!(
        graph["caps::content"].contains("store") && graph["catalog"].contains("runtime"),
        "the check reads imports: {graph:#?}"
    );
    if let Some(found) = circle(&graph) {
        panic!(
            "host/src imports go in a circle: {}; move what both need into the lower module",
            found.join(" → ")
        );
    }
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
