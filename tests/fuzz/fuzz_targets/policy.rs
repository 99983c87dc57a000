#![no_main]
// A user's config file.
libfuzzer_sys::fuzz_target!(|text: &str| host::fuzzing::policy(text));
