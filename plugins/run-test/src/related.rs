//! `scope: related`: the tests that exercise a source file, found the way
//! each runner can — jest's own `--findRelatedTests`, go's package of the
//! file, cargo's crate of the file, pytest's test files that import its
//! module (read as text, bounded: nothing of them runs) — and how they
//! were found, for the answer.

use std::path::{Path, PathBuf};

use crate::template::{Project, Runner};

/// The targets a related run takes, and how they were found.
pub struct Related {
    pub targets: Vec<String>,
    pub how: String,
}

/// The most test files read, and of each, the most bytes.
const MAX_TEST_FILES: usize = 5000;
const MAX_TEST_FILE_BYTES: u64 = 512 * 1024;
/// Folders never searched for tests.
const SKIPPED: [&str; 9] = [
    ".git",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".cache",
    "target",
    ".tox",
    "build",
];

/// The related tests of `file` (relative to `repo`, checked to be a file
/// in it); an error says why there are none or the runner cannot tell.
pub fn resolve(
    runner: Runner,
    project: Project,
    repo: &Path,
    file: &Path,
) -> Result<Related, String> {
    let shown = file.to_string_lossy().replace('\\', "/");
    match runner {
        Runner::Npm if project == Project::Jest => Ok(Related {
            targets: vec![shown.clone()],
            how: format!("jest --findRelatedTests {shown}: the tests whose imports reach it"),
        }),
        // vitest's own `related` is a command of its own, which `npm test`
        // (`vitest run`) cannot reach: the test files that import the file.
        Runner::Npm if project == Project::Vitest => {
            let (files, read) = importing_js_tests(repo, file);
            if files.is_empty() {
                return Err(format!(
                    "no test file imports {shown} (read {read} test files for an import or require of it): use scope `file` or `all`"
                ));
            }
            Ok(Related {
                how: format!("the test files that import {shown} (vitest's own `related` is a command `npm test` cannot reach)"),
                targets: files,
            })
        }
        Runner::Npm => Err(
            "related tests of an npm project are found by jest (`--findRelatedTests`) or, for vitest, by the test files that import the file; this project's `npm test` is neither: use scope `file` or `pattern`".to_string()
        ),
        Runner::Go => {
            let dir = package_dir(file);
            Ok(Related {
                how: format!("the tests of its package {dir}"),
                targets: vec![dir],
            })
        }
        Runner::Cargo => {
            let manifest = crate_manifest(repo, file)
                .ok_or_else(|| format!("no Cargo.toml holds {shown} in the repository"))?;
            let shown_manifest = manifest.to_string_lossy().replace('\\', "/");
            Ok(Related {
                how: format!("the tests of its crate ({shown_manifest})"),
                targets: vec![shown_manifest],
            })
        }
        Runner::Pytest => {
            let modules = module_names(file);
            let (files, read) = importing_tests(repo, file, &modules);
            if files.is_empty() {
                return Err(format!(
                    "no test file imports {shown} (read {read} test files for `import`/`from … import` of {}): use scope `file` or `all`",
                    modules.join(", ")
                ));
            }
            Ok(Related {
                how: format!("the test files that import {}", modules.join(" or ")),
                targets: files,
            })
        }
        Runner::Dart | Runner::Flutter => Err(format!(
            "{} cannot tell which tests exercise a file: use scope `file` with its test",
            runner.name()
        )),
    }
}

/// `./dir` of a file (`.` at the top), as go names a package to test.
fn package_dir(file: &Path) -> String {
    match file
        .parent()
        .map(|d| d.to_string_lossy().replace('\\', "/"))
    {
        Some(d) if !d.is_empty() => format!("./{d}"),
        _ => ".".into(),
    }
}

/// The nearest `Cargo.toml` above `file`, inside the repository.
fn crate_manifest(repo: &Path, file: &Path) -> Option<PathBuf> {
    let mut dir = file.parent();
    while let Some(d) = dir {
        let manifest = d.join("Cargo.toml");
        if repo.join(&manifest).is_file() {
            return Some(manifest);
        }
        dir = d.parent();
    }
    None
}

/// The dotted names a Python file is imported by: `pkg.mod` for
/// `pkg/mod.py` (and without a leading `src`), `pkg` for `pkg/__init__.py`.
fn module_names(file: &Path) -> Vec<String> {
    let parts: Vec<String> = file
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let mut parts = parts;
    if parts.last().is_some_and(|p| p == "__init__") {
        parts.pop();
    }
    let mut names = vec![parts.join(".")];
    if parts.first().is_some_and(|p| p == "src") && parts.len() > 1 {
        names.push(parts[1..].join("."));
    }
    names.retain(|n| !n.is_empty());
    names
}

/// The test files (`test_*.py`, `*_test.py`) that import one of `modules`
/// (or are `file` itself), sorted; and how many test files were read.
fn importing_tests(repo: &Path, file: &Path, modules: &[String]) -> (Vec<String>, usize) {
    let is_test = |name: &str| {
        name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
    };
    test_files_where(repo, is_test, |path, text| {
        path == file || imports_any(text, modules)
    })
}

/// Test files of a JavaScript project (`*.test.*`, `*.spec.*`) whose
/// relative imports or requires name `file`, sorted; and how many were
/// read.
fn importing_js_tests(repo: &Path, file: &Path) -> (Vec<String>, usize) {
    let is_test = |name: &str| {
        let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
        (stem.ends_with(".test") || stem.ends_with(".spec"))
            && JS_EXTENSIONS
                .iter()
                .any(|e| name.ends_with(&format!(".{e}")))
    };
    test_files_where(repo, is_test, |path, text| {
        let dir = path.parent().unwrap_or(Path::new(""));
        specifiers(text).any(|spec| resolves_to(dir, spec, file))
    })
}

