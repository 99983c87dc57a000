//! Every setting of a repository's config that names a program, switched
//! off for each git process the host runs.
//!
//! Since issue 70 no plugin writes git's files, so a repository's config
//! is the user's. This is the second wall: a program a plugin started (a
//! test suite, an agent's shell) may still write the working tree's
//! `.git`, and git runs what its config names in places no `-c` list known
//! in advance reaches (drivers by name, per-URL helpers). So the host
//! reads which keys the config holds (with its includes) and puts a
//! harmless value over each one that names a program, on the command line,
//! which git reads last.

use std::path::Path;

use crate::{GitError, program};

/// The git command that lists which keys a config holds, its includes
/// followed: what [`over`] reads.
pub const LIST_KEYS: [&str; 4] = ["config", "--name-only", "--list", "--includes"];

/// Settings that name a program whatever the repository says, put in
/// front of every command (with [`crate::SAFE`]). `true`/`false` are
/// programs that do nothing; an empty helper list is no helper.
pub const PROGRAMS_OFF: &[&str] = &[
    // Run by fetch, push and receive-pack for a repository with alternates.
    "core.alternateRefsCommand=true",
    "core.sshCommand=false",
    "core.askPass=false",
    "core.editor=false",
    "core.pager=cat",
    "sequence.editor=false",
    "credential.helper=",
    "gpg.program=false",
    "gpg.openpgp.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.program=false",
    "gpg.ssh.defaultKeyCommand=false",
    "push.gpgSign=false",
];
// `diff.external` cannot be switched off by a value (an empty one is an
// error at every diff): every diff and log the host or `cofer` runs
// passes `--no-ext-diff --no-textconv` instead.

/// The settings putting a harmless value over each key in `keys` (a
/// config's key names, one a line) that names a program.
pub fn over(keys: &str) -> Vec<String> {
    let mut settings: Vec<String> = keys
        .lines()
        .filter_map(|key| override_of(key.trim()))
        .flatten()
        .collect();
    settings.sort_unstable();
    settings.dedup();
    settings
}

/// The harmless values for `key`, if it names a program.
fn override_of(key: &str) -> Option<Vec<String>> {
    let lower = key.to_ascii_lowercase();
    // A key is section[.subsection].name; the subsection keeps its case.
    let (section, rest) = lower.split_once('.')?;
    let (sub, name) = match rest.rsplit_once('.') {
        Some((_, name)) => (&key[section.len() + 1..key.len() - name.len() - 1], name),
        None => ("", rest),
    };
    let set = |name: &str, value: &str| format!("{section}.{sub}.{name}={value}");
    let found = match (section, name) {
        ("filter", "clean" | "smudge" | "process") if !sub.is_empty() => vec![
            set("clean", ""),
            set("smudge", ""),
            set("process", ""),
            set("required", "false"),
        ],
        // git's own three-way text merge in place of the named driver.
        ("merge", "driver") if !sub.is_empty() => vec![set(
            "driver",
            &format!(
                "'{}' merge-file --marker-size=%L %A %O %B",
                program().display()
            ),
        )],
        ("diff", "command" | "textconv") if !sub.is_empty() => {
            vec![set("command", ""), set("textconv", "")]
        }
        ("credential", "helper") if !sub.is_empty() => vec![set("helper", "")],
        ("gpg", "program") if !sub.is_empty() => vec![set("program", "false")],
        ("remote", "uploadpack") if !sub.is_empty() => {
            vec![set("uploadpack", "git-upload-pack")]
        }
        ("remote", "receivepack") if !sub.is_empty() => {
            vec![set("receivepack", "git-receive-pack")]
        }
        ("pager", _) if sub.is_empty() => vec![format!("pager.{name}=false")],
        _ => return None,
    };
    Some(found)
}

/// Refuse a repository whose object store borrows another's
/// (`objects/info/alternates`): git would read objects, and run
/// `core.alternateRefsCommand`, from wherever it points.
pub fn refuse_alternates(git_dir: &cap_std::fs::Dir, shown: &Path) -> Result<(), GitError> {
    for file in ["objects/info/alternates", "objects/info/http-alternates"] {
        if git_dir.metadata(file).is_ok_and(|m| m.len() > 0) {
            return Err(GitError::Refused(format!(
                "{} has {file}: its objects come from another repository, which the host does not \
                 follow in a repository a plugin's programs may write; make it self-contained \
                 (`git repack -a -d`, then remove that file) and try again",
                shown.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_naming_a_program_gets_a_harmless_value() {
        let keys = "core.bare\nfilter.Evil.clean\nmerge.Ours.driver\ndiff.pdf.textconv\n\
                    credential.https://x.example.helper\npager.log\nremote.origin.url\n\
                    remote.origin.uploadpack\ngpg.weird.program\nuser.name\n";
        let settings = over(keys);
        for expected in [
            "filter.Evil.clean=",
            "filter.Evil.smudge=",
            "filter.Evil.required=false",
            "diff.pdf.textconv=",
            "diff.pdf.command=",
            "credential.https://x.example.helper=",
            "pager.log=false",
            "remote.origin.uploadpack=git-upload-pack",
            "gpg.weird.program=false",
        ] {
            assert!(
                settings.iter().any(|s| s == expected),
                "{expected}: {settings:?}"
            );
        }
        assert!(
            settings
                .iter()
                .any(|s| s.starts_with("merge.Ours.driver=") && s.contains("merge-file")),
            "{settings:?}"
        );
        assert!(
            !settings
                .iter()
                .any(|s| s.starts_with("user.") || s.starts_with("core."))
        );
    }
}
