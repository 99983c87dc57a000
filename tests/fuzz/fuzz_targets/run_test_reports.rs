#![no_main]
// What a test project's run writes: every report format run_test reads.
use run_test::results::{console, dart, gotest, jest, junit};

libfuzzer_sys::fuzz_target!(|text: &str| {
    let _ = console::libtest(text);
    let _ = console::pytest(text);
    let _ = console::node(text);
    let _ = console::jest(text);
    let _ = console::vitest(text);
    let _ = dart::read(text, "/repo");
    let _ = gotest::read(text, Some("example.com/m"), "/repo");
    let _ = gotest::module(text);
    let _ = gotest::console(text);
    let _ = jest::read(text, "/repo");
    for dialect in [junit::Dialect::Pytest, junit::Dialect::Node] {
        let _ = junit::read(text, dialect, "/repo");
    }
});
