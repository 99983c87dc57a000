//! `host list tools | head`, `cofer list --json | head`: a reader that
//! stops early ends the output with a broken pipe, which `println!` turns
//! into a panic and a backtrace (Rust ignores SIGPIPE). Both command-line
//! tools end there as a Unix tool does instead: exit 141, saying nothing.

/// Make a failed print to a reader that has gone (`Broken pipe`, or
/// `os error 232` on Windows) end the process quietly with 141; every
/// other panic is reported as before.
pub fn quiet_when_the_reader_leaves() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let said = info.payload_as_str().unwrap_or_default();
        let gone = said.contains("Broken pipe") || said.contains("os error 232");
        if said.starts_with("failed printing to stdout") && gone {
            std::process::exit(141);
        }
        default(info)
    }));
}
