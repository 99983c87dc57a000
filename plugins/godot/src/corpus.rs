//! The doc dir and the index built from it: where the XML is, whether the
//! saved index still matches it, and the documents that go into it.
//!
//! Every reference served (one per Godot version, [`DocDir::served`]) has
//! an index of its own in the host's store, `godot-<version>`: one document
//! per class and one per symbol. An index's version label is a fingerprint
//! of the XML files (path, size, mtime) plus [`FORMAT`], so unchanged docs
//! are never parsed again and a plugin that indexes differently rebuilds.
//! A 4.x index also holds the manual's sections when `GODOT_MANUAL_DIR`
//! names a godot-docs checkout ([`crate::manual`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use plugin_sdk::ToolError;
use plugin_sdk::index::{self, IndexInfo};
use plugin_sdk::log::{Level, log};

use crate::documents::{Documents, FORMAT, Priors, add_manual, add_passages, schema};
use crate::engine;
use crate::links::{Links, mentions, passages};
use crate::manual::{self, Section};
use crate::model::ClassDoc;
use crate::parse::parse_class;
use crate::source::Source;
use crate::version::{
    class_version, docs_url, major_minor, matches_version, project_version, version_key,
};

/// One reference served, checked, and where it came from.
pub struct DocDir {
    pub path: PathBuf,
    /// For the log: `GODOT_DOC_DIR`, the workspace's `doc/`, or the engine.
    pub source: String,
    /// `4.6`, `3.6`, ...: what the `version` arguments and URIs name.
    pub version: String,
}

impl DocDir {
    fn new(path: PathBuf, source: String, full_version: Option<&str>) -> DocDir {
        let version = match full_version {
            Some(v) => major_minor(v),
            None => xml_version(&path),
        };
        DocDir {
            path,
            source,
            version,
        }
    }

    /// The index of this reference in the host's index store.
    pub fn index(&self) -> String {
        format!("godot-{}", self.version)
    }

    /// What is served now, newest version first (the default): the dirs
    /// in `GODOT_DOC_DIR` (a list as PATH is, relative to the workspace)
    /// when set; else the workspace's `doc/` when it holds `classes/`; else
    /// the references of the Godot engines on PATH ([`engine`]), dumped
    /// once. With `look_for_engines` false, the dumps made before are
    /// served as they are (a call never runs an engine when one was found
    /// before; `refresh` looks again).
    pub fn served(look_for_engines: bool) -> Result<Vec<DocDir>, ToolError> {
        let workspace = PathBuf::from(plugin_sdk::workspace());
        let configured = std::env::var("GODOT_DOC_DIR").unwrap_or_default();
        let mut found = Vec::new();
        if !configured.is_empty() {
            for dir in plugin_sdk::split_paths(&configured) {
                let path = plugin_sdk::in_workspace(&dir);
                check(&path)?;
                found.push(DocDir::new(path, "GODOT_DOC_DIR".into(), None));
            }
        } else if workspace.join("doc/classes").is_dir() {
            found.push(DocDir::new(
                workspace.join("doc"),
                "the workspace's doc/".into(),
                None,
            ));
        } else {
            let dumps = engine::dumps();
            if look_for_engines || dumps.is_empty() {
                found = from_engines(&workspace.join("doc"))?;
            } else {
                for dump in dumps {
                    let version = dump
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned();
                    let how = engine::Made::of(&dump).map_or("made", engine::Made::says);
                    let source = format!("an engine's reference {how} before ({version})");
                    found.push(DocDir::new(dump, source, Some(&version)));
                }
            }
        }
        // Newest first; of two with one version, the first listed.
        found.sort_by_key(|d| std::cmp::Reverse(version_key(&d.version)));
        found.dedup_by(|later, first| {
            let same = later.version == first.version;
            if same {
                log(
                    Level::Warn,
                    &format!(
                        "{} is Godot {} as {} is: only the first is served",
                        later.path.display(),
                        later.version,
                        first.path.display()
                    ),
                );
            }
            same
        });
        // The workspace's own project picks the default (its Godot version).
        if let Some(wanted) = std::fs::read_to_string(workspace.join("project.godot"))
            .ok()
            .and_then(|text| project_version(&text))
            && let Some(at) = found
                .iter()
                .position(|d| matches_version(&d.version, &wanted))
        {
            let project = found.remove(at);
            found.insert(0, project);
        }
        Ok(found)
    }

