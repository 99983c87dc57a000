//! The user's repository as the snapshot writes it: its object database
//! and its branches, through gitoxide's object and ref crates alone.
//!
//! Only these two parts of a repository are touched, so only they are
//! built (issue 75: the whole `gix` crate brought 16 more crates, a
//! config parser and a network protocol among them, to the host's build).
//! Nothing here reads the repository's config: the main repository's
//! `.git` is a real directory (see [`crate::Repo::open`]), objects are
//! SHA-1 (the only format the host builds in), and locks wait as long as
//! git's defaults.

use std::path::Path;
use std::time::Duration;

use gix_object::{Exists, FindExt, Kind, Write, WriteTo};
use gix_ref::transaction::{PreviousValue, RefEdit};
use gix_ref::{FullName, Target};

use super::*;

/// The object format of every repository the host writes.
pub(super) const HASH: gix_hash::Kind = gix_hash::Kind::Sha1;
/// git's `core.filesRefLockTimeout` and `core.packedRefsTimeout` defaults.
const REF_LOCK: Duration = Duration::from_millis(100);
const PACKED_REFS_LOCK: Duration = Duration::from_secs(1);
/// Symbolic refs followed from a branch before giving up (git: 5).
const MAX_SYMREF_DEPTH: usize = 5;

type StoreResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The object database and refs of the git directory `git`.
pub(super) struct Store {
    objects: gix_odb::Handle,
    refs: gix_ref::file::Store,
}

impl Store {
    pub(super) fn open(git: &Path) -> StoreResult<Store> {
        refuse_other_formats(git)?;
        Ok(Store {
            objects: gix_odb::at(git.join("objects"), HASH)?,
            refs: gix_ref::file::Store::at(git.to_path_buf(), HASH),
        })
    }

    /// The commit `branch` (a full name, `refs/heads/...`) points at.
    pub(super) fn tip(&self, branch: &str) -> StoreResult<Option<ObjectId>> {
        let mut name = branch.to_string();
        for _ in 0..=MAX_SYMREF_DEPTH {
            let Some(found) = self.refs.try_find(name.as_str())? else {
                return Ok(None);
            };
            match found.target {
                Target::Object(id) => return Ok(Some(id)),
                Target::Symbolic(next) => name = next.as_bstr().to_string(),
            }
        }
        Err(format!("{branch} is a chain of more than {MAX_SYMREF_DEPTH} symbolic refs").into())
    }

    /// The tree of `commit`.
    pub(super) fn tree_of(&self, commit: &ObjectId) -> StoreResult<ObjectId> {
        let mut buf = Vec::new();
        Ok(self.objects.find_commit(commit, &mut buf)?.tree())
    }

    /// The bytes of the tree `id`.
    pub(super) fn tree_data(&self, id: &ObjectId) -> StoreResult<Vec<u8>> {
        let mut buf = Vec::new();
        self.objects.find_tree(id, &mut buf)?;
        Ok(buf)
    }

    pub(super) fn write_blob(&self, bytes: &[u8]) -> StoreResult<ObjectId> {
        self.write_bytes(Kind::Blob, bytes)
    }

    pub(super) fn write(&self, object: &dyn WriteTo) -> StoreResult<ObjectId> {
        let mut bytes = Vec::with_capacity(object.size() as usize);
        object.write_to(&mut bytes)?;
        self.write_bytes(object.kind(), &bytes)
    }

    /// Hashed first: what the database holds already is not written again
    /// (as git does; an unchanged tree is most of every command's).
    fn write_bytes(&self, kind: Kind, bytes: &[u8]) -> StoreResult<ObjectId> {
        let id = gix_object::compute_hash(HASH, kind, bytes)?;
        if self.objects.exists(&id) {
            return Ok(id);
        }
        Ok(self.objects.write_buf_with_known_id(kind, bytes, id)?)
    }

    /// A commit of `tree` on `parent` put at the tip of `branch`, which
    /// must still be at `parent` (none: must not exist yet), with a reflog
    /// line as `git commit` writes it.
    pub(super) fn commit(
        &self,
        who: gix_actor::SignatureRef<'_>,
        branch: &str,
        message: &str,
        tree: ObjectId,
        parent: Option<ObjectId>,
    ) -> StoreResult<ObjectId> {
        let commit = gix_object::Commit {
            message: message.into(),
            tree,
            author: who.into(),
            committer: who.into(),
            encoding: None,
            parents: parent.into_iter().collect(),
            extra_headers: Vec::new(),
        };
        let id = self.write(&commit)?;
        let expected = match parent {
            Some(parent) => PreviousValue::ExistingMustMatch(Target::Object(parent)),
            None => PreviousValue::MustNotExist,
        };
        let name: FullName = branch.try_into()?;
        let first_line = message.lines().next().unwrap_or_default();
        let initial = if parent.is_none() { " (initial)" } else { "" };
        let edit = RefEdit::update(name, id, expected, format!("commit{initial}: {first_line}"));
        self.refs
            .transaction()
            .prepare(
                [edit],
                gix_lock::acquire::Fail::AfterDurationWithBackoff(REF_LOCK),
                gix_lock::acquire::Fail::AfterDurationWithBackoff(PACKED_REFS_LOCK),
            )?
            .commit(Some(who))?;
        Ok(id)
    }
}

/// A repository in another object format (`extensions.objectFormat`,
/// SHA-256) is refused rather than written with SHA-1 objects it cannot
/// read. Only that one key of the user's own config is looked at.
fn refuse_other_formats(git: &Path) -> StoreResult<()> {
    let config = std::fs::read_to_string(git.join("config")).unwrap_or_default();
    let format = config.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("objectformat")
            .then(|| value.trim().trim_matches('"').to_ascii_lowercase())
    });
    match format.as_deref() {
        None | Some("sha1") => Ok(()),
        Some(other) => Err(format!(
            "the repository's objects are {other}; the host writes SHA-1 repositories only"
        )
        .into()),
    }
}
