//! `build`: a local image made by the engine from a Dockerfile and a
//! context folder the plugin may read (a repository's devcontainer), as
//! `podman build` would. The context goes to the engine as a tar of the
//! folder opened beneath the plugin's roots (its `.git` left out); the
//! Dockerfile lies inside it; its base images are the ones `run` would
//! take (`containers.images`, local unless `containers.pull` lets the
//! host pull them: the engine itself pulls nothing); the name it writes
//! is one `containers.commit` allows and this plugin made or is new.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::query_parameters::BuildImageOptions;
use futures_util::StreamExt;

use super::commit::{COMMITTED_BY_LABEL, writable};
use super::create::ensure_image;
use super::files;
use crate::bindings::mcphost::plugin::containers::ContainerError;
use crate::podman::{self, failed};
use crate::policy::Grants;

/// A Dockerfile is a page of text.
const MAX_DOCKERFILE_BYTES: u64 = 1024 * 1024;
/// The build's output kept for an error.
const TAIL_BYTES: usize = 16 * 1024;

/// What to build: the context folder (checked, pinned, seen through
/// `through`), the Dockerfile relative to it, the image name.
pub struct Build<'a> {
    pub folder: &'a cap_std::fs::Dir,
    pub through: &'a Path,
    pub dockerfile: &'a Path,
    pub image: &'a str,
}

/// Build `b.image`; its id.
pub async fn build(docker: &Docker, g: &Grants, b: &Build<'_>) -> Result<String, ContainerError> {
    writable(docker, g, b.image).await?;
    for base in bases(&dockerfile_text(b)?)? {
        ensure_image(docker, g, &base).await?;
    }
    let exclude = [PathBuf::from(".git")];
    let copy = files::CopyIn {
        container: b.image,
        source: b.through,
        target: "/",
        paths: &[],
        exclude: &exclude,
    };
    let mut tar = files::tar_of(&copy, false)?;
    let stream = tokio_util::io::ReaderStream::new(tar.stdout.take().expect("piped"));
    let options = BuildImageOptions {
        dockerfile: b.dockerfile.display().to_string(),
        t: Some(b.image.to_string()),
        rm: true,
        forcerm: true,
        labels: Some(HashMap::from([(
            COMMITTED_BY_LABEL.to_string(),
            g.plugin.clone(),
        )])),
        ..Default::default()
    };
    let mut said = String::new();
    let mut failure = None;
    let mut answers = docker.build_image(options, None, Some(bollard::body_try_stream(stream)));
    while let Some(answer) = answers.next().await {
        match answer {
            Ok(info) => {
                if let Some(line) = info.stream {
                    said.push_str(&line);
                    if said.len() > 2 * TAIL_BYTES {
                        said =
                            said[said.floor_char_boundary(said.len() - TAIL_BYTES)..].to_string();
                    }
                }
                if let Some(detail) = info.error_detail.and_then(|d| d.message) {
                    failure = Some(detail);
                }
            }
            Err(bollard::errors::Error::DockerStreamError { error }) => failure = Some(error),
            Err(e) => {
                let _ = tar.kill().await;
                return Err(failed(&format!("building {}", b.image))(e).into());
            }
        }
    }
    let _ = tar.wait().await;
    let tail = &said[said.floor_char_boundary(said.len().saturating_sub(TAIL_BYTES))..];
    if let Some(why) = failure {
        return Err(ContainerError::Failed(format!(
            "building {} from {} failed: {why}\n{}",
            b.image,
            b.dockerfile.display(),
            termtext::lines(tail.trim())
        )));
    }
    let built = podman::image(docker, b.image).await?.ok_or_else(|| {
        ContainerError::Failed(format!(
            "building {} ended without an image: {}",
            b.image,
            termtext::lines(tail.trim())
        ))
    })?;
    tracing::info!(plugin = %g.plugin, image = b.image, "built");
    Ok(built.id.unwrap_or_default())
}

/// The Dockerfile, read beneath the context folder.
fn dockerfile_text(b: &Build) -> Result<String, ContainerError> {
    let unreadable = |e: std::io::Error| {
        ContainerError::Invalid(format!(
            "the Dockerfile {} cannot be read in the context: {e}",
            b.dockerfile.display()
        ))
    };
    let meta = b
        .folder
        .symlink_metadata(b.dockerfile)
        .map_err(unreadable)?;
    if !meta.is_file() || meta.len() > MAX_DOCKERFILE_BYTES {
        return Err(ContainerError::Invalid(format!(
            "the Dockerfile {} is not a plain file of at most {MAX_DOCKERFILE_BYTES} bytes",
            b.dockerfile.display()
        )));
    }
    b.folder.read_to_string(b.dockerfile).map_err(unreadable)
}

/// The images a Dockerfile's stages start from (`FROM image [AS name]`),
/// earlier stages and `scratch` left out.
fn bases(text: &str) -> Result<Vec<String>, ContainerError> {
    let (mut stages, mut bases) = (Vec::<String>::new(), Vec::new());
    for line in text.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        if !words.next().is_some_and(|w| w.eq_ignore_ascii_case("FROM")) {
            continue;
        }
        let mut words = words.skip_while(|w| w.starts_with("--"));
        let Some(image) = words.next() else { continue };
        if image.contains('$') {
            return Err(ContainerError::Invalid(format!(
                "`{line}`: a base image named by a build argument cannot be checked before the build: name it"
            )));
        }
        if !stages.iter().any(|s| s.eq_ignore_ascii_case(image)) && image != "scratch" {
            bases.push(image.to_string());
        }
        if words.next().is_some_and(|w| w.eq_ignore_ascii_case("AS")) {
            stages.extend(words.next().map(str::to_string));
        }
    }
    Ok(bases)
}

#[cfg(test)]
mod tests {
    use super::bases;

    #[test]
    fn the_bases_are_the_images_stages_start_from() {
        let text = "# syntax\nFROM --platform=linux/amd64 docker.io/library/golang:1.23 AS build\nRUN go build\nfrom build as test\nFROM scratch\nFROM localhost/cofer-test:1\n";
        assert_eq!(
            bases(text).unwrap(),
            ["docker.io/library/golang:1.23", "localhost/cofer-test:1"]
        );
        assert!(bases("ARG B=x\nFROM ${B}\n").is_err());
    }
}