    /// Why class `name` is not in the index although its file is here:
    /// the file's parse error (file:line:column), if it does not parse.
    pub fn unparsed(&self, name: &str) -> Option<String> {
        let plain = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '@');
        if !plain {
            return None;
        }
        let file = self
            .class_files()
            .into_iter()
            .find(|f| f.path.file_stem().and_then(|s| s.to_str()) == Some(name))?;
        let shown = file
            .path
            .strip_prefix(&self.path)
            .unwrap_or(&file.path)
            .to_string_lossy()
            .into_owned();
        let xml = std::fs::read_to_string(&file.path).ok()?;
        parse_class(&shown, &xml, &docs_url(&xml))
            .err()
            .map(|e| e.to_string())
    }

    /// `classes/*.xml` and the module docs, sorted.
    fn class_files(&self) -> Vec<Source> {
        let mut classes = xml_in(&self.path.join("classes"));
        for module in subdirs(&self.path.join("modules")) {
            classes.extend(xml_in(&module));
            classes.extend(xml_in(&module.join("doc_classes")));
        }
        classes.sort_by(|a, b| a.path.cmp(&b.path));
        classes
    }

    /// What this reference's index is built from, listed once.
    pub fn sources(&self) -> Sources {
        let classes = self.class_files();
        // The manual (godot-docs) describes Godot 4: only a 4.x reference
        // has it.
        let manual = manual_dir()
            .filter(|_| self.version.starts_with('4'))
            .map(|dir| {
                let pages = manual::pages(&dir);
                (dir, pages)
            });
        Sources { classes, manual }
    }
}

/// The files a reference's index is built from.
pub struct Sources {
    /// `classes/*.xml` and the module docs (`modules/<m>/*.xml` or
    /// `modules/<m>/doc_classes/*.xml`), sorted.
    classes: Vec<Source>,
    /// The manual's folder and its pages, when it is indexed with them.
    manual: Option<(PathBuf, Vec<Source>)>,
}

impl Sources {
    fn pages(&self) -> &[Source] {
        self.manual.as_ref().map_or(&[], |(_, pages)| pages)
    }

    /// The version label the index should carry for these files.
    pub fn fingerprint(&self) -> String {
        let mut hash = Fnv::default();
        for file in self.classes.iter().chain(self.pages()) {
            hash.write(file.path.to_string_lossy().as_bytes());
            hash.write(&file.len.to_le_bytes());
            hash.write(&file.mtime_ns.to_le_bytes());
        }
        format!(
            "{FORMAT};files={};manual={};{:016x}",
            self.classes.len(),
            self.pages().len(),
            hash.0
        )
    }
}

/// The manual's folder (`GODOT_MANUAL_DIR`, a godot-docs checkout;
/// relative to the workspace), when set.
pub fn manual_dir() -> Option<PathBuf> {
    std::env::var("GODOT_MANUAL_DIR")
        .ok()
        .filter(|d| !d.trim().is_empty())
        .map(|d| plugin_sdk::in_workspace(&d))
}

/// Every engine found, its reference dumped if it was not before.
fn from_engines(in_workspace: &Path) -> Result<Vec<DocDir>, ToolError> {
    let (engines, tried) = engine::find_all();
    if engines.is_empty() {
        return Err(config_error(format!(
            "no Godot class reference: GODOT_DOC_DIR is not set, {} has no `classes/`, and no Godot engine \
             answered ({}). Either put your Godot editor on PATH or name it (`GODOT_BIN=/path/to/godot host \
             serve --stdio`; on Debian/Ubuntu `apt-get install godot3-server` gives Godot 3), and its own \
             reference is dumped once and served; or set GODOT_DOC_DIR to the `doc` folder of a Godot source \
             tree (`git clone https://github.com/godotengine/godot` then `GODOT_DOC_DIR=$PWD/godot/doc`)",
            in_workspace.display(),
            tried.join("; ")
        )));
    }
    // One reference per version, from the first engine of that version
    // that can dump it: an editor that cannot start without a display must
    // not hide a server build of the same version.
    let (mut dirs, mut failed) = (Vec::<(String, DocDir)>::new(), Vec::new());
    for engine in &engines {
        if dirs.iter().any(|(version, _)| *version == engine.version) {
            continue;
        }
        match engine::docs(engine) {
            Ok((path, dumped, made)) => {
                let when = if dumped { "just now" } else { "before" };
                let source = format!(
                    "engine `{}` {} (reference {}, {when})",
                    engine.program,
                    engine.version,
                    made.says()
                );
                if made == engine::Made::Doctool {
                    log(
                        Level::Warn,
                        &format!("Godot {}: {}", engine.version, made.says()),
                    );
                }
                let dir = DocDir::new(path, source, Some(&engine.version));
                dirs.push((engine.version.clone(), dir));
            }
            Err(e) => {
                log(
                    Level::Warn,
                    &format!(
                        "Godot engine `{}` is skipped: {}",
                        engine.program, e.message
                    ),
                );
                failed.push(e.message);
            }
        }
    }
    if dirs.is_empty() {
        return Err(config_error(format!(
            "no Godot engine found could dump its class reference: {}. Name one that can \
             (`GODOT_BIN=/path/to/godot`; Godot 3 editors need a display, `godot3-server` does not), \
             or set GODOT_DOC_DIR to the `doc` folder of a Godot source tree",
            failed.join("; ")
        )));
    }
    Ok(dirs.into_iter().map(|(_, dir)| dir).collect())
}

