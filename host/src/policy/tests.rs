use super::*;

fn places() -> Places {
    Places {
        workspace: "/ws".into(),
        home: "/home/u".into(),
        cache_dir: "/cache".into(),
    }
}

#[test]
fn default_policy_grants_run_test_process_and_denies_others() {
    let config = Config::load(None).unwrap();
    let run_test = config.grants("run_test", &places(), "cfg.toml");
    assert!(run_test.has("process"));
    assert!(run_test.programs.contains(&"cargo".to_string()));
    assert_eq!(run_test.write_roots, vec![PathBuf::from("/ws")]);
    // Cofer may run any image, but only its default one is pulled.
    let cofer = config.grants("cofer", &places(), "cfg.toml");
    assert_eq!(cofer.images, ["*"]);
    assert_eq!(cofer.pull.len(), 1, "{:?}", cofer.pull);
    assert!(!cofer.pull[0].contains("${"), "{:?}", cofer.pull);
    let other = config.grants("stranger", &places(), "cfg.toml");
    assert!(!other.has("process"));
    assert!(other.pull.is_empty());
    let denial = other.require("process").unwrap_err();
    assert!(
        denial.contains("plugin `stranger`")
            && denial.contains("capabilities")
            && denial.contains("[plugins.stranger]"),
        "{denial}"
    );
}

#[test]
fn user_file_merges_key_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(
        &file,
        "[plugins.run_test.limits]\ntimeout_ms = 5\n[plugins.x]\ncapabilities=[\"process\"]\n",
    )
    .unwrap();
    let config = Config::load(Some(&file)).unwrap();
    let g = config.grants("run_test", &places(), "c.toml");
    assert_eq!(g.timeout_ms, 5);
    assert!(g.has("process"), "untouched keys keep the shipped value");
    assert!(config.grants("x", &places(), "c.toml").has("process"));
}

#[test]
fn placeholders_expand_with_host_variables_and_fallbacks() {
    let cache = Path::new("/cache/plugins/p");
    // SAFETY: this test is the only reader of this variable.
    unsafe { std::env::set_var("MCP_HOST_TEST_DOCS", "docs/4.x") };
    assert_eq!(
        expand_path(
            "${env:MCP_HOST_TEST_DOCS|${workspace}/doc}",
            &places(),
            cache
        ),
        PathBuf::from("/ws/docs/4.x")
    );
    assert_eq!(
        expand_path(
            "${env:MCP_HOST_TEST_UNSET|${workspace}/doc}",
            &places(),
            cache
        ),
        PathBuf::from("/ws/doc")
    );
    assert_eq!(
        expand_path("${plugin_cache}/index/../x", &places(), cache),
        PathBuf::from("/cache/plugins/p/x")
    );
    // A list grants each of its paths.
    // SAFETY: as above.
    let list = format!(
        "docs/4.x{0}/abs/3.x{0}",
        crate::platform::PATH_LIST_SEPARATOR
    );
    unsafe { std::env::set_var("MCP_HOST_TEST_DOC_LIST", list) };
    assert_eq!(
        expand_paths("${env:MCP_HOST_TEST_DOC_LIST|}", &places(), cache),
        [PathBuf::from("/ws/docs/4.x"), PathBuf::from("/abs/3.x")]
    );
    assert_eq!(
        expand("a-${env:MCP_HOST_TEST_UNSET|b}-c", &places(), cache),
        "a-b-c"
    );
    // Where `:` separates lists, a `:` in a resolved path is part of it:
    // `proj:v2` never grants `proj`. (On Windows no name holds a `:`.)
    if crate::platform::PATH_LIST_SEPARATOR == ":" {
        let colon = Places {
            workspace: PathBuf::from("/src/proj:v2"),
            home: PathBuf::from("/home/a:b"),
            cache_dir: PathBuf::from("/cache"),
        };
        assert_eq!(
            expand_paths("${env:MCP_HOST_TEST_UNSET|${workspace}/doc}", &colon, cache),
            [PathBuf::from("/src/proj:v2/doc")]
        );
        assert_eq!(
            expand_paths("${workspace}:${home}/x", &colon, Path::new("/c:d")),
            [PathBuf::from("/src/proj:v2"), PathBuf::from("/home/a:b/x")]
        );
        assert_eq!(
            expand_paths("${plugin_cache}/i", &colon, Path::new("/c:d")),
            [PathBuf::from("/c:d/i")]
        );
    }
    let config = Config::load(None).unwrap();
    let godot = config.grants("godot", &places(), "cfg.toml");
    assert!(godot.has("index") && godot.has("fs") && godot.has("process"));
    assert_eq!(
        godot.write_roots,
        [PathBuf::from("/cache/plugins/godot/engine-docs")],
        "the Godot plugin writes only its index and its engine's dumped reference"
    );
    assert!(godot.programs.contains(&"godot3-server".to_string()));
}

