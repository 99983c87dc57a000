//! What changed since the last `sync-out` of a folder, so an engine on
//! another machine sends back only that instead of the whole folder
//! (10,000 files: 915 ms a command before this, issue 41).
//!
//! After a sync the host remembers, per path, the container's `stat` of it
//! and this machine's. The next sync asks the container for its `stat`s
//! again (one `find … -exec stat` inside it, which any image with a shell,
//! `find` and `stat` can answer: GNU and BusyBox print the same format),
//! lists this machine's folder, and fetches only paths whose either side
//! differs from what was remembered; paths the container no longer has
//! are removed here. The container's answer is hostile input that decides
//! only which of its own files are fetched: what is fetched goes through
//! [`super::unpack`] as before. An answer that does not parse, is too big,
//! or too late means a whole sync, as does having nothing remembered.
//!
//! A path stamped at or after the moment its `stat` was taken could change
//! again unseen, so such a path is fetched again next time (git's "racily
//! clean" rule). The moment and the stamps are in nanoseconds where the
//! container's `stat` and file system give them (GNU and BusyBox print
//! them in `%y`; the moment is the stamp of a new `/proc/self`), else in
//! seconds, and then anything of the second before is fetched again.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;
use cap_std::fs::Dir;
use tokio_util::sync::CancellationToken;

use super::unpack;
use crate::platform;
use crate::podman;

/// What the container's `stat` says of a path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Stat {
    /// `st_mode`: type and permission bits.
    pub mode: u32,
    pub size: u64,
    pub mtime: i64,
    pub ctime: i64,
    /// The nanoseconds of each (0: not known).
    pub mtime_ns: u32,
    pub ctime_ns: u32,
    pub inode: u64,
}

impl Stat {
    pub fn is_dir(&self) -> bool {
        self.mode & 0o170000 == 0o040000
    }
}

/// The container's folder as its `stat`s say, taken at `now` (its clock).
pub struct Manifest {
    pub now: i64,
    /// Its nanoseconds, when the container's clock said.
    pub now_ns: Option<u32>,
    pub paths: HashMap<PathBuf, Stat>,
}

/// This machine's side of a path: what changes when anything writes it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Local {
    kind: u8,
    len: u64,
    modified: Option<std::time::SystemTime>,
    mode: u32,
}

/// Both sides of every path at the end of a sync.
pub struct Remembered {
    paths: HashMap<PathBuf, (Stat, Option<Local>)>,
    /// When the container's `stat`s were taken (its clock).
    taken: i64,
    taken_ns: Option<u32>,
}

/// What a sync has to do.
#[derive(Default, Debug)]
pub struct Plan {
    /// Files and links to fetch from the container.
    pub fetch: Vec<PathBuf>,
    /// Folders to make (or give their mode), parents first.
    pub dirs: Vec<(PathBuf, u32)>,
    /// What this machine has and the container does not.
    pub remove: Vec<PathBuf>,
    /// Links that changed there.
    pub links: usize,
}

/// Most bytes of `stat` lines taken (10,000 files are about 700 KB).
const MAX_MANIFEST_BYTES: usize = 32 << 20;
const MANIFEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Folders remembered at once; the oldest is forgotten past this.
pub(super) const REMEMBERED: usize = 32;

/// Who synced what into where: a memory belongs to one of these.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub engine: String,
    pub container: String,
    pub source: String,
    pub target: PathBuf,
    pub exclude: Vec<PathBuf>,
}

type Memories = Vec<(Key, Arc<Remembered>)>;
static MEMORY: Mutex<Memories> = Mutex::new(Vec::new());

pub fn recall(key: &Key) -> Option<Arc<Remembered>> {
    let memory = MEMORY.lock().expect("sync memory poisoned");
    memory
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, r)| r.clone())
}

