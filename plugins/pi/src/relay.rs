//! What goes to the client while a run goes: each of pi's loop events,
//! small (its type and ids), and a tool's stream of updates thinned to one
//! every [`UPDATE_EVERY`].

use serde_json::{Value, json};

/// The most `tool_execution_update` events relayed per tool call: a tool
/// streaming its output sends thousands (20,000 became 6 MB of
/// notifications).
const UPDATE_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Passes at most one `tool_execution_update` per tool call every
/// [`UPDATE_EVERY`]; the one passed says how many were left out before it
/// (`coalesced`). Every other event passes.
#[derive(Default)]
pub struct Coalesce {
    /// Per tool call id: when an update was last passed, and how many were
    /// left out since.
    last: std::collections::HashMap<String, (std::time::Instant, u64)>,
}

impl Coalesce {
    pub fn pass(&mut self, mut relayed: Value) -> Option<Value> {
        if relayed["type"] != "tool_execution_update" {
            return Some(relayed);
        }
        let id = relayed["toolCallId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let now = std::time::Instant::now();
        match self.last.get_mut(&id) {
            Some((at, left_out)) if now.duration_since(*at) < UPDATE_EVERY => {
                *left_out += 1;
                None
            }
            Some((at, left_out)) => {
                relayed["coalesced"] = json!(*left_out);
                (*at, *left_out) = (now, 0);
                Some(relayed)
            }
            None => {
                self.last.insert(id, (now, 0));
                Some(relayed)
            }
        }
    }
}

/// What goes to the client for an event: its type and ids, small. Token
/// deltas (`message_update`) are not relayed; whole messages neither.
pub fn relay(event: &Value) -> Option<Value> {
    let kind = event["type"].as_str()?;
    let mut out = json!({"type": kind});
    let keep = |out: &mut Value, key: &str| {
        if let Some(v) = event.get(key) {
            out[key] = v.clone();
        }
    };
    match kind {
        // Token deltas, pi's RPC replies and its session header are not loop events.
        "message_update" | "response" | "session" => return None,
        "tool_execution_start" | "tool_execution_update" | "tool_execution_end" => {
            for key in ["toolCallId", "toolName", "isError"] {
                keep(&mut out, key);
            }
            if kind == "tool_execution_start" {
                keep(&mut out, "args");
            }
        }
        "message_start" | "message_end" => {
            let m = &event["message"];
            out["role"] = m["role"].clone();
            if let Some(id) = m.get("responseId").or(m.get("id")) {
                out["messageId"] = id.clone();
            }
            if kind == "message_end" {
                out["stopReason"] = m["stopReason"].clone();
            }
        }
        "auto_retry_start" | "auto_retry_end" => {
            for key in [
                "attempt",
                "maxAttempts",
                "delayMs",
                "success",
                "errorMessage",
                "finalError",
            ] {
                keep(&mut out, key);
            }
        }
        _ => {}
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_calls_updates_are_coalesced_and_other_events_pass() {
        let mut updates = Coalesce::default();
        let update = |id: &str| json!({"type": "tool_execution_update", "toolCallId": id});
        let passed = (0..1000)
            .filter(|_| updates.pass(update("a")).is_some())
            .count();
        assert_eq!(passed, 1, "a burst passes once");
        assert!(
            updates.pass(update("b")).is_some(),
            "another call's first passes"
        );
        let end = json!({"type": "tool_execution_end", "toolCallId": "a"});
        assert!(updates.pass(end).is_some());
        std::thread::sleep(UPDATE_EVERY);
        let next = updates
            .pass(update("a"))
            .expect("passes again after the interval");
        assert_eq!(next["coalesced"], 999);
    }

    #[test]
    fn relayed_events_are_small_and_keep_ids() {
        let start = json!({"type": "tool_execution_start", "toolCallId": "c1", "toolName": "bash", "args": {"command": "ls"}});
        assert_eq!(relay(&start).unwrap()["toolCallId"], "c1");
        assert!(relay(&json!({"type": "message_update"})).is_none());
        let end = json!({"type": "agent_end", "messages": [1, 2, 3]});
        assert!(relay(&end).unwrap().get("messages").is_none());
    }
}
