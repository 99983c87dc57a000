//! A container's folder and file mounts, pinned before Podman sees them
//! (issue 34, class 3), and probed once it runs.
//!
//! `create_body` checks that each source is inside the plugin's roots, but
//! Podman (runc) resolves the source path only when the container starts,
//! and the plugin can swap a checked folder for a link to `/` in between.
//! So each source is opened beneath its root with no link on the way
//! ([`crate::pin`]), and Podman gets a bind of that open handle at a path
//! of the host's own, which the plugin cannot change; the binds go once the
//! container has started (it has mounts of its own by then). Making a bind
//! takes the right to mount (a root host); without it Podman gets the
//! checked path, and the probes, written through the open handles, fail
//! the start of a container that sees anything else.

use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::models::{ContainerCreateBody, MountType};
use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use futures_util::TryStreamExt;

use crate::bindings::mcphost::plugin::containers::ContainerError;
use crate::pin::{self, Pinned};
use crate::policy::Grants;

/// The label naming, for the mount at `<target>`, the host folder whose
/// bind Podman was given (`<label><target>`): the bind is gone once the
/// container runs, and a checkpoint copies the folder itself.
pub const SOURCE_LABEL: &str = "mcphost.source:";

/// The folder or file a container's bind mount at `target` shows: the
/// path it was asked for (the source Podman reports is the host's bind of
/// it, gone by now).
pub fn source_of<'a>(
    labels: &'a std::collections::BTreeMap<String, String>,
    source: &'a str,
    target: &str,
) -> &'a str {
    labels
        .get(&format!("{SOURCE_LABEL}{target}"))
        .map_or(source, String::as_str)
}

/// The pinned sources of one container's bind mounts.
pub struct Pins {
    held: Vec<Pin>,
}

struct Pin {
    pinned: Pinned,
    /// Where the container sees it.
    target: String,
    /// The host's own bind of it, given to Podman; none without the right
    /// to mount.
    bound: Option<PathBuf>,
}

impl Pins {
    /// Pin every bind mount of `body`, giving a local engine the host's
    /// binds of them where the host may mount (an engine on another
    /// machine sees neither: its probes fail).
    pub fn take(
        g: &Grants,
        local: bool,
        body: &mut ContainerCreateBody,
    ) -> Result<Pins, ContainerError> {
        let mut pins = Pins { held: Vec::new() };
        let mut labels = Vec::new();
        let mounts = body.host_config.as_mut().and_then(|h| h.mounts.as_mut());
        for mount in mounts.into_iter().flatten() {
            let (Some(source), Some(target)) = (&mount.source, &mount.target) else {
                continue;
            };
            if mount.typ != Some(MountType::BIND) {
                continue;
            }
            let roots = g.roots(mount.read_only != Some(true));
            let pinned = pin::open(Path::new(source), &roots).map_err(|e| {
                ContainerError::Denied(format!("plugin `{}` cannot mount {source}: {e}", g.plugin))
            })?;
            let bound = if local { bind(&pinned) } else { None };
            if let Some(bound) = &bound {
                labels.push((format!("{SOURCE_LABEL}{target}"), source.clone()));
                mount.source = Some(bound.to_string_lossy().into_owned());
            }
            pins.held.push(Pin {
                pinned,
                target: target.clone(),
                bound,
            });
        }
        body.labels.get_or_insert_default().extend(labels);
        Ok(pins)
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        for bound in self.held.iter().filter_map(|p| p.bound.as_ref()) {
            crate::platform::unbind(bound);
            let _ = std::fs::remove_dir(bound).or_else(|_| std::fs::remove_file(bound));
        }
    }
}

/// Where host instance `instance` makes its binds: a folder of its own,
/// out of every plugin's reach.
fn binds_dir_of(instance: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{BINDS_PREFIX}{instance}"))
}

/// The start of a binds folder's name; the host instance follows.
pub const BINDS_PREFIX: &str = "mcp-host-binds-";

fn binds_dir() -> PathBuf {
    binds_dir_of(timebox::instance())
}

/// Undo what the host instance `instance`, now gone, left of its binds
/// (one killed between a container's create and its start keeps a bind of
/// a plugin's folder): each is unmounted, then its empty mount point
/// removed. Nothing is removed recursively: a bind still mounted stays,
/// with the folder it shows.
pub fn remove_binds(instance: &str) {
    let dir = binds_dir_of(instance);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for entry in entries.flatten() {
        let at = entry.path();
        crate::platform::unbind(&at);
        let _ = std::fs::remove_dir(&at).or_else(|_| std::fs::remove_file(&at));
    }
    let _ = std::fs::remove_dir(&dir);
}

/// A bind of the open handle at a fresh path in [`binds_dir`]; none when
/// the host may not mount (not root, not Linux) or the bind fails.
fn bind(pinned: &Pinned) -> Option<PathBuf> {
    crate::platform::bind(pinned, &binds_dir())
}

/// Files placed, through the pinned handles, in every folder a container
/// mounts, to see that it got those folders: not folders of an engine on
/// another machine (`CONTAINER_HOST` makes a missing bind source as an
/// empty folder of its own, and the container would go on working in it
/// while the host's files stay untouched), nor what a path swapped after
/// the check leads to. Removed when dropped.
pub struct Probes {
    /// (the folder, the file's name, the folder's path for messages, where
    /// the container sees the file)
    placed: Vec<(cap_std::fs::Dir, String, String, String)>,
}

