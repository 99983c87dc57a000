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
use plugin_sdk::index::{self, Analyzer, Field, FieldType, IndexInfo, Schema};
use plugin_sdk::log::{Level, log};

use crate::bbcode::{first_sentence, prose_only, without_inline_code};
use crate::engine;
use crate::links::{Links, enums_of, mentions};
use crate::manual::{self, Section};
use crate::model::ClassDoc;
use crate::parse::{class_header, parse_class};
use crate::source::Source;
use crate::uri;

/// Bump when the documents change shape.
const FORMAT: &str = "godot-docs/18";
const BATCH: usize = 2000;

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

/// `4.6` of `4.6.3.stable.official`.
fn major_minor(version: &str) -> String {
    let label: String = version
        .split('.')
        .take(2)
        .take_while(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        .collect::<Vec<_>>()
        .join(".");
    if label.is_empty() {
        "unknown".into()
    } else {
        label
    }
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

/// The `version` attribute of a class file's `<class>` tag (Godot 3
/// writes one).
fn class_version(xml: &str) -> Option<&str> {
    let tag = xml
        .split_once("<class ")
        .and_then(|(_, rest)| rest.split_once('>'))
        .map_or("", |(tag, _)| tag);
    tag.split_once(" version=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(version, _)| version)
}

/// For ordering versions: `4.10` after `4.9`.
fn version_key(version: &str) -> Vec<u64> {
    version.split('.').map(|p| p.parse().unwrap_or(0)).collect()
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

/// The Godot version a `project.godot` is for: its `config/features`
/// version (`"4.3"`, Godot 4), else `3` for a Godot 3 file
/// (`config_version=4`) and `4` for a Godot 4 one (`config_version=5`).
fn project_version(text: &str) -> Option<String> {
    let value = |key: &str| {
        text.lines()
            .find_map(|line| {
                line.trim()
                    .strip_prefix(key)?
                    .trim_start()
                    .strip_prefix('=')
            })
            .map(str::trim)
    };
    let featured = value("config/features").and_then(|features| {
        features
            .split('"')
            .skip(1)
            .step_by(2)
            .find(|f| {
                f.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(str::to_string)
    });
    featured.or_else(|| match value("config_version")? {
        "4" => Some("3".into()),
        "5" => Some("4".into()),
        _ => None,
    })
}

/// `wanted` names `version`: the same, or more precise (`4.6.3`), or less
/// (`4` for `4.6`).
fn matches_version(version: &str, wanted: &str) -> bool {
    let wanted = wanted.trim_start_matches(['v', 'V']);
    version == wanted
        || wanted.starts_with(&format!("{version}."))
        || version.starts_with(&format!("{wanted}."))
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
            let mentions = mentions(&links, &sections);
            for class in &classes {
                out.class(class, priors.of(&class.name), &mentions)?;
            }
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

/// Documents for the index, added a batch at a time.
struct Documents<'a> {
    builder: &'a index::Builder,
    batch: Vec<Vec<(String, String)>>,
}

impl<'a> Documents<'a> {
    fn new(builder: &'a index::Builder) -> Self {
        Documents {
            builder,
            batch: Vec::with_capacity(BATCH),
        }
    }

    fn push(&mut self, document: Vec<(String, String)>) -> Result<(), ToolError> {
        self.batch.push(document);
        if self.batch.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ToolError> {
        self.builder.add(&std::mem::take(&mut self.batch))?;
        Ok(())
    }

    /// The class and its symbols, each with what the manual says of it.
    fn class(
        &mut self,
        class: &ClassDoc,
        prior: f64,
        mentions: &HashMap<String, String>,
    ) -> Result<(), ToolError> {
        let mentioned = |qname: String| mentions.get(&qname).map_or("", String::as_str);
        let own = mentioned(class.name.to_lowercase());
        self.push(class_document(class, prior, own))?;
        for symbol in class.symbols() {
            let qname = format!("{}.{}", class.name, symbol.name).to_lowercase();
            self.push(symbol_document(class, &symbol, prior, mentioned(qname)))?;
        }
        Ok(())
    }
}

/// How much each class's entries count before their words do: central
/// classes (many descendants, and the global scopes with the most
/// central) more, the editor's own less. Read from each file's `<class>`
/// tag, so that a class can be indexed before the rest are parsed.
struct Priors(HashMap<String, f64>);

impl Priors {
    fn new(files: &[(String, String)]) -> Priors {
        let heads: Vec<(String, Option<String>)> = files
            .iter()
            .filter_map(|(_, xml)| class_header(xml))
            .collect();
        let descendants = descendant_counts(&heads);
        let central = descendants.values().copied().max().unwrap_or(0);
        let priors = heads
            .iter()
            .map(|(name, _)| {
                let reach = if name.starts_with('@') {
                    central
                } else {
                    *descendants.get(name.as_str()).unwrap_or(&0)
                };
                // The editor's own API (plugins, settings) answers questions
                // about games only by accident: behind the rest on equal words.
                let audience = if name.starts_with("Editor") { 0.6 } else { 1.0 };
                let prior = audience * (1.0 + 0.08 * (1.0 + reach as f64).ln());
                (name.clone(), prior)
            })
            .collect();
        Priors(priors)
    }

    fn of(&self, class: &str) -> f64 {
        self.0.get(class).copied().unwrap_or(1.0)
    }
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

/// The manual's sections as documents.
fn add_manual(out: &mut Documents, sections: &[(Section, Vec<String>)]) -> Result<(), ToolError> {
    // A name the manual links everywhere (Node, Vector2, `_ready`) says
    // nothing of what one section is about: only the rarer ones are kept.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (_, resolved) in sections {
        for link in resolved {
            *seen.entry(link.as_str()).or_default() += 1;
        }
    }
    let common = (sections.len() as f64 * COMMON_LINK_SHARE).ceil() as usize;
    for (section, resolved) in sections {
        let rare: Vec<String> = resolved
            .iter()
            .filter(|l| seen.get(l.as_str()).is_none_or(|n| *n <= common))
            .cloned()
            .collect();
        out.push(manual_document(section, &rare))?;
    }
    Ok(())
}

/// The share of the manual's sections past which a link is too common to
/// say what a section is about (measured: 1% keeps too few, none too many).
const COMMON_LINK_SHARE: f64 = 0.02;

fn manual_document(section: &Section, links: &[String]) -> Vec<(String, String)> {
    let uri = uri::manual(&section.page, &section.anchor);
    let mut doc = vec![
        ("uri".into(), uri),
        ("kind".into(), "manual".into()),
        ("corpus".into(), "manual".into()),
        ("class".into(), section.page_title.clone()),
        ("name".into(), section.heading.clone()),
        ("name_lc".into(), section.heading.to_lowercase()),
        ("name_text".into(), section.heading.clone()),
        ("class_text".into(), section.page_title.clone()),
        (
            "summary".into(),
            format!(
                "{}. {}",
                section.heading,
                first_sentence(section.prose.trim())
            ),
        ),
        ("body".into(), section.prose.trim().to_string()),
        ("weight".into(), "1.0".into()),
    ];
    doc.extend(links.iter().map(|l| ("links".to_string(), l.clone())));
    doc
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

/// `$DOCS_URL` for a file: its `version` attribute (3.x has one) or stable.
fn docs_url(xml: &str) -> String {
    let version = class_version(xml)
        .map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "stable".into());
    format!("https://docs.godotengine.org/en/{version}")
}

/// How many classes inherit from each class, directly or not: a measure of
/// how central it is (Node, Object), used as a ranking prior.
fn descendant_counts(classes: &[(String, Option<String>)]) -> HashMap<&str, usize> {
    let parent: HashMap<&str, &str> = classes
        .iter()
        .filter_map(|(name, inherits)| Some((name.as_str(), inherits.as_deref()?)))
        .collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for (name, _) in classes {
        let mut at = name.as_str();
        let mut hops = 0;
        while let Some(&up) = parent.get(at) {
            *counts.entry(up).or_default() += 1;
            at = up;
            hops += 1;
            if hops > 64 {
                break; // a cycle in broken docs
            }
        }
    }
    counts
}

fn schema() -> Schema {
    let field = |name: &str, type_: FieldType, stored: bool| Field {
        name: name.into(),
        type_,
        stored,
    };
    Schema {
        fields: vec![
            field("uri", FieldType::Keyword, true),
            field("kind", FieldType::Keyword, true),
            // `reference` or `manual`: one term to keep either.
            field("corpus", FieldType::Keyword, false),
            field("class", FieldType::Keyword, true),
            field("name", FieldType::Stored, true),
            field("name_lc", FieldType::Keyword, false),
            field("qname_lc", FieldType::Keyword, false),
            field("name_text", FieldType::Text(Analyzer::Identifier), false),
            field("class_text", FieldType::Text(Analyzer::Identifier), false),
            field("summary", FieldType::Text(Analyzer::Prose), false),
            field("body", FieldType::Text(Analyzer::Prose), true),
            field("inherits", FieldType::Stored, true),
            field("members", FieldType::Stored, true),
            field("json", FieldType::Stored, true),
            // What the manual says where it refers to a class or member.
            field("mentions", FieldType::Text(Analyzer::Prose), false),
            // A manual section's `Class` and `Class.member` names.
            field("links", FieldType::Stored, true),
            // A method's or signal's parameter names (its description
            // writes them as inline code).
            field("params", FieldType::Stored, true),
            // The enum a constant is of; the enums a member uses.
            field("enum", FieldType::Stored, true),
            field("enums", FieldType::Keyword, false),
            field("weight", FieldType::Weight, false),
        ],
        id_field: "uri".into(),
    }
}

fn class_document(class: &ClassDoc, prior: f64, mentions: &str) -> Vec<(String, String)> {
    let members: Vec<String> = class
        .symbols()
        .iter()
        .map(|s| format!("{}\t{}", s.kind, s.name))
        .collect();
    let body = format!(
        "{}\n{}",
        class.brief_description,
        prose_only(&class.description)
    );
    let weight = prior * if class.deprecated.is_some() { 0.7 } else { 1.0 };
    vec![
        ("uri".into(), uri::class(&class.name)),
        ("kind".into(), "class".into()),
        ("corpus".into(), "reference".into()),
        ("class".into(), class.name.clone()),
        ("name".into(), class.name.clone()),
        ("name_lc".into(), class.name.to_lowercase()),
        ("qname_lc".into(), class.name.to_lowercase()),
        ("name_text".into(), class.name.clone()),
        (
            "summary".into(),
            without_inline_code(&class.brief_description),
        ),
        ("body".into(), body.trim().to_string()),
        (
            "inherits".into(),
            class.inherits.clone().unwrap_or_default(),
        ),
        ("members".into(), members.join("\n")),
        (
            "json".into(),
            serde_json::to_string(class).expect("classes serialise"),
        ),
        ("mentions".into(), mentions.to_string()),
        ("weight".into(), weight.to_string()),
    ]
}

/// How much each kind of symbol counts, relative to a class.
fn kind_prior(kind: &str) -> f64 {
    match kind {
        "method" | "property" | "signal" => 1.0,
        "annotation" => 0.9,
        "constant" => 0.5,
        "constructor" => 0.5,
        "theme_item" => 0.5,
        _ => 0.3, // operators
    }
}

fn symbol_document(
    class: &ClassDoc,
    symbol: &crate::model::Symbol<'_>,
    prior: f64,
    mentions: &str,
) -> Vec<(String, String)> {
    let weight = prior * kind_prior(symbol.kind) * if symbol.deprecated { 0.7 } else { 1.0 };
    let prose = prose_only(symbol.description);
    // A setting's path (`application/config/auto_accept_quit`): its last
    // part names it, the rest is where it sits, like a class (else every
    // setting under `application/` would answer questions about the app).
    let (category, own_name) = symbol.name.rsplit_once('/').unwrap_or(("", symbol.name));
    let mut doc = vec![
        (
            "uri".into(),
            uri::symbol(&class.name, symbol.kind, &symbol.uri_name()),
        ),
        ("kind".into(), symbol.kind.into()),
        ("corpus".into(), "reference".into()),
        ("class".into(), class.name.clone()),
        ("name".into(), symbol.name.to_string()),
        ("name_lc".into(), symbol.name.to_lowercase()),
        (
            "qname_lc".into(),
            format!("{}.{}", class.name, symbol.name).to_lowercase(),
        ),
        ("name_text".into(), own_name.to_string()),
        (
            "class_text".into(),
            format!("{} {}", class.name, category.replace('/', " ")),
        ),
        (
            "summary".into(),
            without_inline_code(first_sentence(prose.trim())),
        ),
        ("body".into(), prose.trim().to_string()),
        ("mentions".into(), mentions.to_string()),
        ("weight".into(), weight.to_string()),
    ];
    doc.extend(
        symbol
            .params
            .iter()
            .map(|p| ("params".to_string(), p.name.clone())),
    );
    // The enum a constant is of, and those a member holds, takes or
    // returns (lowercase `class.enum`): a question that finds a constant is
    // about the members that take its enum.
    let field = match symbol.kind {
        "constant" => "enum",
        _ => "enums",
    };
    doc.extend(
        enums_of(class, symbol.kind, symbol.name)
            .into_iter()
            .map(|e| (field.to_string(), e.to_lowercase())),
    );
    doc
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_projects_godot_version_is_read() {
        let four = "config_version=5\n\n[application]\n\nconfig/name=\"Demo\"\n\
                    config/features=PackedStringArray(\"4.3\", \"GL Compatibility\")\n";
        assert_eq!(project_version(four).as_deref(), Some("4.3"));
        assert_eq!(project_version("config_version=5\n").as_deref(), Some("4"));
        assert_eq!(
            project_version("config_version=4\n[application]\n").as_deref(),
            Some("3")
        );
        assert_eq!(project_version("nothing here"), None);
    }

    use super::*;

    #[test]
    fn docs_url_uses_the_version_attribute_or_stable() {
        assert_eq!(
            docs_url(r#"<class name="A" version="3.6" >"#),
            "https://docs.godotengine.org/en/3.6"
        );
        assert_eq!(
            docs_url(r#"<class name="A" inherits="B">"#),
            "https://docs.godotengine.org/en/stable"
        );
    }

    #[test]
    fn descendants_count_every_generation() {
        let class = |n: &str, p: Option<&str>| (n.to_string(), p.map(str::to_string));
        let classes = [
            class("Object", None),
            class("Node", Some("Object")),
            class("Node2D", Some("Node")),
            class("Timer", Some("Node")),
        ];
        let counts = descendant_counts(&classes);
        assert_eq!(
            (counts["Object"], counts["Node"], counts.get("Timer")),
            (3, 2, None)
        );
    }
}
