//! `go test -json`: test2json's event stream (`run`, `output`, `pass`,
//! `fail`, `skip` per test and per package) on stdout, which the host logs
//! whole into `raw.log` in the report dir; read from there, not from the
//! summary's tail. Packages that do not build say so outside the stream
//! (go 1.19-1.23: `FAIL pkg [build failed]` on stdout, the compiler's
//! errors on stderr; 1.24 and newer: `build-output` events).

use std::collections::{HashMap, HashSet};

use regex_lite::Regex;
use serde::Deserialize;

use super::{Outcome, Results, failure, in_repo};

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Event {
    action: String,
    #[serde(default)]
    package: String,
    #[serde(default)]
    test: String,
    #[serde(default)]
    output: String,
    /// `build-output` events name the package here.
    #[serde(default)]
    import_path: String,
    /// Seconds a test (or package) took, on its `pass`/`fail` event.
    #[serde(default)]
    elapsed: Option<f64>,
}

/// What `go test -json` said, read from the host's tagged log (`[stdout] `
/// and `[stderr] ` lines). `module` is go.mod's module path: test output
/// names files relative to their package's directory, which is the
/// package's path below the module. `repo` turns stack paths relative.
pub fn read(log: &str, module: Option<&str>, repo: &str) -> Results {
    let mut outputs: HashMap<(String, String), String> = HashMap::new();
    // Tests and packages in the order they finished: (package, test, action).
    let mut finished: Vec<(String, String, String)> = Vec::new();
    let mut timed: Vec<(String, String, f64)> = Vec::new();
    let mut build = BuildErrors::default();
    for line in log.lines() {
        if let Some(text) = line.strip_prefix("[stderr] ") {
            build.line(text);
            continue;
        }
        let Some(text) = line.strip_prefix("[stdout] ") else {
            continue;
        };
        let Ok(event) = serde_json::from_str::<Event>(text) else {
            build.stdout(text);
            continue;
        };
        match event.action.as_str() {
            "output" => outputs
                .entry((event.package, event.test))
                .or_default()
                .push_str(&event.output),
            "build-output" => build.output(&event.import_path, &event.output),
            "pass" | "fail" | "skip" => {
                if let Some(seconds) = event.elapsed.filter(|_| !event.test.is_empty()) {
                    timed.push((event.package.clone(), event.test.clone(), seconds));
                }
                finished.push((event.package, event.test, event.action))
            }
            _ => {}
        }
    }
    let failed_test_in: HashSet<&str> = finished
        .iter()
        .filter(|(_, test, action)| !test.is_empty() && action == "fail")
        .map(|(package, _, _)| package.as_str())
        .collect();
    // Each test that has subtests, and whether one of them failed: such a
    // test is counted through them (one pass over the finished, as a run
    // can hold thousands of tests).
    let mut parents: HashMap<(&str, &str), bool> = HashMap::new();
    for (package, test, action) in &finished {
        for (at, _) in test.match_indices('/') {
            *parents.entry((package, &test[..at])).or_default() |= action == "fail";
        }
    }
    let mut results = Results::default();
    // A test with subtests takes their time: only the leaves count.
    for (package, test, seconds) in &timed {
        if !parents.contains_key(&(package.as_str(), test.as_str())) {
            results.timed(test, *seconds);
        }
    }
    for (package, test, action) in &finished {
        let output = outputs
            .get(&(package.clone(), test.clone()))
            .map_or("", String::as_str);
        if test.is_empty() {
            // A package that failed with no failing test: a panic in
            // TestMain or init, go's own -timeout, a vet error.
            if action == "fail" && !failed_test_in.contains(package.as_str()) {
                results.record(Outcome::Failed(package_failure(package, output, repo)));
            }
            continue;
        }
        // A test with subtests is counted through them, unless it failed
        // on its own.
        if let Some(&child_failed) = parents.get(&(package.as_str(), test.as_str()))
            && (action != "fail" || child_failed)
        {
            continue;
        }
        results.record(match action.as_str() {
            "pass" => Outcome::Passed(test.to_string()),
            "skip" => Outcome::Skipped,
            _ => Outcome::Failed(test_failure(package, test, output, module, repo)),
        });
    }
    for (package, lines) in build.failed() {
        results.errored(build.failure(package, lines));
    }
    results
}