#[test]
fn unknown_keys_and_capabilities_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "[plugins.x]\ncapabilites=[\"process\"]\n").unwrap();
    let err = format!("{:#}", Config::load(Some(&file)).unwrap_err());
    assert!(err.contains("capabilites"), "{err}");
    std::fs::write(&file, "[plugins.x]\ncapabilities=[\"network\"]\n").unwrap();
    let err = format!("{:#}", Config::load(Some(&file)).unwrap_err());
    assert!(err.contains("unknown capability `network`"), "{err}");
    std::fs::write(&file, "[plugins.x.limits]\nmemory_mb = 4096\n").unwrap();
    let err = format!("{:#}", Config::load(Some(&file)).unwrap_err());
    assert!(err.contains("limits.memory_mb = 4096"), "{err}");
    std::fs::write(&file, "[plugins.x.limits]\ntimeout_ms = 0\n").unwrap();
    let err = format!("{:#}", Config::load(Some(&file)).unwrap_err());
    assert!(err.contains("limits.timeout_ms = 0"), "{err}");
}

#[test]
fn grants_are_never_inherited_and_an_empty_list_means_none() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "[defaults.fs]\nwrite = [\"/srv\"]\n").unwrap();
    let err = format!("{:#}", Config::load(Some(&file)).unwrap_err());
    assert!(
        err.contains("[defaults] fs.write") && err.contains("per plugin"),
        "{err}"
    );
    std::fs::write(&file, "[plugins.run_test.fs]\nwrite = []\n").unwrap();
    let config = Config::load(Some(&file)).unwrap();
    let g = config.grants("run_test", &places(), "c.toml");
    assert!(g.write_roots.is_empty(), "{:?}", g.write_roots);
    assert!(!g.read_roots.is_empty(), "fs.read keeps the shipped value");
}

#[test]
fn engines_are_named_with_a_url_and_an_address() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(
        &file,
        "[plugins.cofer.containers.engines]\nlab = \"ssh://core@10.0.0.5:2222/run/podman/podman.sock\"\n\
         near = \"tcp://127.0.0.1:8888\"\n\
         open = { url = \"tcp://10.0.0.6:8888\", insecure = true }\n\
         tunnel = { url = \"unix:///run/lab.sock\", address = \"lab.example\" }\n\
         [plugins.cofer.containers.pools]\nteam = [\"lab\", \"local\"]\n",
    )
    .unwrap();
    let g = Config::load(Some(&file))
        .unwrap()
        .grants("cofer", &places(), "c.toml");
    let named: Vec<(&str, &str, &str)> = g
        .engines
        .iter()
        .map(|e| (e.name.as_str(), e.url.as_str(), e.address.as_str()))
        .collect();
    assert_eq!(
        named,
        [
            (
                "lab",
                "ssh://core@10.0.0.5:2222/run/podman/podman.sock",
                "10.0.0.5"
            ),
            ("near", "tcp://127.0.0.1:8888", "127.0.0.1"),
            ("open", "tcp://10.0.0.6:8888", "10.0.0.6"),
            ("tunnel", "unix:///run/lab.sock", "lab.example")
        ]
    );
    let ssh = g.engines[0].ssh.as_ref().unwrap();
    assert_eq!(
        (
            ssh.user.as_deref(),
            ssh.host.as_str(),
            ssh.port,
            ssh.socket.as_str()
        ),
        (Some("core"), "10.0.0.5", 2222, "/run/podman/podman.sock")
    );
    assert!(ssh.known_hosts.ends_with(".ssh/known_hosts"), "{ssh:?}");
    assert_eq!(g.pools["team"], ["lab", "local"]);
    for (bad, says) in [
        // Podman's API over the network without ssh is root for anyone.
        ("x = \"tcp://10.0.0.5:8888\"", "insecure = true"),
        (
            "x = \"ssh://-oProxyCommand=x/run/p.sock\"",
            "ssh://user@host",
        ),
        ("x = \"ssh://me@lab\"", "no socket path"),
        ("x = \"ssh://me@lab/run/a:b.sock\"", "socket path with `:`"),
        ("x = \"http://lab/run/p.sock\"", "ssh://user@host"),
        ("x = \"tcp://10.0.0.5\"", "no port"),
        ("x = \"unix:///run/lab.sock\"", "address"),
        (
            "x = { connection = \"no-such-connection\" }",
            "podman system connection add",
        ),
        (
            "x = { url = \"tcp://127.0.0.1:1\", connection = \"c\" }",
            "either",
        ),
        ("local = \"tcp://127.0.0.1:1\"", "this machine's own"),
        (
            "x = \"tcp://127.0.0.1:1\"\n[plugins.cofer.containers.pools]\nteam = [\"x\", \"gone\"]",
            "`gone` is not an engine",
        ),
        (
            "x = \"tcp://127.0.0.1:1\"\n[plugins.cofer.containers.pools]\nx = [\"local\"]",
            "an engine has that name",
        ),
    ] {
        std::fs::write(
            &file,
            format!("[plugins.cofer.containers.engines]\n{bad}\n"),
        )
        .unwrap();
        let err = format!("{:#}", Config::load(Some(&file)).unwrap_err());
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn check_warns_of_misspelt_tables_and_wide_grants() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(
        &file,
        "[plugins.run-test]\ncapabilities = [\"process\"]\n\
         [plugins.run_test]\nfs.write = [\"/\"]\nprocess.programs = [\"cargo\", \"/bin/sh\", \"python3.12\"]\n",
    )
    .unwrap();
    let config = Config::load(Some(&file)).unwrap();
    let warnings = config.warnings(&["run_test", "godot"], &places());
    let has = |needle: &str| warnings.iter().any(|w| w.contains(needle));
    assert!(has("[plugins.run-test] names no plugin"), "{warnings:?}");
    assert!(
        has("fs.write grants ") && has("the whole machine"),
        "{warnings:?}"
    );
    assert!(has("`/bin/sh`") && has("`python3.12`"), "{warnings:?}");
    assert!(!has("`cargo`"), "{warnings:?}");
    assert_eq!(
        warnings.len(),
        4,
        "shipped tables of absent plugins are no warning: {warnings:?}"
    );
}

