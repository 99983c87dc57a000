//! The answer within [`ANSWER_BYTES`], what clients show a model.
//! summary.json and raw.log keep everything; the answer says what it left
//! out.

use plugin_sdk::text::{ANSWER_BYTES, fit_text};
use serde_json::{Value, json};

/// A failure's excerpt once the answer had to shrink.
const SHORT_EXCERPT_CHARS: usize = 300;

fn size(answer: &Value) -> usize {
    answer.to_string().len()
}

/// `answer` cut until it fits [`ANSWER_BYTES`], least useful first: the
/// failures' (and load errors') excerpts shortened, then failures dropped from the end
/// (`failures_omitted` counts them; their names stay in summary.json),
/// then the middle of the run's excerpt.
pub fn fit(mut answer: Value) -> Value {
    if size(&answer) <= ANSWER_BYTES {
        return answer;
    }
    for key in ["failures", "errors"] {
        let Some(failures) = answer[key].as_array_mut() else {
            continue;
        };
        for failure in failures.iter_mut() {
            if let Some(text) = failure["excerpt"].as_str() {
                failure["excerpt"] = json!(plugin_sdk::text::cut(
                    text,
                    SHORT_EXCERPT_CHARS,
                    "… [cut; whole in summary.json]"
                ));
            }
        }
    }
    let mut omitted = 0;
    while size(&answer) > ANSWER_BYTES {
        let Some(failures) = answer["failures"].as_array_mut() else {
            break;
        };
        if failures.len() <= 1 {
            break;
        }
        failures.pop();
        omitted += 1;
        answer["failures_omitted"] = json!(omitted);
    }
    let whole = answer["excerpt"].as_str().unwrap_or_default().to_string();
    let excerpt = fit_text(
        &whole,
        |keep| keep / 3,
        |n| {
            format!(
                "[… {n} bytes left out here: summary.json and raw.log in report_dir have them]\n"
            )
        },
        |text| {
            answer["excerpt"] = json!(text);
            size(&answer)
        },
    );
    answer["excerpt"] = json!(excerpt);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(i: usize) -> Value {
        json!({"name": format!("test_{i}"), "message": "assert 1 == 2", "excerpt": "x".repeat(1500)})
    }

    #[test]
    fn a_small_answer_is_untouched() {
        let answer = json!({"status": "fail", "excerpt": "short", "failures": [failure(0)]});
        assert_eq!(fit(answer.clone()), answer);
    }

    #[test]
    fn excerpts_shrink_then_failures_go_from_the_end() {
        let failures: Vec<Value> = (0..200).map(failure).collect();
        let answer = fit(json!({"status": "fail", "excerpt": "e", "failures": failures}));
        assert!(size(&answer) <= ANSWER_BYTES, "{}", size(&answer));
        let kept = answer["failures"].as_array().unwrap();
        assert_eq!(kept[0]["name"], "test_0", "the first failures stay");
        assert!(
            kept[0]["excerpt"]
                .as_str()
                .unwrap()
                .contains("summary.json")
        );
        assert_eq!(
            kept.len() + answer["failures_omitted"].as_u64().unwrap() as usize,
            200,
            "what was dropped is counted"
        );
        // Twenty failures fit once their excerpts are short.
        let twenty: Vec<Value> = (0..20).map(failure).collect();
        let answer = fit(json!({"excerpt": "e", "failures": twenty}));
        assert_eq!(answer["failures"].as_array().unwrap().len(), 20);
        assert!(answer.get("failures_omitted").is_none());
    }

    #[test]
    fn a_flood_of_failure_lines_keeps_both_ends() {
        let lines: Vec<String> = (0..2000).map(|i| format!("ERROR \"line\" {i}")).collect();
        let answer = fit(json!({"status": "fail", "excerpt": lines.join("\n"), "failures": []}));
        assert!(size(&answer) <= ANSWER_BYTES, "{}", size(&answer));
        let excerpt = answer["excerpt"].as_str().unwrap();
        assert!(excerpt.starts_with("ERROR \"line\" 0\n"), "{excerpt:.100}");
        assert!(excerpt.ends_with("ERROR \"line\" 1999"));
        assert!(excerpt.contains("bytes left out here: summary.json and raw.log"));
        assert!(
            excerpt
                .lines()
                .all(|l| l.starts_with("ERROR") || l.starts_with("[…"))
        );
    }
}