fn test_failure(
    package: &str,
    test: &str,
    output: &str,
    module: Option<&str>,
    repo: &str,
) -> super::Failure {
    let said = Regex::new(r"^\s+([\w./-]+\.go):(\d+): (.*)$").expect("pattern compiles");
    let lines: Vec<&str> = output.lines().filter(|l| !is_framing(l)).collect();
    let dir = module
        .and_then(|m| package.strip_prefix(m))
        .map(|rest| rest.trim_start_matches('/'))
        .unwrap_or("");
    let (place, message) = if let Some(panic) = lines.iter().position(|l| l.starts_with("panic: "))
    {
        let place = repo_frame(&lines[panic..], repo);
        let message = lines[panic].trim_end_matches(" [recovered]").to_string();
        (place, message)
    } else if let Some((i, c)) = lines
        .iter()
        .enumerate()
        .find_map(|(i, l)| Some((i, said.captures(l)?)))
    {
        let file = if dir.is_empty() {
            c[1].to_string()
        } else {
            format!("{dir}/{}", &c[1])
        };
        // The message, and the lines t.Errorf indented under it.
        let mut message = vec![c[3].to_string()];
        message.extend(
            lines[i + 1..]
                .iter()
                .take_while(|l| l.starts_with("        "))
                .map(|l| l.trim().to_string()),
        );
        (
            c[2].parse().ok().map(|line| (file, line)),
            message.join("\n"),
        )
    } else {
        (None, lines.join("\n"))
    };
    failure(test.to_string(), place, &message, &lines.join("\n"))
}

fn package_failure(package: &str, output: &str, repo: &str) -> super::Failure {
    let lines: Vec<&str> = output
        .lines()
        .filter(|l| {
            !is_framing(l)
                && !matches!(l.trim(), "FAIL" | "PASS")
                && !l.starts_with("FAIL\t")
                && !l.starts_with("ok ")
        })
        .collect();
    let place = repo_frame(&lines, repo);
    let message = lines
        .iter()
        .find(|l| !l.trim().is_empty())
        .map_or("the package failed outside its tests", |l| l.trim());
    failure(package.to_string(), place, message, &lines.join("\n"))
}

/// The first frame of a goroutine stack (`\t/abs/file.go:12 +0x2e`) in the
/// repository's own files, relative to it.
fn repo_frame(lines: &[&str], repo: &str) -> Option<(String, u32)> {
    let frame = Regex::new(r"^\t(/\S+\.go):(\d+)").expect("pattern compiles");
    lines.iter().find_map(|l| {
        let c = frame.captures(l)?;
        Some((in_repo(&c[1], repo)?, c[2].parse().ok()?))
    })
}

/// The runner's own lines around a test's output.
fn is_framing(line: &str) -> bool {
    let l = line.trim_start();
    [
        "=== RUN",
        "=== PAUSE",
        "=== CONT",
        "=== NAME",
        "--- PASS:",
        "--- FAIL:",
        "--- SKIP:",
    ]
    .iter()
    .any(|p| l.starts_with(p))
}

/// The compiler's errors, per package, and which packages did not build.
#[derive(Default)]
struct BuildErrors {
    /// `# pkg` blocks: (package, its lines).
    blocks: Vec<(String, Vec<String>)>,
    failed: Vec<String>,
}

impl BuildErrors {
    /// A stderr line: `# example.com/m/pkg [example.com/m/pkg.test]` opens
    /// a package's block.
    fn line(&mut self, text: &str) {
        if let Some(header) = text.strip_prefix("# ") {
            let package = header.split(' ').next().unwrap_or_default();
            self.blocks.push((package.to_string(), Vec::new()));
        } else if let Some((_, lines)) = self.blocks.last_mut() {
            lines.push(text.to_string());
        }
    }

    fn output(&mut self, package: &str, text: &str) {
        let package = package.split(' ').next().unwrap_or_default();
        for line in text.lines() {
            if line.starts_with("# ") {
                continue;
            }
            match self.blocks.iter_mut().find(|(p, _)| p == package) {
                Some((_, lines)) => lines.push(line.to_string()),
                None => self
                    .blocks
                    .push((package.to_string(), vec![line.to_string()])),
            }
        }
    }

