//! A repository's devcontainer.json as Cofer's project defaults (issue
//! 74): its image, variables, create commands and forwarded ports make a
//! new environment when neither the call nor `cofer config` says
//! otherwise; what Cofer does not honour is listed, not dropped; `cofer
//! config show` says where each default came from; a Dockerfile it cannot
//! build is refused with what to do.

use serde_json::{Value, json};

use crate::cofer::{Fixture, created, error_of};
use crate::harness::*;

fn commit_file(f: &Fixture, path: &str, contents: &str) {
    let file = f.repo.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, contents).unwrap();
    git(&f.repo, &["add", "."]);
    git(&f.repo, &["commit", "--quiet", "-m", "devcontainer"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_devcontainer_json_gives_the_project_defaults() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    commit_file(
        &f,
        ".devcontainer/devcontainer.json",
        &format!(
            r#"{{
    // The project's container, as the devcontainer spec writes it.
    "name": "web",
    "image": "{image}",
    "containerEnv": {{ "MODE": "dev" }},
    "remoteEnv": {{ "EDITOR": "vi" }},
    "onCreateCommand": "echo made > /tmp/made.txt",
    "postCreateCommand": ["sh", "-c", "echo post >> /tmp/made.txt"],
    "forwardPorts": [8080],
    "features": {{ "ghcr.io/devcontainers/features/node:1": {{}} }},
    "mounts": ["source=/etc,target=/host-etc,type=bind"],
}}"#,
            image = cofer_image()
        ),
    );
    let shown = cofer(&f.repo, &["config", "show", "--json"]);
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["base_image"], cofer_image(), "{shown}");
    assert_eq!(
        shown["from"]["base_image"], ".devcontainer/devcontainer.json",
        "{shown}"
    );
    assert_eq!(shown["forward_ports"], json!([8080]), "{shown}");

    let client = f.env.start().await;
    let mut args = f.create_args("dc");
    args.as_object_mut().unwrap().remove("image");
    let described = created(&client.call("environment_create", args).await);
    assert_eq!(
        described["devcontainer"]["file"],
        ".devcontainer/devcontainer.json"
    );
    let listed = described["devcontainer"]["not_honoured"].to_string();
    assert!(
        listed.contains("features") && listed.contains("mounts"),
        "{described}"
    );
    assert_eq!(described["forward_ports"], json!([8080]), "{described}");

    let r = client
        .call(
            "environment_run_cmd",
            f.run_args(
                "dc",
                "echo $MODE $EDITOR && cat /tmp/made.txt && test ! -e /host-etc",
            ),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert_eq!(structured(&r)["stdout"], "dev vi\nmade\npost\n", "{r:?}");

    // A server started without `ports` is reached on the forwarded one.
    let mut args = f.run_args("dc", "httpd -f -p 8080 -h /workdir");
    args["background"] = json!(true);
    let r = client.call("environment_run_cmd", args).await;
    assert!(!is_error(&r), "{r:?}");
    let external = structured(&r)["endpoints"]["8080"]["host_external"]
        .as_str()
        .unwrap_or_else(|| panic!("8080 not forwarded: {r:?}"))
        .to_string();
    let port: u16 = external.rsplit(':').next().unwrap().parse().unwrap();
    let page = crate::cofer::http_get_at("127.0.0.1", port, "/README.md").await;
    assert!(page.contains("hello"), "{page}");

    // The person's config wins over the file, field by field.
    let set = cofer(
        &f.repo,
        &[
            "config",
            "setup-command",
            "add",
            "echo mine > /tmp/mine.txt",
        ],
    );
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let shown = cofer(&f.repo, &["config", "show"]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("from .devcontainer/devcontainer.json"),
        "{shown}"
    );
    assert!(shown.contains("config.json"), "{shown}");
    let r = client.call("environment_destroy", f.scoped("dc")).await;
    assert!(!is_error(&r), "{r:?}");
}

/// `build.dockerfile` is built by the engine from the repository (its
/// `.git` left out of the context), and the environment runs the image;
/// a base image that is not local (nor pullable by the policy) is refused
/// before anything is built, saying how to get it.
#[tokio::test(flavor = "multi_thread")]
async fn a_devcontainer_dockerfile_is_built_by_the_engine() {
    let Some(f) = Fixture::with_podman(&[], true).await else {
        return;
    };
    commit_file(
        &f,
        ".devcontainer.json",
        r#"{ "build": { "dockerfile": ".devcontainer/Dockerfile", "context": "." } }"#,
    );
    commit_file(
        &f,
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {}\nCOPY README.md /from-context.txt\nRUN echo built > /built.txt\nENV FROM_DOCKERFILE=yes\n",
            cofer_image()
        ),
    );
    let client = f.env.start().await;
    let mut args = f.create_args("built");
    args.as_object_mut().unwrap().remove("image");
    let described = created(&client.call("environment_create", args).await);
    let image = described["config"]["base_image"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        image.starts_with("localhost/cofer-devcontainer-"),
        "{described}"
    );
    let r = client
        .call(
            "environment_run_cmd",
            f.run_args(
                "built",
                "cat /built.txt /from-context.txt && echo $FROM_DOCKERFILE",
            ),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert_eq!(structured(&r)["stdout"], "built\nhello\nyes\n", "{r:?}");
    let r = client.call("environment_destroy", f.scoped("built")).await;
    assert!(!is_error(&r), "{r:?}");
    podman(&["rmi", &image]);

    // A base that is not here, and that the policy does not let the host pull.
    commit_file(
        &f,
        ".devcontainer/Dockerfile",
        "FROM docker.io/library/not-here-cofer-test:1\n",
    );
    let mut args = f.create_args("nobase");
    args.as_object_mut().unwrap().remove("image");
    let r = client.call("environment_create", args).await;
    let err = error_of(&r);
    assert!(err.to_string().contains("not-here-cofer-test"), "{err}");
    assert!(!f.repo.join(".cofer/worktrees/nobase").exists());
}
