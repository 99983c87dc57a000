use super::*;

const FILE: &str = r#"{
    // A comment, as the spec allows.
    "name": "web",
    "image": "localhost/cofer-test:1",
    "containerEnv": { "MODE": "dev", "HOME_HERE": "${localEnv:HOME}" },
    "remoteEnv": { "EDITOR": "vi" },
    "postCreateCommand": ["sh", "-c", "echo it's made > made.txt"],
    "onCreateCommand": "echo first > first.txt",
    "forwardPorts": [8080, "3000", 8080],
    "features": { "ghcr.io/devcontainers/features/node:1": {} },
    "runArgs": ["--privileged"],
    "customizations": { "vscode": {} },
}"#;

#[test]
fn honoured_properties_become_defaults_and_the_rest_is_listed() {
    let d = parse(".devcontainer/devcontainer.json", FILE).unwrap();
    assert_eq!(d.image.as_deref(), Some("localhost/cofer-test:1"));
    assert_eq!(d.envs, ["MODE=dev", "EDITOR=vi"]);
    assert_eq!(
        d.setup_commands,
        [
            "echo first > first.txt",
            "sh -c 'echo it'\\''s made > made.txt'"
        ]
    );
    assert_eq!(d.forward_ports, [3000, 8080]);
    let listed = d.not_honoured.join("\n");
    for key in ["features", "runArgs", "containerEnv.HOME_HERE"] {
        assert!(listed.contains(key), "{key}: {listed}");
    }
    assert!(!listed.contains("customizations"), "{listed}");
}

#[test]
fn a_build_stays_inside_the_repository() {
    let d = parse(
        ".devcontainer/devcontainer.json",
        r#"{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {}}}"#,
    )
    .unwrap();
    assert_eq!(
        d.build,
        Some(Build {
            dockerfile: ".devcontainer/Dockerfile".into(),
            context: ".".into()
        })
    );
    assert!(d.not_honoured.iter().any(|n| n.starts_with("build.args")));
    for bad in [
        r#"{"build": {"dockerfile": "../../Dockerfile"}}"#.to_string(),
        r#"{"build": {"dockerfile": "Dockerfile", "context": "../.."}}"#.to_string(),
        r#"{"build": {"dockerfile": "/etc/Dockerfile"}}"#.to_string(),
        r#"{"image": "a", "build": {"dockerfile": "D"}}"#.to_string(),
        r#"{"image": "--privileged"}"#.to_string(),
        r#"{"forwardPorts": ["db:5432"]}"#.to_string(),
        r#"{"forwardPorts": [70000]}"#.to_string(),
        r#"{"containerEnv": {"A=B": "c"}}"#.to_string(),
        r#"[1]"#.to_string(),
        r#"{"image": "a" "#.to_string(),
        format!("{{\"x\": {}1{}}}", "[".repeat(100), "]".repeat(100)),
    ] {
        assert!(
            parse(".devcontainer/devcontainer.json", &bad).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn the_file_is_found_where_the_spec_puts_it_and_a_link_is_refused() {
    let repo = tempfile_dir();
    assert_eq!(read(&repo).unwrap(), None);
    std::fs::write(repo.join(".devcontainer.json"), r#"{"image": "x"}"#).unwrap();
    assert_eq!(read(&repo).unwrap().unwrap().file, ".devcontainer.json");
    std::fs::create_dir(repo.join(".devcontainer")).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc/passwd", repo.join(".devcontainer/devcontainer.json"))
            .unwrap();
        assert!(read(&repo).unwrap_err().contains("not a plain file"));
        std::fs::remove_file(repo.join(".devcontainer/devcontainer.json")).unwrap();
    }
    std::fs::write(
        repo.join(".devcontainer/devcontainer.json"),
        r#"{"image": "y"}"#,
    )
    .unwrap();
    assert_eq!(read(&repo).unwrap().unwrap().image.as_deref(), Some("y"));
    std::fs::remove_dir_all(&repo).unwrap();
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("devcontainer-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
