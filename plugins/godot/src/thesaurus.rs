//! The words people use for what the class reference calls otherwise: a
//! player asks to "quit the game", the reference "quits the application".
//! A question in plain words looks for each of its words or a related one
//! (the index's coverage bonus takes `word|related|…` as alternatives), so
//! a member whose name and summary say it in the reference's words is
//! found. Groups of general game-programming vocabulary, not answers: no
//! class or member is named here.

/// Words that stand for one another in questions; each group is read both
/// ways.
const RELATED: &[&[&str]] = &[
    &["game", "application"],
    &["quit", "exit", "close"],
    &["text", "string"],
    &["number", "int", "integer", "float"],
    &["wait", "delay", "timer", "timeout"],
    &["hide", "hidden", "invisible"],
    &["show", "visible", "display"],
    &["random", "randomly", "rand"],
    &["between", "range"],
    &["frame", "process", "tick"],
    &["screen", "display", "viewport"],
    &["browser", "url", "uri", "web"],
    &["settings", "config", "configuration", "preferences"],
    &["store", "save", "persist", "write"],
    &["remove", "delete", "free", "destroy"],
    &["spawn", "instantiate", "instance"],
    &["rumble", "vibrate", "vibration", "haptic"],
    &["gamepad", "joypad", "joystick", "controller"],
    &["click", "clicked", "press", "pressed"],
    &["sound", "audio"],
    &["speed", "velocity"],
    &["face", "look"],
    &["smooth", "smoothly", "interpolate", "lerp"],
    &["animate", "tween"],
    &["phone", "mobile", "handheld"],
    &["language", "languages", "locale", "translation"],
    &["function", "method", "callable"],
    &["distance", "length"],
    &["color", "colour"],
];

/// `word` with its related words, as `word|related|…`; `word` alone when
/// it has none.
pub fn with_related(word: &str) -> String {
    let mut alternatives = vec![word];
    for related in RELATED
        .iter()
        .filter(|g| g.contains(&word))
        .flat_map(|g| g.iter())
    {
        if !alternatives.contains(related) {
            alternatives.push(related);
        }
    }
    alternatives.join("|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn related_words_are_read_both_ways() {
        assert_eq!(with_related("quit"), "quit|exit|close");
        assert_eq!(with_related("exit"), "exit|quit|close");
        assert_eq!(
            with_related("display"),
            "display|show|visible|screen|viewport"
        );
        assert_eq!(with_related("node"), "node");
    }
}