impl Probes {
    pub fn place(pins: &Pins) -> Result<Probes, ContainerError> {
        let mut probes = Probes { placed: Vec::new() };
        for pin in &pins.held {
            let Pinned::Dir(dir) = &pin.pinned else {
                continue;
            };
            let name = format!(".mcphost-probe-{}", uuid::Uuid::new_v4().simple());
            let placed = dir
                .try_clone()
                .and_then(|dir| dir.create(&name).map(|_| dir));
            let dir = match placed {
                Ok(dir) => dir,
                // A read-only grant the host cannot write either: the
                // pinned bind (where there is one) still holds.
                Err(_) if pin.bound.is_some() => continue,
                Err(e) => {
                    return Err(ContainerError::Failed(format!(
                        "cannot place a probe in the folder mounted at {}: {e}",
                        pin.target
                    )));
                }
            };
            let inside = format!("{}/{name}", pin.target.trim_end_matches('/'));
            probes.placed.push((dir, name, pin.target.clone(), inside));
        }
        Ok(probes)
    }

    /// Whether the started container `id` sees every probe, asked of the
    /// engine (its archive API: nothing is needed in the image).
    pub async fn seen(&self, docker: &Docker, id: &str) -> Result<(), ContainerError> {
        for (_, _, target, inside) in &self.placed {
            let options = DownloadFromContainerOptionsBuilder::new()
                .path(inside)
                .build();
            let found = docker
                .download_from_container(id, Some(options))
                .try_next()
                .await;
            if found.is_err() {
                return Err(ContainerError::Unavailable(format!(
                    "the Podman engine does not see this machine's files at {target}: it is on another \
                     machine (an empty folder of its own would be mounted there; unset CONTAINER_HOST, \
                     or point it at a local socket), or the folder was replaced after it was checked"
                )));
            }
        }
        Ok(())
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        for (dir, name, _, _) in &self.placed {
            let _ = dir.remove_file(name);
        }
    }
}

// Bind mounts and Unix links: Linux only.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use bollard::models::{HostConfig, Mount};

    fn body(source: &Path, target: &str, read_only: bool) -> ContainerCreateBody {
        ContainerCreateBody {
            host_config: Some(HostConfig {
                mounts: Some(vec![Mount {
                    typ: Some(MountType::BIND),
                    source: Some(source.to_string_lossy().into_owned()),
                    target: Some(target.into()),
                    read_only: Some(read_only),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_source_through_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::os::unix::fs::symlink("/", root.join("up")).unwrap();
        let e = Pins::take(
            &crate::policy::test_grants(&root, &["containers"]),
            true,
            &mut body(&root.join("up/etc"), "/x", false),
        )
        .err()
        .expect("refused");
        assert!(matches!(e, ContainerError::Denied(_)), "{e:?}");
    }

    /// A host killed between a container's create and its start leaves a
    /// bind of a plugin's folder: for a host that is gone, it is unmounted
    /// and its mount point removed, and the folder keeps its files (needs
    /// root to bind).
    #[test]
    fn the_binds_of_a_host_that_is_gone_are_undone() {
        if !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "root is needed"
            );
            eprintln!("skipped: needs root to bind");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("file"), "kept\n").unwrap();
        // Process 1 started at another time: an instance that is gone.
        let instance = format!("1.{}", std::process::id());
        let binds = binds_dir_of(&instance);
        let at = binds.join("b");
        std::fs::create_dir_all(&at).unwrap();
        nix::mount::mount(
            Some(&folder),
            &at,
            None::<&str>,
            nix::mount::MsFlags::MS_BIND,
            None::<&str>,
        )
        .unwrap();
        assert!(at.join("file").exists());

        remove_binds(&instance);
        assert!(!binds.exists(), "the binds folder is gone");
        assert_eq!(
            std::fs::read_to_string(folder.join("file")).unwrap(),
            "kept\n"
        );
    }

    /// Swapping a checked folder for a link after the check changes nothing:
    /// what the container mounts is the folder that was checked (real
    /// Podman; needs root to bind).
    #[test]
    fn a_folder_swapped_after_the_check_is_not_what_is_mounted() {
        let image = std::env::var("COFER_TEST_IMAGE").unwrap_or("localhost/cofer-test".into());
        let ready = nix::unistd::geteuid().is_root()
            && std::process::Command::new("podman")
                .args(["image", "exists", &image])
                .status()
                .is_ok_and(|s| s.success());
        if !ready {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "podman, root and {image} are needed"
            );
            eprintln!("skipped: needs root, podman and the image {image} (scripts/test-image)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/marker"), "checked\n").unwrap();
        let mut b = body(&root.join("sub"), "/x", false);
        let pins = Pins::take(
            &crate::policy::test_grants(&root, &["containers"]),
            true,
            &mut b,
        )
        .unwrap();
        let source = b.host_config.unwrap().mounts.unwrap()[0]
            .source
            .clone()
            .unwrap();
        assert_ne!(
            Path::new(&source),
            root.join("sub"),
            "Podman gets the host's bind"
        );
        std::fs::rename(root.join("sub"), root.join("moved")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("sub")).unwrap();
        // The repository's settings for machines where Podman's defaults fail (docs/src/tools/cofer.md).
        let conf = std::env::var("CONTAINERS_CONF")
            .unwrap_or(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/containers.conf").into());
        let out = std::process::Command::new("podman")
            .env("CONTAINERS_CONF", conf)
            .args([
                "run",
                "--rm",
                "--mount",
                &format!("type=bind,source={source},target=/x"),
            ])
            .arg(&image)
            .args(["sh", "-c", "cat /x/marker; ls /x | head -3"])
            .output()
            .unwrap();
        let seen = String::from_utf8_lossy(&out.stdout);
        assert!(
            seen.starts_with("checked"),
            "{seen} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!seen.contains("passwd"));
        drop(pins);
        assert!(
            !Path::new(&source).exists(),
            "the bind is gone with the pins"
        );
    }
}