/// Remember `remembered` for `key` (forgotten with `None`: after a sync
/// that failed half-way, nothing about the folder is known).
pub fn remember(key: Key, remembered: Option<Remembered>) {
    let mut memory = MEMORY.lock().expect("sync memory poisoned");
    memory.retain(|(k, _)| *k != key);
    if let Some(r) = remembered {
        if memory.len() >= REMEMBERED {
            memory.remove(0);
        }
        memory.push((key, Arc::new(r)));
    }
}

/// The script that prints the `stat` of everything in its `$1`.
const STAT_SCRIPT: &str = r#"{ stat -c '%Y %y' /proc/self/ 2>/dev/null || date +%s; } && exec find "$1" -xdev -exec stat -c '%f %s %Y %Z %i %y %z %n' {} +"#;

/// Ask the container for the `stat` of everything in `source`; `None`
/// when it cannot or does not answer in a form that parses.
pub async fn take(
    docker: &Docker,
    container: &str,
    source: &str,
    remote: Option<String>,
    cancel: &CancellationToken,
) -> Option<Manifest> {
    let spec = podman::exec::ExecSpec {
        argv: ["sh", "-c", STAT_SCRIPT, "sh", source]
            .map(String::from)
            .to_vec(),
        workdir: None,
        env: Vec::new(),
        stdin: None,
        user: None,
        timeout: MANIFEST_TIMEOUT,
        no_output_timeout: None,
        tail_bytes: MAX_MANIFEST_BYTES,
        remote,
        // `find` and `stat` leave nothing behind; an image whose do only
        // adds to what its container may run anyway, and the container
        // ends with its environment.
        sweep: false,
        then: None,
    };
    let outcome = podman::exec::exec(
        docker.clone(),
        container,
        spec,
        cancel,
        &podman::exec::Quiet,
    )
    .await
    .ok()?
    .outcome;
    if outcome.exit_code != Some(0) || outcome.tail.truncated() {
        return None;
    }
    let stdout: String = outcome
        .tail
        .chunks()
        .into_iter()
        .filter(|(stream, _)| *stream == timebox::Stream::Stdout)
        .map(|(_, text)| text)
        .collect();
    parse(&stdout, source)
}

/// The `stat`s of `source`, taken by a command's own sweep on another
/// machine's engine (so the sync that follows needs no exec of its own).
pub fn after_sweep(source: &str) -> podman::exec::Then {
    podman::exec::Then {
        script: STAT_SCRIPT,
        arg: source.to_string(),
        max_bytes: MAX_MANIFEST_BYTES,
        timeout: MANIFEST_TIMEOUT,
    }
}

/// The folder of `container` last synced out, whose `stat`s a command's
/// sweep can take on the way.
pub fn synced_source(engine: &str, container: &str) -> Option<String> {
    let memory = MEMORY.lock().expect("sync memory poisoned");
    memory
        .iter()
        .rev()
        .find(|(k, _)| k.engine == engine && k.container == container)
        .map(|(k, _)| k.source.clone())
}

/// The moment (`<seconds>`, or `<seconds> <%y>` with its nanoseconds),
/// then `<mode hex> <size> <mtime> <ctime> <inode> <%y> <%z> <path>` per
/// line, every path `source` or beneath it.
pub fn parse(text: &str, source: &str) -> Option<Manifest> {
    let mut lines = text.lines();
    let mut moment = lines.next()?.split(' ');
    let now = moment.next()?.trim().parse().ok()?;
    let now_ns = match (moment.next(), moment.next()) {
        (Some(_date), Some(time)) => Some(nanos(time)?),
        _ => None,
    };
    let mut paths = HashMap::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let mut fields = line.splitn(12, ' ');
        let mut next = || fields.next();
        let (mode, size, mtime, ctime, inode) = (next()?, next()?, next()?, next()?, next()?);
        let (_, mtime_ns, _) = (next()?, nanos(next()?)?, next()?);
        let (_, ctime_ns, _) = (next()?, nanos(next()?)?, next()?);
        let stat = Stat {
            mode: u32::from_str_radix(mode, 16).ok()?,
            size: size.parse().ok()?,
            mtime: mtime.parse().ok()?,
            ctime: ctime.parse().ok()?,
            inode: inode.parse().ok()?,
            mtime_ns,
            ctime_ns,
        };
        let path = next()?;
        // Text that was not UTF-8 cannot name a file to fetch.
        if path.contains('\u{FFFD}') {
            return None;
        }
        if path == source {
            continue;
        }
        let rel = Path::new(path.strip_prefix(source)?.strip_prefix('/')?);
        if rel.as_os_str().is_empty()
            || !rel.components().all(|c| matches!(c, Component::Normal(_)))
        {
            return None;
        }
        paths.insert(rel.to_path_buf(), stat);
    }
    Some(Manifest { now, now_ns, paths })
}

