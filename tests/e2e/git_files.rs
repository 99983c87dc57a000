//! Issue 70: no plugin writes git's own files. A plugin with nothing but
//! `fs.write` on the workspace tries every way in (a config appended to,
//! a hook created, alternates, a link planted to `.git/config`, a hard
//! link, a rename, `.git` under other names, a bare repository made from
//! nothing); each is refused by the host's file system, while the same
//! plugin's ordinary writes work.

use serde_json::{Value, json};

use crate::harness::*;

const CONFIG: &str = "[plugins.faulty]\ncapabilities = [\"fs\"]\nfs.read = [\"${workspace}\"]\nfs.write = [\"${workspace}\"]\n";

/// Run `steps` in the faulty plugin; each one's outcome.
async fn steps(host: &Client, steps: Value) -> Vec<String> {
    let r = host.call("fault_fs", json!({ "steps": steps })).await;
    assert!(!is_error(&r), "{r:?}");
    structured(&r)["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_plugin_writes_gits_own_files_under_any_name() {
    let env = Env::new(&["faulty"], CONFIG);
    let ws = env.workspace.clone();
    git(&ws, &["init", "-q"]);
    std::fs::write(ws.join("README.md"), "hi\n").unwrap();
    git(&ws, &["add", "README.md"]);
    git(&ws, &["commit", "-q", "-m", "base"]);
    git(&ws, &["init", "-q", "--bare", ".git/cofer/remote.git"]);
    let config_before = std::fs::read(ws.join(".git/config")).unwrap();
    // A link planted in the working tree (by a container, a test project).
    std::os::unix::fs::symlink(".git/config", ws.join("innocent.txt")).unwrap();
    std::os::unix::fs::symlink(".git", ws.join("gitdir-link")).unwrap();
    std::fs::create_dir(ws.join("deep")).unwrap();
    let w = |rel: &str| ws.join(rel).display().to_string();
    let evil = "\n[core]\n\talternateRefsCommand = sh -c 'touch /tmp/pwned'\n";

    let refused = steps(
        &env.start().await,
        json!([
            {"op": "append", "path": w(".git/config"), "text": evil},
            {"op": "append", "path": w(".git/cofer/remote.git/config"), "text": evil},
            {"op": "write", "path": w(".git/cofer/remote.git/objects/info/alternates"), "text": "/x\n"},
            {"op": "write", "path": w(".git/hooks/pre-commit"), "text": "#!/bin/sh\n"},
            {"op": "append", "path": w("innocent.txt"), "text": evil},
            {"op": "append", "path": w("gitdir-link/config"), "text": evil},
            {"op": "link", "path": w(".git/config"), "to": w("config-copy")},
            {"op": "rename", "path": w(".git"), "to": w("moved")},
            {"op": "rename", "path": w("README.md"), "to": w(".git/info/attributes")},
            {"op": "remove", "path": w(".git/index")},
            {"op": "rmdir", "path": w(".git/refs")},
            {"op": "mkdir", "path": w(".GIT")},
            {"op": "mkdir", "path": w("sub/.git./hooks")},
            {"op": "write", "path": w("git~1"), "text": "x"},
            {"op": "write", "path": w("deep/.git"), "text": "gitdir: /elsewhere\n"},
        ]),
    )
    .await;
    for (i, said) in refused.iter().enumerate() {
        assert!(
            said.contains("not permitted") || said.contains("denied"),
            "step {i} was not refused: {said} ({refused:?})"
        );
    }
    assert_eq!(
        std::fs::read(ws.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert!(
        !ws.join(".git/cofer/remote.git/objects/info/alternates")
            .exists()
    );
    assert!(ws.join(".git/index").exists() && !ws.join("moved").exists());
    assert!(!ws.join("config-copy").exists());
    assert!(env.logged("git's own files are the user's") > 0);
}

/// A folder is not made into a repository git would open, whatever its
/// name; the plugin's ordinary work (files, folders, renames, removals,
/// a folder named `refs` or `objects` alone) goes on.
#[tokio::test(flavor = "multi_thread")]
async fn no_plugin_makes_a_repository_and_ordinary_writes_work() {
    let env = Env::new(&["faulty"], CONFIG);
    let ws = env.workspace.clone();
    let w = |rel: &str| ws.join(rel).display().to_string();
    let said = steps(
        &env.start().await,
        json!([
            {"op": "mkdir", "path": w("src/objects")},
            {"op": "mkdir", "path": w("src/refs")},
            {"op": "write", "path": w("src/main.rs"), "text": "fn main() {}\n"},
            {"op": "rename", "path": w("src/main.rs"), "to": w("src/lib.rs")},
            {"op": "link", "path": w("src/lib.rs"), "to": w("src/again.rs")},
            {"op": "remove", "path": w("src/again.rs")},
            {"op": "mkdir", "path": w("bare/objects")},
            {"op": "mkdir", "path": w("bare/refs")},
            {"op": "write", "path": w("bare/HEAD"), "text": "ref: refs/heads/main\n"},
            {"op": "mkdir", "path": w("wt-admin")},
            {"op": "write", "path": w("wt-admin/HEAD"), "text": "0000\n"},
            {"op": "write", "path": w("wt-admin/commondir"), "text": "../..\n"},
            // A folder made where the root itself is (create_dir_all of
            // a granted folder, as pi's agent folder is) exists already.
            {"op": "mkdir", "path": ws.display().to_string()},
            {"op": "mkdir", "path": w("src/refs/..")},
            {"op": "write", "path": w("src/refs/../again.rs"), "text": "x\n"},
        ]),
    )
    .await;
    assert_eq!(&said[..6], ["ok"; 6], "{said:?}");
    assert!(said[8].contains("not permitted"), "{said:?}");
    assert_eq!(said[9..11], ["ok", "ok"], "{said:?}");
    assert!(said[11].contains("not permitted"), "{said:?}");
    assert_eq!(said[12..], ["ok"; 3], "{said:?}");
    assert!(!ws.join("bare/HEAD").exists() && !ws.join("wt-admin/commondir").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("src/lib.rs")).unwrap(),
        "fn main() {}\n"
    );
}