    /// A stdout line outside the stream: `FAIL\tpkg [build failed]`.
    fn stdout(&mut self, text: &str) {
        let Some(rest) = text.strip_prefix("FAIL\t") else {
            return;
        };
        if let Some(package) = rest
            .strip_suffix(" [build failed]")
            .or_else(|| rest.strip_suffix(" [setup failed]"))
        {
            self.failed.push(package.to_string());
        }
    }

    fn failed(&self) -> Vec<(String, Vec<String>)> {
        self.failed
            .iter()
            .map(|package| {
                let lines = self
                    .blocks
                    .iter()
                    .filter(|(p, _)| p == package)
                    .flat_map(|(_, l)| l.clone())
                    .collect();
                (package.clone(), lines)
            })
            .collect()
    }

    /// The first compiler error says where (paths are relative to the
    /// directory go ran in, the repository).
    fn failure(&self, package: String, lines: Vec<String>) -> super::Failure {
        let error = Regex::new(r"^([\w./-]+\.go):(\d+):(?:\d+:)? (.*)$").expect("pattern compiles");
        let first = lines.iter().find_map(|l| error.captures(l));
        let place = first.as_ref().and_then(|c| {
            Some((
                c[1].trim_start_matches("./").to_string(),
                c[2].parse().ok()?,
            ))
        });
        let message = match &first {
            Some(c) => format!("build failed: {}", &c[3]),
            None => "build failed".to_string(),
        };
        failure(package, place, &message, &lines.join("\n"))
    }
}

/// The module path of a go.mod (`module example.com/m`), which names the
/// packages below the repository.
pub fn module(go_mod: &str) -> Option<String> {
    go_mod.lines().find_map(|l| {
        let path = l.trim().strip_prefix("module")?.trim().trim_matches('"');
        (!path.is_empty()).then(|| path.to_string())
    })
}

