//! Docs from the user's own engines: with no doc dir configured, find
//! every Godot (`GODOT_BIN`, else `godot`, `godot4`, `godot3`,
//! `godot3-server` on PATH), write each one's class reference once into
//! the plugin's cache under the engine's `--version` (read out of its
//! binary, [`crate::binary`]; else dumped with `--doctool`, which leaves
//! the descriptions out), and serve those. A dump has the layout of a source tree's `doc/`
//! (`classes/`, `modules/<m>/doc_classes/`).

use std::path::{Path, PathBuf};

use plugin_sdk::ToolError;
use plugin_sdk::process::{self, RunRequest, Status};

/// The programs tried, in order, after `GODOT_BIN` (the policy's
/// `process.programs` lists the same).
const CANDIDATES: &[&str] = &["godot", "godot4", "godot3", "godot3-server"];
/// `--doctool` of Godot 3.2 takes about 1.3 s here; 4.x more.
const DUMP_TIMEOUT_MS: u64 = 300_000;
/// `--version` answers in well under a second: one that takes longer is
/// given up on (a wrapper waiting for a display, a hung build), and
/// remembered ([`Probes`]), so it costs no start after the first.
const VERSION_TIMEOUT_MS: u64 = 5_000;
/// How much of a binary tells it from another build, for [`Probes`].
const FINGERPRINT_BYTES: u64 = 256 << 10;

/// An engine that answered `--version`.
pub struct Engine {
    pub program: String,
    /// As it printed it, e.g. `3.2.3.stable.custom_build`.
    pub version: String,
}

impl Engine {
    pub fn major(&self) -> u32 {
        self.version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0)
    }
}

/// Where dumps live: `<plugin cache>/engine-docs` (the policy's fs.write).
pub fn dumps_dir() -> Option<PathBuf> {
    plugin_sdk::cache_dir().map(|c| PathBuf::from(c).join("engine-docs"))
}

/// The dumps made so far (by this host or an earlier one), one doc dir
/// each: what is served between refreshes, without running an engine.
pub fn dumps() -> Vec<PathBuf> {
    let Some(Ok(entries)) = dumps_dir().map(std::fs::read_dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        // Staging dirs start with a dot.
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .filter(|p| p.join("classes").is_dir())
        .collect();
    found.sort();
    found
}

/// Every engine that answers, in the order tried (two may carry one
/// version: Debian's `godot3` editor and `godot3-server`), and what each
/// of the others said. An engine found but unusable is logged once per
/// build; a candidate that is not installed is not.
pub fn find_all() -> (Vec<Engine>, Vec<String>) {
    let configured = std::env::var("GODOT_BIN").ok().filter(|b| !b.is_empty());
    let candidates: Vec<String> = match configured {
        Some(bin) => vec![bin],
        None => CANDIDATES.iter().map(|c| c.to_string()).collect(),
    };
    let cwd = dumps_dir().map_or_else(plugin_sdk::workspace, |d| d.to_string_lossy().into());
    let mut probes = Probes::read();
    let (mut found, mut tried) = (Vec::new(), Vec::new());
    for program in candidates {
        let Some(fingerprint) = fingerprint(&program) else {
            tried.push(format!("`{program}`: not found"));
            continue;
        };
        let answer = match probes.known(&program, &fingerprint) {
            Some(answer) => answer,
            None => {
                let answer = version_of(&program, &cwd);
                if let Err(why) = &answer {
                    plugin_sdk::log::log(
                        plugin_sdk::log::Level::Warn,
                        &format!("Godot engine `{program}` is skipped: {why}"),
                    );
                }
                probes.remember(&program, fingerprint, &answer);
                answer
            }
        };
        match answer {
            Ok(version) => found.push(Engine { program, version }),
            Err(why) => tried.push(format!("`{program}`: {why}")),
        }
    }
    probes.write();
    (found, tried)
}

/// What `program --version` says: its version, or why there is none.
fn version_of(program: &str, cwd: &str) -> Result<String, String> {
    let request = RunRequest::new(program, cwd)
        .args(["--version"])
        .timeout_ms(VERSION_TIMEOUT_MS)
        .no_output_timeout_ms(VERSION_TIMEOUT_MS)
        .tail_bytes(4096);
    match process::run(&request) {
        // Godot 3 prints its version and exits with 255.
        Ok(result) if result.status == Status::Exited => {
            let (stdout, _) = result.streams();
            stdout
                .lines()
                .map(str::trim)
                .find(|l| looks_like_version(l))
                .map(str::to_string)
                .ok_or_else(|| "`--version` printed no version".to_string())
        }
        Ok(result) if matches!(result.status, Status::Timeout | Status::NoOutput) => Err(format!(
            "`--version` gave no answer within {} s",
            VERSION_TIMEOUT_MS / 1000
        )),
        Ok(result) => Err(result
            .error
            .unwrap_or_else(|| format!("`--version` ended: {:?}", result.status))),
        Err(e) => Err(ToolError::from(e).message),
    }
}

/// Which build a program is, by a checksum of its first bytes; none when
/// it is not there to be read (not installed, or not a program file).
fn fingerprint(program: &str) -> Option<String> {
    let head = process::read_program(program, 0, FINGERPRINT_BYTES).ok()?;
    let mut crc = flate2::Crc::new();
    crc.update(&head);
    Some(format!("{:08x}-{}", crc.sum(), head.len()))
}

/// What each engine build answered to `--version` before, kept beside the
/// dumps: a build is asked once, however many starts follow.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Probes {
    /// program → (fingerprint, version or why not).
    #[serde(default)]
    answers: std::collections::BTreeMap<String, (String, Result<String, String>)>,
    #[serde(skip)]
    changed: bool,
}

