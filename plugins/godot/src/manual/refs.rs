//! What a manual section refers to in the class reference: `:ref:`
//! targets (`class_X_method_y` is `X.y`), classes and calls written as
//! code, and chains of them through a dot.

/// `found` and the chains of names in `texts` that start at a class or a
/// call and go on through a dot (`Input.mouse_mode`,
/// `get_tree().paused`, `get_viewport().get_texture().get_image()`),
/// written with `()` after each call; resolved against the reference
/// when indexed.
pub(super) fn chains<'a>(found: &[String], texts: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out = found.to_vec();
    let mut seen: std::collections::HashSet<String> = out.iter().cloned().collect();
    let word_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    for text in texts {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if !word_byte(bytes[i])
                || (i > 0
                    && (word_byte(bytes[i - 1]) || bytes[i - 1] == b'.' || bytes[i - 1] == b'$'))
            {
                i += 1;
                continue;
            }
            let mut chain = String::new();
            let mut parts = 0;
            let mut j = i;
            loop {
                let start = j;
                while j < bytes.len() && word_byte(bytes[j]) {
                    j += 1;
                }
                if start == j {
                    break;
                }
                chain.push_str(&text[start..j]);
                parts += 1;
                if bytes.get(j) == Some(&b'(') {
                    // Skip the arguments, on this line.
                    let mut depth = 0;
                    while j < bytes.len() && bytes[j] != b'\n' {
                        match bytes[j] {
                            b'(' => depth += 1,
                            b')' => depth -= 1,
                            _ => {}
                        }
                        j += 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    chain.push_str("()");
                }
                if bytes.get(j) == Some(&b'.') && bytes.get(j + 1).is_some_and(|b| word_byte(*b)) {
                    chain.push('.');
                    j += 1;
                } else {
                    break;
                }
            }
            let head_class = text[i..].starts_with(|c: char| c.is_ascii_uppercase());
            let head_call = chain.split('.').next().is_some_and(|h| h.ends_with("()"));
            if parts > 1 && (head_class || head_call) && seen.insert(chain.clone()) {
                out.push(chain);
            }
            i = j.max(i + 1);
        }
    }
    out
}

/// The `Class` or `Class.member` a class reference anchor (past its
/// `class_`) stands for: `Node_private_method__process` is
/// `Node._process`, `Label_theme_font_font` is `Label.font` (a theme item
/// after its data type). The kind is the first one written, as class
/// names hold no lowercase word (`Object_method_get_property_list` is a
/// method).
pub(super) fn reference_anchor(target: &str) -> String {
    const KINDS: [&str; 7] = [
        "_private_method_",
        "_method_",
        "_property_",
        "_signal_",
        "_constant_",
        "_annotation_",
        "_theme_",
    ];
    let first = KINDS
        .iter()
        .filter_map(|kind| Some((target.find(kind)?, *kind)))
        .min_by_key(|(at, _)| *at);
    let Some((at, kind)) = first else {
        return target.to_string();
    };
    let member = &target[at + kind.len()..];
    // Godot's theme data types; `font_size` before the `font` it begins with.
    const THEME_TYPES: [&str; 6] = [
        "font_size_",
        "font_",
        "color_",
        "constant_",
        "icon_",
        "style_",
    ];
    let member = match kind {
        "_theme_" => THEME_TYPES
            .iter()
            .find_map(|t| member.strip_prefix(t))
            .unwrap_or(member),
        _ => member,
    };
    format!("{}.{member}", &target[..at])
}

/// What a section refers to: `:ref:` targets in the class reference
/// (`class_X`, `class_X_method_y`), and in literals and code, names that
/// look like classes (`CharacterBody2D`) and members called
/// (`is_on_floor()`). (Names reached through a dot or written alone in a
/// literal were tried as well: they linked more noise than answers.)
pub(super) fn links(prose: &str, code: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut add = |s: String| {
        if !s.is_empty() && seen.insert(s.clone()) {
            found.push(s);
        }
    };
    for target in prose
        .split(['<', '`'])
        .filter_map(|t| t.strip_prefix("class_"))
    {
        add(reference_anchor(
            target.split(['>', '`']).next().unwrap_or(""),
        ));
    }
    let literals = prose.split("``").skip(1).step_by(2);
    let word_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'@';
    for text in literals.chain(std::iter::once(code)) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if !word_byte(bytes[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && word_byte(bytes[i]) {
                i += 1;
            }
            // ASCII on both sides: these are character boundaries.
            let word = &text[start..i];
            let called = bytes.get(i) == Some(&b'(');
            let first = word.chars().next().unwrap_or(' ');
            let member = (first.is_ascii_lowercase() || first == '_')
                && word.len() > 3
                && !word.bytes().any(|b| b.is_ascii_uppercase());
            let class = first.is_ascii_uppercase() && word.chars().any(|c| c.is_ascii_lowercase());
            if class || (member && called) {
                add(word.to_string());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_anchors_name_classes_and_members() {
        for (anchor, name) in [
            ("CharacterBody2D", "CharacterBody2D"),
            ("@GlobalScope_method_lerp", "@GlobalScope.lerp"),
            (
                "Node_private_method__physics_process",
                "Node._physics_process",
            ),
            (
                "Object_method_get_property_list",
                "Object.get_property_list",
            ),
            (
                "Node_constant_NOTIFICATION_PARENTED",
                "Node.NOTIFICATION_PARENTED",
            ),
            ("Label_theme_font_font", "Label.font"),
            ("Label_theme_font_size_font_size", "Label.font_size"),
            (
                "Button_theme_color_font_hover_color",
                "Button.font_hover_color",
            ),
            ("Node_property_process_mode", "Node.process_mode"),
        ] {
            assert_eq!(reference_anchor(anchor), name, "{anchor}");
        }
    }

    #[test]
    fn chains_start_at_a_class_or_a_call() {
        let code = "get_tree().paused = true\nInput.mouse_mode = x\nvelocity.y = 1\n\
                    $Sprite.hide()\nvar t = get_viewport().get_texture().get_image()\n";
        assert_eq!(
            chains(&[], std::iter::once(code)),
            [
                "get_tree().paused",
                "Input.mouse_mode",
                "get_viewport().get_texture().get_image()"
            ]
        );
    }
}