/// The console go would have printed: each event's output, in place of
/// the event (what the excerpt is built from).
pub fn console(text: &str) -> String {
    let mut out = String::with_capacity(text.len() / 2);
    for line in text.split_inclusive('\n') {
        match serde_json::from_str::<Event>(line.trim_end()) {
            Ok(event) if matches!(event.action.as_str(), "output" | "build-output") => {
                out.push_str(&event.output)
            }
            Ok(_) => {}
            Err(_) => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::counts;

    /// go 1.19's `go test -json ./...` as the host logs it: a test that
    /// fails, one that passes, one skipped, a table whose second case
    /// fails, a panic in a second package and a third that does not build.
    fn log() -> String {
        let events = [
            r#"{"Action":"run","Package":"example.com/calc","Test":"TestAdd"}"#,
            r#"{"Action":"output","Package":"example.com/calc","Test":"TestAdd","Output":"=== RUN   TestAdd\n"}"#,
            r#"{"Action":"pass","Package":"example.com/calc","Test":"TestAdd","Elapsed":0}"#,
            r#"{"Action":"output","Package":"example.com/calc","Test":"TestSub","Output":"=== RUN   TestSub\n"}"#,
            r#"{"Action":"output","Package":"example.com/calc","Test":"TestSub","Output":"    calc_test.go:14: Add(2, -1) = 1, want 3\n"}"#,
            r#"{"Action":"output","Package":"example.com/calc","Test":"TestSub","Output":"        (and the sign is off)\n"}"#,
            r#"{"Action":"output","Package":"example.com/calc","Test":"TestSub","Output":"--- FAIL: TestSub (0.00s)\n"}"#,
            r#"{"Action":"fail","Package":"example.com/calc","Test":"TestSub","Elapsed":0}"#,
            r#"{"Action":"output","Package":"example.com/calc","Test":"TestLater","Output":"    calc_test.go:18: later\n"}"#,
            r#"{"Action":"skip","Package":"example.com/calc","Test":"TestLater","Elapsed":0}"#,
            r#"{"Action":"output","Package":"example.com/calc","Test":"TestTable/two","Output":"    calc_test.go:24: got 2 want 3\n"}"#,
            r#"{"Action":"pass","Package":"example.com/calc","Test":"TestTable/one","Elapsed":0}"#,
            r#"{"Action":"fail","Package":"example.com/calc","Test":"TestTable/two","Elapsed":0}"#,
            r#"{"Action":"fail","Package":"example.com/calc","Test":"TestTable","Elapsed":0}"#,
            r#"{"Action":"output","Package":"example.com/calc","Output":"FAIL\texample.com/calc\t0.002s\n"}"#,
            r#"{"Action":"fail","Package":"example.com/calc","Elapsed":0.002}"#,
            r#"{"Action":"output","Package":"example.com/calc/sub","Test":"TestPanics","Output":"panic: assignment to entry in nil map [recovered]\n"}"#,
            r#"{"Action":"output","Package":"example.com/calc/sub","Test":"TestPanics","Output":"\t/usr/lib/go-1.19/src/runtime/panic.go:884 +0x212\n"}"#,
            r#"{"Action":"output","Package":"example.com/calc/sub","Test":"TestPanics","Output":"\t/tmp/gop/sub/sub_test.go:7 +0x2e\n"}"#,
            r#"{"Action":"fail","Package":"example.com/calc/sub","Test":"TestPanics","Elapsed":0}"#,
            r#"{"Action":"fail","Package":"example.com/calc/sub","Elapsed":0.006}"#,
        ];
        let mut log: String = events.iter().map(|e| format!("[stdout] {e}\n")).collect();
        log.push_str("[stderr] # example.com/calc/broken [example.com/calc/broken.test]\n");
        log.push_str("[stderr] broken/b.go:3:23: cannot use \"a\" (untyped string constant) as int value in return statement\n");
        log.push_str("[stdout] FAIL\texample.com/calc/broken [build failed]\n");
        log.push_str("[host] ended: Exited, exit code Some(2), signal None, 812 ms\n");
        log
    }

    #[test]
    fn go_reports_names_places_and_messages() {
        let r = read(&log(), Some("example.com/calc"), "/tmp/gop");
        // The package that does not build is an error, not a failed test.
        assert_eq!(
            r.counts,
            super::super::Counts {
                errors: 1,
                ..counts(2, 3, 1)
            }
        );
        let names: Vec<&str> = r.failures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["TestSub", "TestTable/two", "TestPanics"]);
        let sub = &r.failures[0];
        assert_eq!(
            (sub.file.as_deref(), sub.line),
            (Some("calc_test.go"), Some(14))
        );
        assert_eq!(sub.message, "Add(2, -1) = 1, want 3\n(and the sign is off)");
        let panic = &r.failures[2];
        assert_eq!(
            (panic.file.as_deref(), panic.line),
            (Some("sub/sub_test.go"), Some(7))
        );
        assert_eq!(panic.message, "panic: assignment to entry in nil map");
        let broken = &r.errors[0];
        assert_eq!(broken.name, "example.com/calc/broken");
        assert_eq!(
            (broken.file.as_deref(), broken.line),
            (Some("broken/b.go"), Some(3))
        );
        assert!(
            broken.message.starts_with("build failed: cannot use"),
            "{}",
            broken.message
        );
    }

    #[test]
    fn a_package_failing_outside_its_tests_is_named() {
        let log = [
            r#"[stdout] {"Action":"pass","Package":"m","Test":"TestA"}"#,
            r#"[stdout] {"Action":"output","Package":"m","Output":"panic: test timed out after 1s\n"}"#,
            r#"[stdout] {"Action":"output","Package":"m","Output":"FAIL\tm\t1.005s\n"}"#,
            r#"[stdout] {"Action":"fail","Package":"m"}"#,
        ]
        .join("\n");
        let r = read(&log, Some("m"), "/r");
        assert_eq!(r.counts, counts(1, 1, 0));
        assert_eq!(r.failures[0].name, "m");
        assert_eq!(r.failures[0].message, "panic: test timed out after 1s");
    }

    #[test]
    fn the_excerpt_reads_like_gos_console() {
        let text = "{\"Action\":\"output\",\"Package\":\"m\",\"Test\":\"TestB\",\"Output\":\"--- FAIL: TestB (0.00s)\\n\"}\n{\"Action\":\"fail\",\"Package\":\"m\",\"Test\":\"TestB\"}\nFAIL\tm/x [build failed]\n";
        assert_eq!(
            console(text),
            "--- FAIL: TestB (0.00s)\nFAIL\tm/x [build failed]\n"
        );
    }
}
