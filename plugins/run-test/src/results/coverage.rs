//! Line coverage from what the runner wrote into the report dir: LCOV
//! (`SF:` / `DA:line,count`; pytest-cov's, jest's, flutter's) or go's
//! cover profile (`file:line.col,line.col statements count`). Read as
//! hostile input: bounded files, lines and paths, only paths inside the
//! repository kept.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{MAX_REPORT_BYTES, in_repo};
use crate::template::{Project, Runner, coverage_args, coverage_file};

/// The most files kept, and the most lines counted per file.
const MAX_FILES: usize = 10_000;
const MAX_LINE: u32 = 1_000_000;
/// The uncovered ranges of a file, as text, at most this long.
const MAX_RANGES_CHARS: usize = 200;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileCoverage {
    pub file: String,
    pub covered: u32,
    pub lines: u32,
    pub percent: f64,
    /// `3-5, 9`: the lines with code that no test ran.
    pub uncovered: String,
}

/// Per file, each line with code and whether a test ran it.
type Lines = BTreeMap<String, BTreeMap<u32, bool>>;

/// The coverage the run wrote into `report_dir`, per file, least covered
/// first; or why there is none.
pub fn read(
    runner: Runner,
    project: Project,
    report_dir: &Path,
    repo: &Path,
    output: &str,
) -> Result<Vec<FileCoverage>, String> {
    coverage_args(runner, project)?;
    let file = report_dir.join(coverage_file(runner));
    let text = match std::fs::metadata(&file) {
        Ok(m) if m.len() > MAX_REPORT_BYTES => {
            return Err(format!(
                "{} is larger than the {MAX_REPORT_BYTES} bytes read",
                file.display()
            ));
        }
        Ok(_) => std::fs::read_to_string(&file).map_err(|e| plugin_sdk::io_text(&e))?,
        Err(_) => {
            return Err(format!(
                "{} wrote no coverage ({} is missing): {}",
                runner.name(),
                coverage_file(runner),
                why_none(runner, project, output)
            ));
        }
    };
    let repo_text = repo.to_string_lossy();
    Ok(match runner {
        Runner::Go => go_profile(&text, &go_module(repo).unwrap_or_default()),
        _ => lcov(&text, &repo_text),
    })
}

/// Why a run wrote no coverage, as far as its output says: a missing
/// provider only when the output says it is missing (a failing test or a
/// collection error writes none either, with the provider installed).
fn why_none(runner: Runner, project: Project, output: &str) -> String {
    let missing = match runner {
        Runner::Pytest if output.contains("unrecognized arguments: --cov") => {
            Some("pytest-cov is not installed (`pip install pytest-cov`)")
        }
        Runner::Npm
            if project == Project::Vitest
                && output.contains("@vitest/coverage-v8")
                && [
                    "MISSING DEPENDENCY",
                    "Cannot find",
                    "not installed",
                    "Failed to load",
                ]
                .iter()
                .any(|sign| output.contains(sign)) =>
        {
            Some("@vitest/coverage-v8 is not installed (`npm install -D @vitest/coverage-v8`)")
        }
        _ => None,
    };
    match missing {
        Some(missing) => format!("{missing}, as raw.log says"),
        None => "the run ended before writing it (raw.log says how it ended: a collection or \
                 load error, a crash, a timeout)"
            .to_string(),
    }
}

/// The module path go.mod declares.
fn go_module(repo: &Path) -> Option<String> {
    let text = std::fs::read_to_string(repo.join("go.mod")).ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("module "))
        .map(|m| m.trim().trim_matches('"').to_string())
}

/// LCOV text into per-file coverage (`repo` makes paths relative).
pub fn lcov(text: &str, repo: &str) -> Vec<FileCoverage> {
    let mut files: Lines = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("SF:") {
            current = relative(path.trim(), repo).filter(|_| files.len() < MAX_FILES);
        } else if let Some(data) = line.strip_prefix("DA:") {
            let (Some(file), Some((number, count))) = (&current, data.split_once(',')) else {
                continue;
            };
            let count = count.split(',').next().unwrap_or("0");
            if let (Ok(number), Ok(count)) = (number.parse::<u32>(), count.parse::<u64>())
                && number <= MAX_LINE
            {
                *files
                    .entry(file.clone())
                    .or_default()
                    .entry(number)
                    .or_default() |= count > 0;
            }
        } else if line.starts_with("end_of_record") {
            current = None;
        }
    }
    summarize(files)
}

