//! The `stat`s a command's sweep took on its way out, on another
//! machine's engine ([`manifest::after_sweep`]): the sync that follows the
//! command uses them instead of an exec of its own, if nothing of the
//! host's ran in or wrote to the container since the command began.

use std::sync::Mutex;

use super::manifest::{self, Manifest, REMEMBERED};

/// Manifests taken at the end of a command, each valid until anything
/// else of the host's runs in or writes to its container ([`touched`]).
struct Taken {
    engine: String,
    container: String,
    /// Bumped by every [`touched`].
    generation: u64,
    manifest: Option<(String, Manifest)>,
}

static TAKEN: Mutex<Vec<Taken>> = Mutex::new(Vec::new());

/// The host is about to run in or write to `container`: a manifest taken
/// before is no longer the folder's. The generation to hand to [`keep`].
pub fn touched(engine: &str, container: &str) -> u64 {
    let mut taken = TAKEN.lock().expect("manifests poisoned");
    let i = match taken
        .iter()
        .position(|t| t.engine == engine && t.container == container)
    {
        Some(i) => i,
        None => {
            if taken.len() >= REMEMBERED {
                taken.remove(0);
            }
            taken.push(Taken {
                engine: engine.to_string(),
                container: container.to_string(),
                generation: 0,
                manifest: None,
            });
            taken.len() - 1
        }
    };
    taken[i].generation += 1;
    taken[i].manifest = None;
    taken[i].generation
}

/// Keep what a command's sweep printed as `source`'s manifest, if nothing
/// touched the container since that command began (`generation`).
pub fn keep(engine: &str, container: &str, generation: u64, source: &str, printed: &str) {
    let Some(manifest) = manifest::parse(printed, source) else {
        return;
    };
    let mut taken = TAKEN.lock().expect("manifests poisoned");
    if let Some(t) = taken
        .iter_mut()
        .find(|t| t.engine == engine && t.container == container && t.generation == generation)
    {
        t.manifest = Some((source.to_string(), manifest));
    }
}

/// The manifest of `source` a command's sweep left, taken once.
pub fn kept(engine: &str, container: &str, source: &str) -> Option<Manifest> {
    let mut taken = TAKEN.lock().expect("manifests poisoned");
    let t = taken
        .iter_mut()
        .find(|t| t.engine == engine && t.container == container)?;
    match t.manifest.take() {
        Some((s, manifest)) if s == source => Some(manifest),
        _ => None,
    }
}
