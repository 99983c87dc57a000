#![no_main]
// The archive a container's engine sends back (sync-out).
libfuzzer_sys::fuzz_target!(|archive: &[u8]| host::fuzzing::sync_archive(archive));
