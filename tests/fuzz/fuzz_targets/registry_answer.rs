#![no_main]
// What a registry answers: a manifest, or an error's text.
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| host::fuzzing::registry_answer(bytes));