/// The version a doc dir's files carry: Godot 3 writes it on every class
/// (`version="3.6"`); Godot 4's files carry none, so they are `4`.
fn xml_version(dir: &Path) -> String {
    // Every call asks this: read the head of one file (the class tag is on
    // its second line), and list the folder only when the usual ones are
    // missing.
    let classes = dir.join("classes");
    let head = |path: PathBuf| -> Option<String> {
        use std::io::Read;
        let mut head = Vec::new();
        std::fs::File::open(path)
            .ok()?
            .take(4096)
            .read_to_end(&mut head)
            .ok()?;
        Some(String::from_utf8_lossy(&head).into_owned())
    };
    let sample = ["Object.xml", "Node.xml"]
        .iter()
        .map(|f| classes.join(f))
        .chain(
            std::iter::once_with(|| xml_in(&classes).into_iter().next().map(|s| s.path)).flatten(),
        )
        .find_map(head)
        .unwrap_or_default();
    match class_version(&sample) {
        Some(version) => major_minor(version),
        None => "4".into(),
    }
}

/// A configured doc dir must exist and hold `classes/`.
fn check(path: &Path) -> Result<(), ToolError> {
    let hint = "set GODOT_DOC_DIR to the `doc` folder of a Godot source tree (the folder that holds `classes/`), \
                e.g. `GODOT_DOC_DIR=$HOME/godot/doc host serve --stdio`, or leave it unset to use a Godot engine on PATH";
    if !path.is_dir() {
        return Err(config_error(format!(
            "the Godot doc dir {} does not exist (or is not readable): {hint}",
            path.display()
        )));
    }
    if !path.join("classes").is_dir() {
        return Err(config_error(format!(
            "the Godot doc dir {} has no `classes/` folder: {hint}",
            path.display()
        )));
    }
    Ok(())
}

fn config_error(message: String) -> ToolError {
    ToolError::new("CONFIG_ERROR", message)
}

fn xml_in(dir: &Path) -> Vec<Source> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".xml"))
        .filter_map(|e| Source::of(&e))
        .collect()
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_type()
                .is_ok_and(|t| t.is_dir() || (t.is_symlink() && e.path().is_dir()))
        })
        .map(|e| e.path())
        .collect()
}

/// FNV-1a: a stable hash for the fingerprint (std's hasher may change).
struct Fnv(u64);
impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}
impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
}

/// The reference of `version` (the newest when `None`), its index built
/// first when there is none or it was built by a plugin that indexes
/// differently (whether the XML changed is `refresh`'s job: a call does
/// not stat a thousand files); how many references are served; and
/// whether its index holds the manual.
pub fn ensure(version: Option<&str>) -> Result<(DocDir, usize, bool), ToolError> {
    let mut served = DocDir::served(false)?;
    let count = served.len();
    let at = match version.map(str::trim).filter(|v| !v.is_empty()) {
        None => 0,
        Some(wanted) => served
            .iter()
            .position(|d| matches_version(&d.version, wanted))
            .ok_or_else(|| {
                let versions: Vec<String> = served.iter().map(|d| d.version.clone()).collect();
                // What was asked is echoed only as far as a version goes
                // (issue 54, item 13: 5,000 characters came back whole).
                let shown: String = wanted.chars().take(32).collect();
                let shown = if shown.len() < wanted.len() {
                    format!("`{shown}…` ({} characters)", wanted.chars().count())
                } else {
                    format!("`{shown}`")
                };
                ToolError::new(
                    "NOT_FOUND",
                    format!(
                        "Godot {shown} is not served; served: {} (godot.versions lists them with where \
                         they come from; GODOT_DOC_DIR takes several doc dirs, separated by `:`)",
                        versions.join(", ")
                    ),
                )
                .with_details(serde_json::json!({ "suggestions": versions }))
            })?,
    };
    let docs = served.swap_remove(at);
    let label = match index::open(&docs.index())? {
        Some(info) if info.version.starts_with(&format!("{FORMAT};")) => info.version,
        _ => {
            let sources = docs.sources();
            let version = sources.fingerprint();
            build(&docs, &sources, &version)?;
            version
        }
    };
    let manual = !label.contains(";manual=0;");
    Ok((docs, count, manual))
}