/// The nanoseconds of a `%y` time of day (`20:45:35.933727983`); 0 when
/// it has none.
fn nanos(time: &str) -> Option<u32> {
    let Some((_, fraction)) = time.split_once('.') else {
        return Some(0);
    };
    if fraction.is_empty() || fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    format!("{fraction:0<9}").parse().ok()
}

/// Everything beneath `root` but `exclude`, as this machine has it.
pub fn list_local(root: &Dir, exclude: &[PathBuf]) -> std::io::Result<HashMap<PathBuf, Local>> {
    let mut out = HashMap::new();
    unpack::walk(root, exclude, |rel, entry| {
        let local = local(&entry.metadata()?);
        let folder = local.kind == b'd';
        out.insert(rel.to_path_buf(), local);
        Ok(folder)
    })?;
    Ok(out)
}

pub fn local_of(root: &Dir, rel: &Path) -> Option<Local> {
    root.symlink_metadata(rel).ok().map(|m| local(&m))
}

fn local(m: &cap_std::fs::Metadata) -> Local {
    let t = m.file_type();
    Local {
        kind: if t.is_dir() {
            b'd'
        } else if t.is_symlink() {
            b'l'
        } else if t.is_file() {
            b'f'
        } else {
            b'o'
        },
        len: m.len(),
        modified: m.modified().ok().map(|t| t.into_std()),
        mode: platform::mode_of(m),
    }
}

impl Remembered {
    /// Both sides as they are after a sync: the container's as `manifest`
    /// said, this machine's as `local` lists it.
    pub fn new(manifest: Manifest, mut local: HashMap<PathBuf, Local>) -> Remembered {
        Remembered {
            taken: manifest.now,
            taken_ns: manifest.now_ns,
            paths: manifest
                .paths
                .into_iter()
                .map(|(p, stat)| {
                    let here = local.remove(&p);
                    (p, (stat, here))
                })
                .collect(),
        }
    }

    /// Whether a path stamped `seconds` (and `ns`) was stamped before its
    /// `stat` was taken, so that any later change changes its stamp.
    fn settled(&self, seconds: i64, ns: u32) -> bool {
        match self.taken_ns {
            Some(taken_ns) if ns != 0 => (seconds, ns) < (self.taken, taken_ns),
            // In seconds: the one before too, as the clocks' seconds may
            // not turn together.
            _ => seconds < self.taken - 1,
        }
    }