impl Probes {
    fn file() -> Option<PathBuf> {
        dumps_dir().map(|d| d.join("probes.json"))
    }

    fn read() -> Probes {
        Probes::file()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    fn known(&self, program: &str, fingerprint: &str) -> Option<Result<String, String>> {
        let (seen, answer) = self.answers.get(program)?;
        (seen == fingerprint).then(|| answer.clone())
    }

    fn remember(&mut self, program: &str, fingerprint: String, answer: &Result<String, String>) {
        self.answers
            .insert(program.to_string(), (fingerprint, answer.clone()));
        self.changed = true;
    }

    fn write(&self) {
        let (Some(file), true) = (Probes::file(), self.changed) else {
            return;
        };
        if let Some(dir) = file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(file, serde_json::to_string(self).expect("probes serialise"));
    }
}

fn looks_like_version(line: &str) -> bool {
    let mut parts = line.split('.');
    parts
        .next()
        .is_some_and(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && parts
            .next()
            .is_some_and(|p| p.chars().next().is_some_and(|c| c.is_ascii_digit()))
}

/// Where a dump says how it was made ([`Made`]); a dump without it was
/// made by an older plugin with `--doctool` and is made again.
const MADE_FILE: &str = "MADE";

/// How a dump was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// Read out of the engine binary: the full reference.
    Binary,
    /// `--doctool`: names and signatures, descriptions missing.
    Doctool,
}

impl Made {
    fn label(self) -> &'static str {
        match self {
            Made::Binary => "binary",
            Made::Doctool => "doctool",
        }
    }

    /// How the dump at `dir` was made, if it says.
    pub fn of(dir: &Path) -> Option<Made> {
        match std::fs::read_to_string(dir.join(MADE_FILE)).ok()?.trim() {
            "binary" => Some(Made::Binary),
            "doctool" => Some(Made::Doctool),
            _ => None,
        }
    }

    /// How a source line tells of it.
    pub fn says(self) -> &'static str {
        match self {
            Made::Binary => "read from the engine binary",
            Made::Doctool => {
                "dumped with --doctool: names and signatures only, descriptions missing (the binary \
                 carries no reference)"
            }
        }
    }
}

