//! What the fuzz targets (tests/fuzz) drive: the host's parsers of hostile
//! input, each with the property that must hold whatever the input.

use std::io::Write;
use std::path::Path;

/// A JSON-RPC line as stdio reads it: finding the id of a request that
/// does not parse never panics.
pub fn jsonrpc_line(line: &[u8]) {
    let _ = crate::stdio::top_level_id(line);
    let _ = crate::stdio::looks_like_notification(line);
}

/// A user's config file: parsed, checked, and every plugin's grants
/// expanded; no grant lies outside what the text names.
pub fn policy(text: &str) {
    let Ok(config) = crate::policy::Config::parse(Some((Path::new("fuzz.toml"), text))) else {
        return;
    };
    let places = crate::policy::Places {
        workspace: "/ws".into(),
        home: "/home/u".into(),
        cache_dir: "/cache".into(),
    };
    for name in config.plugins.keys() {
        let g = config.grants(name, &places, "fuzz.toml");
        for root in g.read_roots.iter().chain(&g.write_roots) {
            assert!(root.is_absolute(), "{}", root.display());
        }
    }
}

/// A container's archive applied to a folder: nothing is written beside
/// the folder, whatever the archive's names and links.
pub fn sync_archive(archive: &[u8]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).expect("target");
    let mut file = tempfile::tempfile().expect("temp file");
    file.write_all(archive).expect("write");
    let root = cap_std::fs::Dir::open_ambient_dir(&target, cap_std::ambient_authority())
        .expect("open target");
    let _ = crate::caps::containers::unpack::apply(
        file,
        &root,
        &[std::path::PathBuf::from(".git")],
        1 << 20,
    );
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(beside, ["target"], "the archive wrote beside its target");
}

/// What a registry answers `host install`: a manifest is parsed or
/// refused, never panics, and every layer it keeps is named by a plain
/// digest (digests become URLs); an error's text as printed holds no
/// control character and is bounded.
pub fn registry_answer(bytes: &[u8]) {
    if let Ok(manifest) = crate::install::fetch::parse_manifest(bytes) {
        for layer in &manifest.layers {
            assert!(crate::install::fetch::is_digest(&layer.digest));
        }
    }
    let shown = crate::cli::printed::printable(&String::from_utf8_lossy(bytes));
    assert!(
        !shown
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
    );
    assert!(shown.chars().count() <= 8 * 1024 + 64);
}