    /// What makes this machine's folder hold the container's again, given
    /// both sides now; paths beneath `exclude` were left out of both.
    pub fn plan(&self, now: &Manifest, local: &HashMap<PathBuf, Local>) -> Plan {
        let mut plan = Plan::default();
        for (path, stat) in &now.paths {
            let here = local.get(path).copied();
            let unchanged = match self.paths.get(path) {
                // A folder's own times change with what it holds; its
                // kind and mode are all that is made here.
                Some((was, _)) if stat.is_dir() => {
                    was.mode == stat.mode && here.is_some_and(|h| h.kind == b'd')
                }
                Some((was, was_here)) => {
                    was == stat
                        && *was_here == here
                        && self.settled(was.mtime, was.mtime_ns)
                        && self.settled(was.ctime, was.ctime_ns)
                }
                None => false,
            };
            if unchanged {
                continue;
            }
            if stat.is_dir() {
                plan.dirs.push((path.clone(), stat.mode & 0o777));
            } else if stat.mode & 0o170000 == 0o100000 {
                plan.fetch.push(path.clone());
            } else if stat.mode & 0o170000 == 0o120000 {
                plan.links += 1;
            } else if here.is_some() {
                // Devices, pipes, sockets: not kept here; nor is what was
                // in their place.
                plan.remove.push(path.clone());
            }
        }
        for path in local.keys() {
            if !now.paths.contains_key(path) {
                plan.remove.push(path.clone());
            }
        }
        // Parents before children; a removed folder takes what it holds.
        plan.dirs.sort();
        plan.remove.sort();
        plan.remove.dedup_by(|b, a| b.starts_with(&*a));
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "/workdir";

    /// `now`, then lines of `<mode> <size> <mtime> <ctime> <inode> <path>`
    /// (times in seconds only), made into what `stat` prints.
    fn manifest(now: &str, lines: &[&str]) -> Manifest {
        parse(&listing(now, lines), SOURCE).expect("parses")
    }

    fn listing(now: &str, lines: &[&str]) -> String {
        let day = "2026-11-26 10:00:00 +0000";
        let lines: Vec<String> = ["41ed 4096 1 1 2 /workdir"]
            .iter()
            .chain(lines)
            .map(|l| {
                let (stat, path) = l.split_at(l.find(" /").unwrap());
                let mut f: Vec<&str> = stat.split(' ').collect();
                // `<mtime>.<ns>` gives the nanoseconds of both times.
                let (seconds, ns) = f[2].split_once('.').unwrap_or((f[2], ""));
                let at = if ns.is_empty() {
                    day.to_string()
                } else {
                    day.replace(" +", &format!(".{ns} +"))
                };
                f[2] = seconds;
                format!("{} {at} {at}{path}", f.join(" "))
            })
            .collect();
        format!("{now}\n{}\n", lines.join("\n"))
    }

    fn dir() -> (tempfile::TempDir, Dir) {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open_ambient_dir(t.path(), cap_std::ambient_authority()).unwrap();
        (t, d)
    }

    #[test]
    fn what_does_not_parse_means_a_whole_sync() {
        let at = "2026-11-26 10:00:00.5 +0000";
        for bad in [
            String::new(),
            "soon\n".into(),
            "100 2026-11-26 10:00:00.x +0000\n".into(),
            "100\n81a4 3 1 1 5\n".into(),
            format!("100\n81a4 3 1 1 5 {at} {at}\n"),
            format!("100\n81a4 x 1 1 5 {at} {at} /workdir/a\n"),
            format!("100\n81a4 3 1 1 5 2026-11-26 10:00:00.1234567890 +0000 {at} /workdir/a\n"),
            format!("100\n81a4 3 1 1 5 {at} {at} /elsewhere/a\n"),
            format!("100\n81a4 3 1 1 5 {at} {at} /workdir/../etc/passwd\n"),
            format!("100\n81a4 3 1 1 5 {at} {at} /workdirx/a\n"),
            format!("100\n81a4 3 1 1 5 {at} {at} /workdir/\u{FFFD}\n"),
        ] {
            assert!(parse(&bad, SOURCE).is_none(), "{bad:?}");
        }
        let m = manifest("100", &["81a4 3 1 1 5 /workdir/a b"]);
        assert_eq!(
            m.paths.len(),
            1,
            "the folder itself is not one of its paths"
        );
        assert!(
            m.paths.contains_key(Path::new("a b")),
            "spaces belong to the name"
        );
    }

    #[test]
    fn only_what_changed_on_either_side_is_fetched() {
        let (_t, root) = dir();
        root.write("same", "x").unwrap();
        root.write("edited_here", "x").unwrap();
        root.write("gone_there", "x").unwrap();
        root.create_dir("d").unwrap();
        let before = manifest(
            "100",
            &[
                "81a4 1 50 50 10 /workdir/same",
                "81a4 1 50 50 11 /workdir/edited_here",
                "81a4 1 50 50 12 /workdir/gone_there",
                "81a4 1 50 50 13 /workdir/changed_there",
                "41ed 4096 50 99 14 /workdir/d",
            ],
        );
        let remembered = Remembered::new(before, list_local(&root, &[]).unwrap());
        root.write("edited_here", "xy").unwrap();
        let now = manifest(
            "200",
            &[
                "81a4 1 50 50 10 /workdir/same",
                "81a4 1 50 50 11 /workdir/edited_here",
                "81a4 2 150 150 13 /workdir/changed_there",
                "81a4 2 150 150 15 /workdir/new_there",
                "41ed 4096 150 150 14 /workdir/d",
                "1b6 0 150 150 16 /workdir/fifo",
            ],
        );
        let mut plan = remembered.plan(&now, &list_local(&root, &[]).unwrap());
        plan.fetch.sort();
        assert_eq!(
            plan.fetch,
            ["changed_there", "edited_here", "new_there"].map(PathBuf::from)
        );
        assert!(
            plan.dirs.is_empty(),
            "a folder's own times do not matter: {plan:?}"
        );
        assert_eq!(plan.remove, [PathBuf::from("gone_there")]);
    }

    #[test]
    fn what_changed_in_the_second_it_was_seen_is_fetched_again() {
        let (_t, root) = dir();
        let seen = || {
            manifest(
                "100",
                &[
                    "81a4 1 100 100 10 /workdir/racy",
                    "81a4 1 90 90 11 /workdir/old",
                ],
            )
        };
        let remembered = Remembered::new(seen(), list_local(&root, &[]).unwrap());
        let plan = remembered.plan(&seen(), &list_local(&root, &[]).unwrap());
        assert_eq!(plan.fetch, [PathBuf::from("racy")]);
    }

    /// With nanoseconds on both sides only what was stamped at or after
    /// the moment the `stat`s were taken is fetched again, and a second
    /// write in the same second shows.
    #[test]
    fn nanoseconds_narrow_what_is_fetched_again() {
        let (_t, root) = dir();
        let now = "100 2026-11-26 10:00:00.500000000 +0000";
        let seen = |rewritten: &str| {
            manifest(
                now,
                &[
                    "81a4 1 100.400000000 100 10 /workdir/before",
                    "81a4 1 100.500000000 100 11 /workdir/at",
                    &format!("81a4 1 {rewritten} 100 12 /workdir/rewritten"),
                    "81a4 1 100 100 13 /workdir/no_ns",
                ],
            )
        };
        let m = seen("100.100000000");
        assert_eq!(m.now_ns, Some(500_000_000));
        assert_eq!(m.paths[Path::new("before")].mtime_ns, 400_000_000);
        let remembered = Remembered::new(m, list_local(&root, &[]).unwrap());
        let mut plan = remembered.plan(&seen("100.100000000"), &list_local(&root, &[]).unwrap());
        plan.fetch.sort();
        assert_eq!(plan.fetch, ["at", "no_ns"].map(PathBuf::from));
        let plan = remembered.plan(&seen("100.200000000"), &list_local(&root, &[]).unwrap());
        assert!(plan.fetch.contains(&PathBuf::from("rewritten")), "{plan:?}");
    }

    #[test]
    fn a_removed_folder_takes_what_it_holds_and_excluded_paths_are_not_seen() {
        let (_t, root) = dir();
        root.create_dir_all("gone/deep").unwrap();
        root.write("gone/deep/f", "x").unwrap();
        root.create_dir_all(".git").unwrap();
        root.write(".git/config", "x").unwrap();
        let local = list_local(&root, &[]).unwrap();
        assert!(!local.keys().any(|p| p.starts_with(".git")), "{local:?}");
        let empty = manifest("100", &[]);
        let plan = Remembered::new(manifest("100", &[]), HashMap::new()).plan(&empty, &local);
        assert_eq!(plan.remove, [PathBuf::from("gone")]);
    }
}
