#![no_main]
// A line on the host's stdin, whatever a client sends.
libfuzzer_sys::fuzz_target!(|line: &[u8]| host::fuzzing::jsonrpc_line(line));