#[test]
fn an_unset_variable_without_fallback_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(
        &file,
        "[plugins.x]\nfs.write = [\"${env:MCP_HOST_TEST_NEVER_SET}/out\"]\n",
    )
    .unwrap();
    let err = format!("{:#}", Config::load(Some(&file)).unwrap_err());
    assert!(
        err.contains("[plugins.x] fs.write") && err.contains("MCP_HOST_TEST_NEVER_SET"),
        "{err}"
    );
    std::fs::write(
        &file,
        "[plugins.x]\nvars.A = \"${env:MCP_HOST_TEST_NEVER_SET|}\"\n",
    )
    .unwrap();
    assert!(
        Config::load(Some(&file)).is_ok(),
        "an explicit empty fallback is fine"
    );
}

/// Issue 71: what a plugin's programs may touch comes from its policy.
#[test]
fn a_plugins_programs_are_confined_to_its_grants_unless_it_says_otherwise() {
    let text = "[plugins.x]\nfs.write = [\"${workspace}\"]\nprocess.write = [\"${home}/.cache/x\"]\n\
        process.read = [\"${home}/.ssh\"]\n\
        process.connect = [443, \"https://a.example:8443/v1\", \"http://b.example\", \"${env:MCP_TEST_UNSET_URL|}\"]\n\
        [plugins.y]\nprocess.confine = false\n\
        [plugins.z]\ncontainers.secrets = \"${home}/s.toml\"\n";
    let config = Config::parse(Some((Path::new("c.toml"), text))).unwrap();
    let x = config.grants("x", &places(), "c").confinement.unwrap();
    assert!(
        x.write.contains(&PathBuf::from("/ws"))
            && x.write.contains(&PathBuf::from("/home/u/.cache/x"))
    );
    assert!(x.write.contains(&PathBuf::from("/dev/null")));
    assert_eq!(x.read[0], PathBuf::from("/"));
    assert!(x.read.contains(&PathBuf::from("/home/u/.ssh")));
    for hidden in ["/home/u/.ssh", "/home/u/.aws", "/cache", "/home/u/s.toml"] {
        assert!(
            x.hidden.contains(&PathBuf::from(hidden)),
            "{hidden}: {:?}",
            x.hidden
        );
    }
    assert_eq!(x.connect, Some(vec![443, 8443, 80]));
    assert_eq!(x.bind, None);
    assert!(config.grants("y", &places(), "c").confinement.is_none());
    // A process.write folder is one a plugin writes: no program is looked up there.
    assert!(
        config
            .grants("y", &places(), "c")
            .untrusted_dirs
            .contains(&PathBuf::from("/home/u/.cache/x"))
    );
    let bad = Config::parse(Some((
        Path::new("c.toml"),
        "[plugins.x]\nprocess.connect = [\"port 80\"]\n",
    )));
    let why = format!("{:#}", bad.unwrap_err());
    assert!(
        why.contains("process.connect") && why.contains("neither a port nor a URL"),
        "{why}"
    );
}

#[test]
fn an_ssh_engine_is_recorded_on_one_line_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(
        &file,
        "[plugins.cofer.containers.engines]\nlab = { url = \"ssh://me@[::1]:2222/run/my podman/p.sock\", identity = \"/k/id lab\", known_hosts = \"/k/known&hosts\" }\n",
    )
    .unwrap();
    let g = Config::load(Some(&file))
        .unwrap()
        .grants("cofer", &places(), "c.toml");
    let target = g.engines[0].ssh.clone().unwrap();
    assert_eq!(target.socket, "/run/my podman/p.sock");
    let line = target.record();
    assert!(!line.contains('\n') && !line.contains(' '), "{line}");
    assert_eq!(
        crate::policy::SshTarget::from_record(&line).unwrap(),
        target
    );
}