/// Rebuild each reference whose XML no longer matches its saved index;
/// the doc dirs to watch.
pub fn refresh() -> Result<Vec<DocDir>, ToolError> {
    let served = DocDir::served(true)?;
    for docs in &served {
        let sources = docs.sources();
        let version = sources.fingerprint();
        match index::open(&docs.index())? {
            Some(info) if info.version == version => {
                log(
                    Level::Info,
                    &format!(
                        "index is up to date for Godot {}: {} documents, {} bytes, docs {} from {}",
                        docs.version,
                        info.documents,
                        info.size_bytes,
                        docs.path.display(),
                        docs.source
                    ),
                );
            }
            _ => {
                build(docs, &sources, &version)?;
            }
        }
    }
    Ok(served)
}

fn build(docs: &DocDir, sources: &Sources, version: &str) -> Result<IndexInfo, ToolError> {
    let name = docs.index();
    let Some(builder) = index::build(&name, &schema(), version)? else {
        // Someone else built this very version while we waited.
        return index::open(&name)?.ok_or_else(|| {
            ToolError::new("INTERNAL", "the index vanished right after it was built")
        });
    };
    let files = read_all(docs, &sources.classes);
    let priors = Priors::new(&files);
    let mut out = Documents::new(&builder);
    let (classes, sections) = match &sources.manual {
        // What the manual says of an entry joins its document, and its
        // names resolve across every class: all are parsed first.
        Some((dir, pages)) => {
            let classes: Vec<ClassDoc> = files.into_iter().filter_map(parse).collect();
            let links = Links::new(&classes);
            let sections = read_manual(&links, dir, pages);
            let passages = passages(&links, &sections);
            let mentions = mentions(&passages);
            for class in &classes {
                out.class(class, priors.of(&class.name), &mentions)?;
            }
            add_passages(&mut out, &passages)?;
            (classes, sections)
        }
        // Else each class goes to the index as soon as it is parsed: the
        // host indexes it while the next one is parsed.
        None => {
            let mut classes = Vec::with_capacity(files.len());
            for class in files.into_iter().filter_map(parse) {
                out.class(&class, priors.of(&class.name), &HashMap::new())?;
                classes.push(class);
            }
            (classes, Vec::new())
        }
    };
    if classes.is_empty() {
        return Err(config_error(format!(
            "no class could be read from {}: see the log for the files and positions",
            docs.path.display()
        )));
    }
    add_manual(&mut out, &sections)?;
    out.flush()?;
    let info = builder.commit()?;
    log(
        Level::Info,
        &format!(
            "index built for Godot {}: {} classes, {} manual sections, {} documents, {} bytes, docs {} from {}",
            docs.version,
            classes.len(),
            sections.len(),
            info.documents,
            info.size_bytes,
            docs.path.display(),
            docs.source
        ),
    );
    Ok(info)
}

/// The manual's sections, each with its links resolved against the
/// reference. A page that cannot be read is logged and left out.
fn read_manual(links: &Links, dir: &Path, pages: &[Source]) -> Vec<(Section, Vec<String>)> {
    let mut sections = Vec::new();
    for file in pages.iter().map(|p| &p.path) {
        let page = file
            .strip_prefix(dir)
            .unwrap_or(file)
            .with_extension("")
            .to_string_lossy()
            .replace('\\', "/");
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => {
                log(
                    Level::Error,
                    &format!("manual page {page}: cannot read: {e}"),
                );
                continue;
            }
        };
        for section in manual::parse(&page, &text) {
            let resolved = links.resolve(&section.links, &links.context(&section.links));
            sections.push((section, resolved));
        }
    }
    sections
}

/// Every class file's text, with the path shown in the log; a file that
/// cannot be read is logged and left out.
fn read_all(docs: &DocDir, files: &[Source]) -> Vec<(String, String)> {
    let mut texts = Vec::with_capacity(files.len());
    for file in files.iter().map(|f| &f.path) {
        let shown = file
            .strip_prefix(&docs.path)
            .unwrap_or(file)
            .to_string_lossy()
            .into_owned();
        match std::fs::read_to_string(file) {
            Ok(xml) => texts.push((shown, xml)),
            Err(e) => log(Level::Error, &format!("{shown}: cannot read: {e}")),
        }
    }
    texts
}

/// One class file, its text let go once parsed; one that fails is logged
/// (file:line:column) and left out, so one bad file never hides the rest.
fn parse((shown, xml): (String, String)) -> Option<ClassDoc> {
    parse_class(&shown, &xml, &docs_url(&xml))
        .map_err(|e| {
            log(
                Level::Error,
                &format!("skipping a class file that does not parse: {e}"),
            )
        })
        .ok()
}