/// The engine's reference, made on first use: read out of its binary,
/// else dumped with `--doctool`. The doc dir to serve, whether it was made
/// just now, and how.
pub fn docs(engine: &Engine) -> Result<(PathBuf, bool, Made), ToolError> {
    let root = dumps_dir()
        .ok_or_else(|| ToolError::new("INTERNAL", "the host gave the plugin no cache directory"))?;
    let key: String = engine
        .version
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let done = root.join(&key);
    if done.join("classes").is_dir() {
        match Made::of(&done) {
            Some(made) => return Ok((done, false, made)),
            None => {
                let _ = std::fs::remove_dir_all(&done);
            }
        }
    }
    // Random, so two hosts dumping at once stage apart.
    let staging = root.join(format!(".{key}.{:016x}", plugin_sdk::random_u64()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| io_error(&staging, e))?;
    let made = match crate::binary::reference(&engine.program) {
        Ok(Some(classes)) if !classes.is_empty() => {
            write_classes(&staging, &classes).map(|()| Made::Binary)
        }
        found => {
            if let Err(why) = found {
                plugin_sdk::log::log(
                    plugin_sdk::log::Level::Warn,
                    &format!(
                        "the reference in `{}` could not be read: {why}",
                        engine.program
                    ),
                );
            }
            dump(engine, &staging).map(|()| Made::Doctool)
        }
    };
    let made = made.and_then(|made| {
        let doc = staging.join("doc");
        std::fs::write(doc.join(MADE_FILE), made.label()).map_err(|e| io_error(&doc, e))?;
        arrange(&staging, &done).map(|()| made)
    });
    let _ = std::fs::remove_dir_all(&staging);
    made.map(|made| (done, true, made))
}

/// The classes read from a binary, as a dump lays them out
/// (`doc/classes/<name>.xml`).
fn write_classes(staging: &Path, classes: &[crate::binary::ClassXml]) -> Result<(), ToolError> {
    let dir = staging.join("doc/classes");
    std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
    for class in classes {
        let file = dir.join(format!("{}.xml", class.name));
        std::fs::write(&file, &class.xml).map_err(|e| io_error(&file, e))?;
    }
    Ok(())
}

/// `<program> [--headless] --doctool <dir>`.
fn dump(engine: &Engine, dir: &Path) -> Result<(), ToolError> {
    let dir_text = dir.to_string_lossy().into_owned();
    let mut args = Vec::new();
    if engine.major() >= 4 {
        args.push("--headless".to_string());
    }
    args.extend(["--doctool".to_string(), dir_text.clone()]);
    let request = RunRequest::new(&engine.program, &dir_text)
        .args(args)
        .timeout_ms(DUMP_TIMEOUT_MS)
        .tail_bytes(8192);
    let result = process::run(&request)?;
    if result.status != Status::Exited || !dir.join("doc/classes").is_dir() {
        let (_, stderr) = result.streams();
        return Err(ToolError::new(
            "CONFIG_ERROR",
            format!(
                "`{} --doctool` did not dump the class reference ({}): {}",
                engine.program,
                plugin_sdk::exit_text(result.exit_code),
                stderr.trim()
            ),
        ));
    }
    Ok(())
}

/// A dump holds `doc/classes/` and `modules/<m>/doc_classes/` side by
/// side; the doc dir wants `classes/` and `modules/` together. Moved into
/// place by rename, so a reader sees all of it or none.
fn arrange(staging: &Path, done: &Path) -> Result<(), ToolError> {
    let doc = staging.join("doc");
    let modules = staging.join("modules");
    if modules.is_dir() {
        std::fs::rename(&modules, doc.join("modules")).map_err(|e| io_error(&modules, e))?;
    }
    match std::fs::rename(&doc, done) {
        Ok(()) => Ok(()),
        // Another host dumped the same version meanwhile.
        Err(_) if done.join("classes").is_dir() => Ok(()),
        Err(e) => Err(io_error(done, e)),
    }
}

fn io_error(path: &Path, e: std::io::Error) -> ToolError {
    ToolError::new("INTERNAL", format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_recognised() {
        assert!(looks_like_version("3.2.3.stable.custom_build"));
        assert!(looks_like_version("4.6.3.stable.official.f00"));
        assert!(!looks_like_version("Godot Engine v3.2"));
        assert!(!looks_like_version(""));
        let e = Engine {
            program: "godot".into(),
            version: "4.6.3.stable".into(),
        };
        assert_eq!(e.major(), 4);
    }
}
