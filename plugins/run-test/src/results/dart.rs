//! The JSON reporter protocol of `dart test` and `flutter test`
//! (`--file-reporter json:FILE`): one event per line; `testStart` names a
//! test and where it is declared, `error` carries a failure's message and
//! stack, `testDone` its result. Hidden tests are the runner's own
//! ("loading x_test.dart"): counted only when they fail, as the file that
//! did not load.

use std::collections::HashMap;

use regex_lite::Regex;
use serde_json::Value;

use super::{Outcome, Results, failure, in_repo};

struct Test {
    name: String,
    /// Where the test is declared, relative to the repository.
    declared: Option<(String, u32)>,
    errors: Vec<(String, String)>,
    /// When it started (the reporter's milliseconds since the run began).
    started_ms: Option<f64>,
}

pub fn read(jsonl: &str, repo: &str) -> Results {
    let mut tests: HashMap<u64, Test> = HashMap::new();
    let mut results = Results::default();
    for event in jsonl
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        match event["type"].as_str().unwrap_or_default() {
            "testStart" => {
                let test = &event["test"];
                let Some(id) = test["id"].as_u64() else {
                    continue;
                };
                // `root_url` is the test file when `url` is a helper's
                // (flutter's testWidgets, bloc_test).
                let (url, line) = if test["root_url"].is_string() {
                    (&test["root_url"], &test["root_line"])
                } else {
                    (&test["url"], &test["line"])
                };
                let declared = url
                    .as_str()
                    .and_then(|u| Some((in_repo(u, repo)?, u32::try_from(line.as_u64()?).ok()?)));
                let name = test["name"].as_str().unwrap_or_default().to_string();
                tests.insert(
                    id,
                    Test {
                        name,
                        declared,
                        errors: Vec::new(),
                        started_ms: event["time"].as_f64(),
                    },
                );
            }
            "error" => {
                if let Some(test) = event["testID"].as_u64().and_then(|id| tests.get_mut(&id)) {
                    let text = |k: &str| event[k].as_str().unwrap_or_default().to_string();
                    test.errors.push((text("error"), text("stackTrace")));
                }
            }
            "testDone" => {
                let Some(mut test) = event["testID"].as_u64().and_then(|id| tests.remove(&id))
                else {
                    continue;
                };
                let passed = event["result"] == "success";
                if let (Some(start), Some(end)) = (test.started_ms, event["time"].as_f64())
                    && event["hidden"] != true
                {
                    results.timed(&test.name, (end - start) / 1000.0);
                }
                if event["hidden"] == true {
                    if passed {
                        continue;
                    }
                    // "loading /repo/test/x_test.dart": the file is what failed.
                    let file = test
                        .name
                        .strip_prefix("loading ")
                        .and_then(|p| in_repo(p, repo));
                    if let Some(file) = file {
                        test.name = file.clone();
                        test.declared = Some((file, 1));
                    }
                    // A file that did not load: none of its tests ran.
                    results.errored(test_failure(test, repo));
                    continue;
                }
                results.record(if event["skipped"] == true {
                    Outcome::Skipped
                } else if passed {
                    Outcome::Passed(test.name.clone())
                } else {
                    Outcome::Failed(test_failure(test, repo))
                });
            }
            _ => {}
        }
    }
    results
}