/// The files below `repo` whose name `is_test` takes (at most
/// [`MAX_TEST_FILES`] read, each up to [`MAX_TEST_FILE_BYTES`], as text)
/// and whose path and text `wanted` takes, sorted; and how many were read.
fn test_files_where(
    repo: &Path,
    is_test: impl Fn(&str) -> bool,
    wanted: impl Fn(&Path, &str) -> bool,
) -> (Vec<String>, usize) {
    let mut found = Vec::new();
    let mut read = 0;
    walk(repo, &mut |path: &Path| {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !is_test(&name) || read >= MAX_TEST_FILES {
            return;
        }
        read += 1;
        let Ok(f) = std::fs::File::open(repo.join(path)) else {
            return;
        };
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(
            &mut std::io::Read::take(f, MAX_TEST_FILE_BYTES),
            &mut text,
        );
        if wanted(path, &text) {
            found.push(path.to_string_lossy().replace('\\', "/"));
        }
    });
    found.sort();
    (found, read)
}

const JS_EXTENSIONS: [&str; 6] = ["js", "mjs", "cjs", "ts", "jsx", "tsx"];

/// The relative module specifiers of a JavaScript text: `from './x'`,
/// `require('../x')`, `import('./x')`.
fn specifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(['\'', '"', '`'])
        .skip(1)
        .step_by(2)
        .filter(|s| s.starts_with("./") || s.starts_with("../"))
}

/// Whether `spec`, written in a file of `dir`, names `file` (with or
/// without its extension, or as its folder's index).
fn resolves_to(dir: &Path, spec: &str, file: &Path) -> bool {
    let mut parts: Vec<String> = dir
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    for part in spec.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                if parts.pop().is_none() {
                    return false;
                }
            }
            p => parts.push(p.to_string()),
        }
    }
    let named = parts.join("/");
    let file = file.to_string_lossy().replace('\\', "/");
    let without = file
        .rsplit_once('.')
        .map_or(file.as_str(), |(stem, _)| stem);
    named == file
        || named == without
        || without
            .strip_suffix("/index")
            .is_some_and(|folder| folder == named)
}

/// Every file below `repo` (relative paths), folders of [`SKIPPED`] and
/// links left out.
fn walk(repo: &Path, seen: &mut dyn FnMut(&Path)) {
    let mut dirs = vec![PathBuf::new()];
    while let Some(rel) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(repo.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && !SKIPPED.contains(&name.as_str()) && !name.starts_with('.') {
                dirs.push(rel.join(&name));
            } else if kind.is_file() {
                seen(&rel.join(&name));
            }
        }
    }
}

/// Whether a Python text imports one of `modules` (`import a.b`,
/// `from a.b import c`, `from a import b` for `a.b`).
fn imports_any(text: &str, modules: &[String]) -> bool {
    text.lines().map(str::trim).any(|line| {
        modules.iter().any(|module| {
            if let Some(rest) = line.strip_prefix("import ") {
                return rest
                    .split(',')
                    .map(|m| m.split_whitespace().next().unwrap_or(""))
                    .any(|m| m == module || m.starts_with(&format!("{module}.")));
            }
            let Some(rest) = line.strip_prefix("from ") else {
                return false;
            };
            let Some((from, names)) = rest.split_once(" import ") else {
                return false;
            };
            let from = from.trim();
            if from == module || from.starts_with(&format!("{module}.")) {
                return true;
            }
            // `from pkg import mod` imports `pkg.mod`.
            names
                .trim_matches(|c| c == '(' || c == ')')
                .split(',')
                .map(|n| n.split_whitespace().next().unwrap_or(""))
                .any(|n| format!("{from}.{n}") == *module)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn javascript_imports_resolve_to_the_file() {
        let math = Path::new("src/math.js");
        assert!(resolves_to(Path::new("test"), "../src/math.js", math));
        assert!(resolves_to(Path::new("test"), "../src/math", math));
        assert!(resolves_to(Path::new("src"), "./math", math));
        assert!(!resolves_to(Path::new("test"), "../src/mathx", math));
        assert!(!resolves_to(Path::new(""), "../../src/math", math));
        assert!(resolves_to(
            Path::new("test"),
            "../src/lib",
            Path::new("src/lib/index.ts")
        ));
        let text =
            "import { add } from '../src/math.js';\nconst x = require(\"./y\");\nimport 'vitest';";
        assert_eq!(
            specifiers(text).collect::<Vec<_>>(),
            ["../src/math.js", "./y"]
        );
    }

    #[test]
    fn python_modules_and_their_imports() {
        assert_eq!(
            module_names(Path::new("src/shop/cart.py")),
            ["src.shop.cart", "shop.cart"]
        );
        assert_eq!(module_names(Path::new("shop/__init__.py")), ["shop"]);
        let cart = ["shop.cart".to_string()];
        assert!(imports_any(
            "from shop.cart import total
",
            &cart
        ));
        assert!(imports_any(
            "from shop import cart, other
",
            &cart
        ));
        assert!(imports_any(
            "import os, shop.cart as c
",
            &cart
        ));
        assert!(!imports_any(
            "from shop.cartography import x
import shopcart
",
            &cart
        ));
    }
}