/// A go cover profile into per-file coverage; `module` (go.mod's) turns
/// import paths into paths in the repository.
pub fn go_profile(text: &str, module: &str) -> Vec<FileCoverage> {
    let mut files: Lines = BTreeMap::new();
    for line in text.lines().skip_while(|l| l.starts_with("mode:")) {
        // example.com/calc/calc.go:3.24,5.2 1 1
        let Some((file, rest)) = line.rsplit_once(':') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let (Some(span), Some(_), Some(count)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Some(file) = file.strip_prefix(&format!("{module}/")) else {
            continue;
        };
        if file.contains("..") || file.starts_with('/') || files.len() >= MAX_FILES {
            continue;
        }
        let line_of = |pos: &str| pos.split('.').next()?.parse::<u32>().ok();
        let Some((start, end)) = span.split_once(',') else {
            continue;
        };
        let (Some(start), Some(end), Ok(count)) =
            (line_of(start), line_of(end), count.parse::<u64>())
        else {
            continue;
        };
        if start > end || end > MAX_LINE || end - start > 10_000 {
            continue;
        }
        let lines = files.entry(file.to_string()).or_default();
        for number in start..=end {
            *lines.entry(number).or_default() |= count > 0;
        }
    }
    summarize(files)
}

/// `path` relative to the repository; none for a file outside it.
fn relative(path: &str, repo: &str) -> Option<String> {
    if path.starts_with('/') || path.starts_with("file://") || path.get(1..2) == Some(":") {
        return in_repo(path, repo);
    }
    let path = path.replace('\\', "/");
    let path = path.strip_prefix("./").unwrap_or(&path).to_string();
    (!path.split('/').any(|p| p == "..")).then_some(path)
}

fn summarize(files: Lines) -> Vec<FileCoverage> {
    let mut out: Vec<FileCoverage> = files
        .into_iter()
        .map(|(file, lines)| {
            let covered = lines.values().filter(|&&ran| ran).count() as u32;
            let total = lines.len() as u32;
            let missed: Vec<u32> = lines
                .iter()
                .filter(|(_, ran)| !**ran)
                .map(|(n, _)| *n)
                .collect();
            FileCoverage {
                file,
                covered,
                lines: total,
                percent: (f64::from(covered) * 1000.0 / f64::from(total.max(1))).round() / 10.0,
                uncovered: plugin_sdk::text::cut(&ranges(&missed), MAX_RANGES_CHARS, "…"),
            }
        })
        .collect();
    // The least covered first: what an agent should look at.
    out.sort_by(|a, b| {
        a.percent
            .total_cmp(&b.percent)
            .then_with(|| a.file.cmp(&b.file))
    });
    out
}

/// `3-5, 9` for [3, 4, 5, 9].
fn ranges(lines: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i];
        let mut end = start;
        while i + 1 < lines.len() && lines[i + 1] == end + 1 {
            i += 1;
            end = lines[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcov_and_go_profiles_give_lines_and_uncovered_ranges() {
        let text = "TN:\nSF:/w/app/shop/cart.py\nDA:1,1\nDA:2,1\nDA:3,0\nDA:4,0\nDA:6,0\nend_of_record\n\
                    SF:/elsewhere/x.py\nDA:1,0\nend_of_record\nSF:lib/ok.js\nDA:1,3\nend_of_record\n";
        let files = lcov(text, "/w/app");
        assert_eq!(
            files.len(),
            2,
            "a file outside the repository is left out: {files:?}"
        );
        assert_eq!(files[0].file, "shop/cart.py");
        assert_eq!(
            (files[0].covered, files[0].lines, files[0].percent),
            (2, 5, 40.0)
        );
        assert_eq!(files[0].uncovered, "3-4, 6");
        assert_eq!(
            (files[1].file.as_str(), files[1].percent),
            ("lib/ok.js", 100.0)
        );

        let profile = "mode: set\nexample.com/calc/calc.go:3.24,5.2 1 1\nexample.com/calc/calc.go:7.30,9.2 1 0\n\
                       other.org/x/y.go:1.1,2.2 1 1\nexample.com/calc/../../etc/passwd:1.1,2.1 1 1\n";
        let files = go_profile(profile, "example.com/calc");
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(
            (files[0].file.as_str(), files[0].covered, files[0].lines),
            ("calc.go", 3, 6)
        );
        assert_eq!(files[0].uncovered, "7-9");
    }
}