fn test_failure(test: Test, repo: &str) -> super::Failure {
    // Terse traces name the repository's files relatively
    // (`test/a_test.dart 16:7  main.<fn>`); package: and dart: frames
    // are the framework's.
    let frame = Regex::new(r"^(\S+\.dart) (\d+):\d+").expect("pattern compiles");
    let failed_at = test.errors.iter().find_map(|(_, stack)| {
        stack.lines().find_map(|l| {
            let c = frame.captures(l)?;
            let path = &c[1];
            let file = if path.starts_with('/') || path.starts_with("file:") {
                in_repo(path, repo)?
            } else if path.contains(':') {
                return None;
            } else {
                path.to_string()
            };
            Some((file, c[2].parse().ok()?))
        })
    });
    let message = test.errors.first().map_or("", |(error, _)| error.as_str());
    let excerpt: Vec<String> = test
        .errors
        .iter()
        .map(|(error, stack)| format!("{}\n{}", error.trim_end(), stack.trim_end()))
        .collect();
    failure(
        test.name,
        failed_at.or(test.declared),
        message,
        &excerpt.join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::counts;

    /// The protocol's events for a file with a passing, a failing and a
    /// skipped test in a group, and a file that does not load (as the
    /// protocol's documentation and the test package's own tests show
    /// them).
    const DART: &str = r#"{"protocolVersion":"0.1.1","runnerVersion":"1.25.8","pid":1,"type":"start","time":0}
{"suite":{"id":0,"platform":"vm","path":"/w/app/test/calc_test.dart"},"type":"suite","time":0}
{"test":{"id":1,"name":"loading /w/app/test/calc_test.dart","suiteID":0,"groupIDs":[],"metadata":{"skip":false,"skipReason":null},"line":null,"column":null,"url":null},"type":"testStart","time":1}
{"testID":1,"result":"success","skipped":false,"hidden":true,"type":"testDone","time":300}
{"group":{"id":2,"suiteID":0,"parentID":null,"name":"calc","metadata":{"skip":false,"skipReason":null},"testCount":3,"line":4,"column":3,"url":"file:///w/app/test/calc_test.dart"},"type":"group","time":301}
{"test":{"id":3,"name":"calc adds","suiteID":0,"groupIDs":[2],"metadata":{"skip":false,"skipReason":null},"line":5,"column":5,"url":"file:///w/app/test/calc_test.dart"},"type":"testStart","time":302}
{"testID":3,"result":"success","skipped":false,"hidden":false,"type":"testDone","time":310}
{"test":{"id":4,"name":"calc subtracts","suiteID":0,"groupIDs":[2],"metadata":{"skip":false,"skipReason":null},"line":8,"column":5,"url":"file:///w/app/test/calc_test.dart"},"type":"testStart","time":311}
{"testID":4,"messageType":"print","message":"computing","type":"print","time":312}
{"testID":4,"error":"Expected: <3>\n  Actual: <1>\n","stackTrace":"package:matcher                 expect\ntest/calc_test.dart 9:7        main.<fn>.<fn>\n","isFailure":true,"type":"error","time":315}
{"testID":4,"result":"failure","skipped":false,"hidden":false,"type":"testDone","time":316}
{"test":{"id":5,"name":"calc later","suiteID":0,"groupIDs":[2],"metadata":{"skip":true,"skipReason":"later"},"line":12,"column":5,"url":"file:///w/app/test/calc_test.dart"},"type":"testStart","time":317}
{"testID":5,"result":"success","skipped":true,"hidden":false,"type":"testDone","time":317}
{"suite":{"id":6,"platform":"vm","path":"/w/app/test/broken_test.dart"},"type":"suite","time":320}
{"test":{"id":7,"name":"loading /w/app/test/broken_test.dart","suiteID":6,"groupIDs":[],"metadata":{"skip":false,"skipReason":null},"line":null,"column":null,"url":null},"type":"testStart","time":321}
{"testID":7,"error":"Failed to load \"/w/app/test/broken_test.dart\":\ntest/broken_test.dart:3:1: Error: Expected ';' after this.","stackTrace":"","isFailure":false,"type":"error","time":400}
{"testID":7,"result":"error","skipped":false,"hidden":true,"type":"testDone","time":401}
{"success":false,"type":"done","time":402}"#;

    #[test]
    fn dart_reports_names_places_and_messages() {
        let r = read(DART, "/w/app");
        // The file that did not load is an error, not a failed test.
        assert_eq!(
            r.counts,
            super::super::Counts {
                errors: 1,
                ..counts(1, 1, 1)
            }
        );
        let f = &r.failures[0];
        assert_eq!(f.name, "calc subtracts");
        assert_eq!(
            (f.file.as_deref(), f.line),
            (Some("test/calc_test.dart"), Some(9))
        );
        assert_eq!(f.message, "Expected: <3>\n  Actual: <1>");
        let load = &r.errors[0];
        assert_eq!(load.name, "test/broken_test.dart");
        assert_eq!(load.file.as_deref(), Some("test/broken_test.dart"));
        assert!(
            load.message.starts_with("Failed to load"),
            "{}",
            load.message
        );
    }

    /// flutter's testWidgets: `url` is the helper's, `root_url` the test's.
    #[test]
    fn a_widget_test_is_placed_in_its_own_file() {
        let events = r#"{"test":{"id":8,"name":"App renders","suiteID":0,"groupIDs":[],"line":153,"column":5,"url":"package:flutter_test/src/widget_tester.dart","root_line":14,"root_column":5,"root_url":"file:///w/app/test/app_test.dart"},"type":"testStart","time":1}
{"testID":8,"error":"boom","stackTrace":"package:flutter_test/src/widget_tester.dart 455:16  expect\n","isFailure":false,"type":"error","time":2}
{"testID":8,"result":"error","skipped":false,"hidden":false,"type":"testDone","time":3}"#;
        let r = read(events, "/w/app/");
        let f = &r.failures[0];
        assert_eq!(
            (f.file.as_deref(), f.line),
            (Some("test/app_test.dart"), Some(14))
        );
    }
}
