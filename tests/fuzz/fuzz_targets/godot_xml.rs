#![no_main]
// A class reference file from a doc dir or an engine's dump.
libfuzzer_sys::fuzz_target!(|xml: &str| {
    let _ = godot::parse::parse_class("Fuzz.xml", xml, "https://docs.godotengine.org/en/stable");
});
