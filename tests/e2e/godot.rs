//! The Godot docs plugin through the real host: the real class reference
//! (queries.tsv), every tool and resource, persistence, rebuild of a
//! corrupt index, the background rebuild when the XML changes, and
//! configuration errors.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};

use crate::harness::*;

pub(crate) fn fixture_docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/godot/doc")
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

pub(crate) fn results(result: &rmcp::model::CallToolResult) -> Vec<Value> {
    structured(result)["results"].as_array().unwrap().clone()
}

fn error_code(result: &rmcp::model::CallToolResult) -> String {
    assert!(is_error(result), "expected an error: {result:?}");
    structured(result)["code"].as_str().unwrap().to_string()
}

async fn read(client: &Client, uri: &str) -> Result<Value, rmcp::ServiceError> {
    let result = client
        .service
        .read_resource(ReadResourceRequestParams::new(uri))
        .await?;
    match &result.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => {
            Ok(serde_json::from_str(text).unwrap())
        }
        other => panic!("unexpected contents {other:?}"),
    }
}

/// How many of queries.tsv's 30 queries rank their expected URI (or an
/// `alt:` of its note) first, and the misses.
pub(crate) async fn queries_first(client: &Client, docs: &Path) -> (usize, Vec<String>) {
    let tsv = std::fs::read_to_string(docs.join("queries.tsv")).unwrap();
    let mut right = 0;
    let mut misses = Vec::new();
    for line in tsv.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (query, kind, expected, note) = (
            cols[0],
            cols[1],
            cols[2],
            cols.get(3).copied().unwrap_or(""),
        );
        let mut accepted = vec![expected.to_string()];
        accepted.extend(
            note.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
                .filter_map(|t| t.strip_prefix("alt:"))
                .map(|t| t.trim_end_matches([';', ',', '.']).to_string()),
        );
        let mut args = json!({ "query": query, "limit": 3 });
        if !kind.is_empty() {
            args["kind"] = json!(kind);
        }
        let found = results(&client.call("godot.search", args).await);
        let top = found
            .first()
            .map(|r| r["uri"].as_str().unwrap().to_string())
            .unwrap_or_default();
        if accepted.contains(&top) {
            right += 1;
        } else {
            misses.push(format!("{query:?}: got {top}, want {expected}"));
        }
    }
    eprintln!("queries.tsv: {right}/30 top-1 right; misses: {misses:#?}");
    (right, misses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_reference_ranks_queries_and_serves_tools_and_resources() {
    let Some(docs) = godot_docs() else { return };
    let env = Env::new(&["godot"], &godot_config(&docs.join("4.x")));
    let client = env.start().await;

    // Every query of queries.tsv: its expected URI (or a listed alt) first.
    let (right, misses) = queries_first(&client, &docs).await;
    assert!(
        right == 30,
        "only {right}/30 queries rank their expected result first: {misses:#?}"
    );

    // Every class of the reference (classes + modules) was indexed.
    let all = client
        .call("godot.list_classes", json!({ "limit": 5000 }))
        .await;
    assert_eq!(structured(&all)["classes"].as_array().unwrap().len(), 1058);
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    assert!(
        !log.contains("does not parse"),
        "a 4.x class failed to parse"
    );

    // Search results: descending scores, highlighted snippets, kind filter, limit.
    let found = results(
        &client
            .call(
                "godot.search",
                json!({ "query": "countdown timer", "limit": 5 }),
            )
            .await,
    );
    assert!(found.len() <= 5 && !found.is_empty());
    assert!(
        found
            .windows(2)
            .all(|w| w[0]["score"].as_f64() >= w[1]["score"].as_f64()),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|r| r["snippet"].as_str().unwrap().contains("**")),
        "matched words highlighted: {found:#?}"
    );
    for r in &found {
        for key in ["uri", "name", "kind", "score", "snippet"] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
    }
    // Issue 54, item 13: each overload of a constructor has a URI of its
    // own, and each URI opens that overload.
    let ctors: Vec<Value> = results(
        &client
            .call(
                "godot.search",
                json!({ "query": "Vector2 constructor", "limit": 10 }),
            )
            .await,
    )
    .into_iter()
    .filter(|r| r["kind"] == "constructor" && r["class"] == "Vector2")
    .collect();
    let uris: std::collections::BTreeSet<&str> =
        ctors.iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert!(ctors.len() > 1 && uris.len() == ctors.len(), "{ctors:#?}");
    let second = read(&client, "godot://symbol/Vector2/constructor/Vector2~2")
        .await
        .unwrap();
    let first = read(&client, "godot://symbol/Vector2/constructor/Vector2")
        .await
        .unwrap();
    assert_ne!(first["params"], second["params"], "{first:#} {second:#}");
    assert_eq!(
        second["uri"],
        "godot://symbol/Vector2/constructor/Vector2~2"
    );
    assert!(
        second["overloads"].as_array().unwrap().len() > 1,
        "{second:#}"
    );

    // Issue 54, item 13: no highlight inside a code span, no empty bold.
    for query in ["node", "physics process", "get node path", "signal emit"] {
        for r in results(
            &client
                .call("godot.search", json!({ "query": query, "limit": 20 }))
                .await,
        ) {
            let snippet = r["snippet"].as_str().unwrap();
            let in_code = snippet
                .split('`')
                .skip(1)
                .step_by(2)
                .any(|c| c.contains("**"));
            assert!(!in_code && !snippet.contains("****"), "{query}: {snippet}");
            assert_eq!(snippet.matches("**").count() % 2, 0, "{query}: {snippet}");
        }
    }
    let signals = results(
        &client
            .call(
                "godot.search",
                json!({ "query": "timeout", "kind": "signal" }),
            )
            .await,
    );
    assert!(
        signals.iter().all(|r| r["kind"] == "signal"),
        "{signals:#?}"
    );
    let none = client
        .call("godot.search", json!({ "query": "zzqqxxyy" }))
        .await;
    assert!(
        !is_error(&none) && results(&none).is_empty(),
        "no match is an empty list: {none:?}"
    );

    // Classes: every section present, missing ones empty.
    let node = client
        .call("godot.get_class", json!({ "name": "Node" }))
        .await;
    let node = structured(&node);
    assert_eq!(node["inherits"], "Object");
    assert!(
        node["methods"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "_ready")
    );
    assert_eq!(node["theme_items"], json!([]));
    let missing = client
        .call("godot.get_class", json!({ "name": "Nod2D" }))
        .await;
    assert_eq!(error_code(&missing), "NOT_FOUND");
    let suggestions = structured(&missing)["suggestions"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        suggestions.len() <= 5 && suggestions.contains(&json!("Node2D")),
        "{suggestions:?}"
    );

    // Symbols, including one inherited from an ancestor.
    let ready = client
        .call("godot.get_symbol", json!({ "qname": "Node._ready" }))
        .await;
    assert_eq!(
        (
            structured(&ready)["kind"].as_str(),
            structured(&ready)["qualifiers"].as_str()
        ),
        (Some("method"), Some("virtual"))
    );
    let x = client
        .call("godot.get_symbol", json!({ "qname": "Vector2.x" }))
        .await;
    assert_eq!(structured(&x)["kind"], "property");
    let pressed = client
        .call("godot.get_symbol", json!({ "qname": "Button.pressed" }))
        .await;
    assert_eq!(
        (
            structured(&pressed)["kind"].as_str(),
            structured(&pressed)["inherited_from"].as_str()
        ),
        (Some("signal"), Some("BaseButton"))
    );
    let style = client
        .call(
            "godot.get_symbol",
            json!({ "qname": "Button.pressed", "kind": "theme_item" }),
        )
        .await;
    assert_eq!(structured(&style)["data_type"], "style");
    let typo = client
        .call("godot.get_symbol", json!({ "qname": "Node.queue_fre" }))
        .await;
    assert_eq!(error_code(&typo), "NOT_FOUND");
    assert_eq!(structured(&typo)["suggestions"][0], "Node.queue_free");
    let bad = client
        .call("godot.get_symbol", json!({ "qname": "queue_free" }))
        .await;
    assert_eq!(error_code(&bad), "INVALID_ARGUMENT");
    assert!(
        structured(&bad)["message"]
            .as_str()
            .unwrap()
            .contains("Node._ready"),
        "shows the right form: {bad:?}"
    );
    let no_key = client.call("godot.get_symbol", json!({})).await;
    assert_eq!(error_code(&no_key), "INVALID_ARGUMENT");
    assert!(
        structured(&no_key)["message"]
            .as_str()
            .unwrap()
            .contains("qname"),
        "names the missing key: {no_key:?}"
    );

    let list = client
        .call(
            "godot.list_classes",
            json!({ "prefix": "audiostreamplayer", "limit": 3 }),
        )
        .await;
    assert_eq!(
        structured(&list)["classes"],
        json!([
            "AudioStreamPlayer",
            "AudioStreamPlayer2D",
            "AudioStreamPlayer3D"
        ])
    );

    // The same data as MCP resources.
    let templates = client
        .service
        .list_resource_templates(None)
        .await
        .unwrap()
        .resource_templates;
    let uris: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(
        uris,
        [
            "godot://class/{name}",
            "godot://symbol/{class}/{kind}/{name}",
            "godot://search{?q,kind}",
            "godot://manual/{+page}"
        ]
    );
    assert_eq!(
        read(&client, "godot://class/@GlobalScope").await.unwrap()["name"],
        "@GlobalScope"
    );
    let key = read(&client, "godot://symbol/@GlobalScope/constant/KEY_ESCAPE")
        .await
        .unwrap();
    assert_eq!(key["enum"], "Key");
    let search = read(&client, "godot://search?q=queue_free&kind=method")
        .await
        .unwrap();
    assert_eq!(
        search["results"][0]["uri"],
        "godot://symbol/Node/method/queue_free"
    );
    let err = read(&client, "godot://class/NoSuchClass")
        .await
        .unwrap_err();
    assert!(format!("{err}").contains("NoSuchClass"), "{err}");
    let err = read(&client, "godot://nonsense").await.unwrap_err();
    assert!(format!("{err}").contains("godot://class/<Class>"), "{err}");

    // Debug logs: the analysed query and top scores, never whole documents.
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    assert!(
        log.contains("query analysed") && log.contains("top scores"),
        "debug search records missing"
    );
    assert!(
        !log.contains("Nodes are Godot's building blocks"),
        "a document body reached the log"
    );
}

#[tokio::test]
async fn real_3x_reference_parses_completely() {
    let Some(docs) = godot_docs() else { return };
    let env = Env::new(&["godot"], &godot_config(&docs.join("3.x")));
    let out = env
        .host(&["call", "godot.list_classes", r#"{"limit": 5000}"#])
        .output()
        .await
        .unwrap();
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        fields(&reply)["classes"].as_array().unwrap().len(),
        714,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("does not parse"));
    // 3.x <argument> elements are parameters.
    let out = env
        .host(&["call", "godot.get_symbol", r#"{"qname": "Node.add_child"}"#])
        .output()
        .await
        .unwrap();
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fields(&reply)["params"][0]["name"], "node", "{reply:#}");
    let out = env
        .host(&["call", "godot.get_class", r#"{"name": "Node"}"#])
        .output()
        .await
        .unwrap();
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reply = fields(&reply);
    let url = reply["tutorials"][0]["url"].as_str().unwrap();
    assert!(
        url.starts_with("https://docs.godotengine.org/en/3.6/"),
        "$DOCS_URL expanded with the file's version: {url}"
    );
}

/// How many questions of a set (tests/fixtures/godot-questions, each with
/// the answers that would do) find an answer first, and in the first
/// three; the misses.
pub(crate) async fn ask_set(
    client: &crate::harness::Client,
    set: &str,
) -> (usize, usize, usize, Vec<String>) {
    let questions = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/godot-questions")
            .join(set),
    )
    .unwrap();
    let (mut top1, mut top3, mut total, mut misses) = (0, 0, 0, Vec::new());
    for line in questions.lines().filter(|l| !l.starts_with('#')) {
        let (question, accepted) = line.split_once('\t').unwrap();
        let accepted: Vec<&str> = accepted.split_whitespace().collect();
        let found = results(
            &client
                .call("godot.search", json!({ "query": question, "limit": 3 }))
                .await,
        );
        let uris: Vec<&str> = found.iter().map(|r| r["uri"].as_str().unwrap()).collect();
        total += 1;
        match uris.iter().position(|u| accepted.contains(u)) {
            Some(0) => {
                top1 += 1;
                top3 += 1;
            }
            Some(n) => {
                top3 += 1;
                misses.push(format!("{question:?}: answer number {}", n + 1));
            }
            None => misses.push(format!("{question:?}: got {uris:?}")),
        }
    }
    eprintln!("{set}: top-1 {top1}/{total}, top-3 {top3}/{total}");
    (top1, top3, total, misses)
}

/// Each set's figures from [`ask_set`] against the top-1 and top-3 counts
/// it must reach.
pub(crate) fn at_least(sets: &[((usize, usize, usize, Vec<String>), (usize, usize), &str)]) {
    for ((top1, top3, total, _), (want1, want3), set) in sets {
        assert!(
            top1 >= want1 && top3 >= want3,
            "{set}: top-1 {top1}/{total}, top-3 {top3}/{total}, below {want1} / {want3}"
        );
    }
}

/// Questions in plain words: the set written with the thesaurus
/// (plain-words.tsv) and the development set written before the manual
/// was searched (sentences.tsv, issue 35). The manual is served when
/// $GODOT_DOCS holds it, as a user who set GODOT_MANUAL_DIR has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_word_questions_find_their_answer() {
    let Some(docs) = godot_docs() else { return };
    let config = godot_config_with_manual(&docs.join("4.x"), &docs.join("manual"));
    let env = Env::new(&["godot"], &config);
    let client = env.start().await;
    // Names stay exact with the manual's words beside the reference
    // (asserted last, so that every set's figures are printed).
    let names = queries_first(&client, &docs).await;
    let plain = ask_set(&client, "plain-words.tsv").await;
    let sentences = ask_set(&client, "sentences.tsv").await;
    // The second set's misses are not shown: it was kept out of tuning.
    let second = ask_set(&client, "sentences-2.tsv").await;
    // The later sets (issue 57) are measured with the vectors too
    // (godot_meaning); here for words alone.
    for set in &MEANING_SETS[3..] {
        ask_set(&client, set).await;
    }
    eprintln!("not first: {:#?}", [&plain.3, &sentences.3]);
    assert!(plain.2 >= 40 && sentences.2 >= 60 && second.2 >= 40);
    at_least(&[
        (plain, (PLAIN_TOP1, PLAIN_TOP3), "plain-words"),
        (sentences, (SENTENCE_TOP1, SENTENCE_TOP3), "sentences"),
        (second, (SECOND_TOP1, SECOND_TOP3), "sentences-2"),
    ]);
    let (right, misses) = names;
    assert!(
        right == 30,
        "with the manual, only {right}/30 queries rank their expected result first: {misses:#?}"
    );
}

/// No answer of get_class is longer than clients show a model whole
/// (issue 39, item 4): a long class comes compact, says what it left out,
/// and the rest is there by `section` and `offset`; the resource is whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_classes_fit_the_answer_budget_and_the_rest_is_reachable() {
    let Some(docs) = godot_docs() else { return };
    let env = Env::new(&["godot"], &godot_config(&docs.join("4.x")));
    let client = env.start().await;
    let text = |r: &rmcp::model::CallToolResult| {
        r.content[0].as_text().expect("a text answer").text.clone()
    };
    for (name, ancestors) in [
        ("Control", false),
        ("ProjectSettings", false),
        ("Control", true),
    ] {
        let r = client
            .call(
                "godot.get_class",
                json!({"name": name, "include_ancestors": ancestors}),
            )
            .await;
        assert!(!is_error(&r), "{r:?}");
        let answer = text(&r);
        assert!(answer.len() <= 20_000, "{name}: {} bytes", answer.len());
        let class = structured(&r);
        assert!(
            class["note"].as_str().unwrap().contains("section"),
            "{class:#}"
        );
        assert!(
            class["methods"][0]["summary"].is_string(),
            "{:#}",
            class["methods"][0]
        );
        if ancestors {
            let chain: Vec<&str> = class["inherited"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["class"].as_str().unwrap())
                .collect();
            assert_eq!(chain, ["CanvasItem", "Node", "Object"]);
        }
    }
    let first = structured(
        &client
            .call("godot.get_class", json!({"name": "Control"}))
            .await,
    );
    let next = first["omitted"]["methods"]["next_offset"].as_u64().unwrap();
    let total = first["omitted"]["methods"]["total"].as_u64().unwrap();
    let mut names: Vec<String> = first["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    let mut offset = next;
    while offset < total {
        let page = structured(
            &client
                .call(
                    "godot.get_class",
                    json!({"name": "Control", "section": "methods", "offset": offset}),
                )
                .await,
        );
        let listed = page["methods"].as_array().unwrap();
        assert!(!listed.is_empty(), "{page:#}");
        names.extend(
            listed
                .iter()
                .map(|m| m["name"].as_str().unwrap().to_string()),
        );
        offset = page["omitted"]["methods"]["next_offset"]
            .as_u64()
            .unwrap_or(total);
    }
    let whole = read(&client, "godot://class/Control").await.unwrap();
    let all: Vec<&str> = whole["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, all, "paging gives every method once, in order");
    assert!(
        whole["methods"][0]["description"].is_string(),
        "the resource is whole"
    );
}

/// The manual (issue 35, item 3): its sections are searched, ranked after
/// the three best reference entries, selected by `kind`, and read as
/// resources; a page outside the checkout cannot be named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manual_is_searched_and_read() {
    let Some(docs) = godot_docs() else { return };
    let config = godot_config_with_manual(&docs.join("4.x"), &docs.join("manual"));
    let env = Env::new(&["godot"], &config);
    let client = env.start().await;

    let only = client
        .call(
            "godot.search",
            json!({"query": "make the character jump", "kind": "manual", "limit": 5}),
        )
        .await;
    let only = results(&only);
    assert!(
        !only.is_empty() && only.iter().all(|r| r["kind"] == "manual"),
        "{only:#?}"
    );
    let first = only[0]["uri"].as_str().unwrap();
    assert!(
        first.starts_with("godot://manual/") && first.contains('#'),
        "{first}"
    );
    assert!(
        only.iter().any(|r| r["snippet"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("jump")),
        "{only:#?}"
    );

    let mixed = client
        .call(
            "godot.search",
            json!({"query": "how do I make my character jump", "limit": 10}),
        )
        .await;
    let mixed = results(&mixed);
    assert!(
        mixed[..3].iter().all(|r| r["kind"] != "manual"),
        "{mixed:#?}"
    );
    assert!(mixed.iter().any(|r| r["kind"] == "manual"), "{mixed:#?}");
    // A name is still a name (the 2D and 3D methods tie).
    let name = results(
        &client
            .call("godot.search", json!({"query": "move_and_slide"}))
            .await,
    );
    let names: Vec<&str> = name[..2]
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"CharacterBody2D.move_and_slide"),
        "{name:#?}"
    );

    let page = read(&client, first.split('#').next().unwrap())
        .await
        .unwrap();
    let sections = page["sections"].as_array().unwrap();
    assert!(sections.len() > 1, "{page:#}");
    let section = read(&client, first).await.unwrap();
    assert_eq!(
        section["sections"].as_array().unwrap().len(),
        1,
        "{section:#}"
    );
    assert_eq!(section["sections"][0]["uri"], first);
    assert!(
        read(&client, "godot://manual/../4.x/classes/Node")
            .await
            .is_err()
    );
    // Issue 54, item 13: the page's own label (what links to its top
    // name) opens its title section.
    let top = read(
        &client,
        "godot://manual/tutorials/physics/using_character_body_2d#doc_using_character_body_2d",
    )
    .await
    .unwrap();
    assert_eq!(
        top["sections"][0]["heading"], "Using CharacterBody2D/3D",
        "{top:#}"
    );
    // Issue 72, item 17: the label without its `doc_` opens it too.
    let top = read(
        &client,
        "godot://manual/tutorials/scripting/pausing_games#pausing-games",
    )
    .await
    .unwrap();
    assert_eq!(
        top["sections"][0]["heading"], "Pausing games and process mode",
        "{top:#}"
    );

    // Issue 54, item 13: where the reference's leaders break the score
    // order, the answer says so (and only then).
    let mut said = 0;
    for query in [
        "make the character jump",
        "move_and_slide",
        "character body collision",
        "using signals",
    ] {
        let r = client.call("godot.search", json!({ "query": query })).await;
        let answer = structured(&r);
        let hits = answer["results"].as_array().unwrap();
        let ordered = hits
            .windows(2)
            .all(|w| w[0]["score"].as_f64() >= w[1]["score"].as_f64());
        assert_eq!(
            answer.get("order").is_some(),
            !ordered,
            "{query}: {answer:#}"
        );
        said += usize::from(!ordered);
    }
    assert!(
        said > 0,
        "no query here mixes the orders: the check above proves nothing"
    );

    // Issue 54, item 8: `limit` holds for the manual's sections too.
    for limit in [1, 3] {
        let few = client
            .call(
                "godot.search",
                json!({"query": "make the character jump", "kind": "manual", "limit": limit}),
            )
            .await;
        assert_eq!(results(&few).len(), limit, "limit {limit}");
    }
    // Issue 54, item 7: only classes are classes, with the manual served:
    // no page or section title in list_classes nor among suggestions.
    let listed = client
        .call("godot.list_classes", json!({"limit": 5000}))
        .await;
    let listed = structured(&listed).clone();
    let names: Vec<&str> = listed["classes"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let reference = ["classes", "modules"]
        .iter()
        .flat_map(|dir| walk(&docs.join("4.x").join(dir)))
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .count();
    assert!(
        names.len() <= reference && names.contains(&"Node2D"),
        "{} listed, {reference} class files",
        names.len()
    );
    assert!(
        names.iter().all(|n| !n.is_empty() && !n.contains(' ')),
        "a title among the classes: {:?}",
        names.iter().find(|n| n.is_empty() || n.contains(' '))
    );
    let missing = client
        .call("godot.get_class", json!({"name": "Nodes and Scenes"}))
        .await;
    let said = format!("{missing:?}");
    assert!(!said.contains("\"\""), "an empty name suggested: {said}");

    // Without the manual, asking for it says how to get it.
    let without = Env::new(&["godot"], &godot_config(&docs.join("4.x")));
    let client = without.start().await;
    let asked = client
        .call("godot.search", json!({"query": "jump", "kind": "manual"}))
        .await;
    assert_eq!(error_code(&asked), "CONFIG_ERROR", "{asked:?}");
    assert!(
        format!("{asked:?}").contains("GODOT_MANUAL_DIR"),
        "{asked:?}"
    );
}

/// Every question set, in the order they were written: the first three
/// shaped the lexical ranking, the later ones came with issue 57.
pub const MEANING_SETS: [&str; 8] = [
    "plain-words.tsv",
    "sentences.tsv",
    "sentences-2.tsv",
    "sentences-3.tsv",
    "sentences-4.tsv",
    "sentences-5.tsv",
    "sentences-6.tsv",
    "sentences-7.tsv",
];

/// What the question sets reached when last measured (docs/src/tools/godot.md): a ranking
/// change may not lose any of it.
const PLAIN_TOP1: usize = 32;
const PLAIN_TOP3: usize = 37;
const SENTENCE_TOP1: usize = 35;
const SENTENCE_TOP3: usize = 43;
const SECOND_TOP1: usize = 13;
const SECOND_TOP3: usize = 24;

/// Godot 3 and 4 at once: each its own index, asked by `version`, the
/// newest by default, versions in the URIs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_and_four_are_served_side_by_side() {
    let Some(docs) = godot_docs() else { return };
    let (four, three) = (docs.join("4.x"), docs.join("3.x"));
    let config = format!(
        "[plugins.godot]\nfs.read = [{f:?}, {t:?}]\nvars.GODOT_DOC_DIR = \"{f}:{t}\"\n",
        f = four.display().to_string(),
        t = three.display().to_string(),
    );
    let env = Env::new(&["godot"], &config);
    let client = env.start().await;

    // Godot 4's files carry no minor version; Godot 3's say 3.6.
    let versions = client.call("godot.versions", json!({})).await;
    let versions = structured(&versions)["versions"].clone();
    assert_eq!(versions[0]["version"], "4", "{versions:#}");
    assert_eq!(versions[0]["default"], true);
    assert_eq!(versions[1]["version"], "3.6", "{versions:#}");
    assert_eq!(versions[1]["path"], three.display().to_string());

    // KinematicBody2D is Godot 3's; 4 renamed it CharacterBody2D.
    let old = client
        .call(
            "godot.search",
            json!({"query": "KinematicBody2D", "version": "3.6"}),
        )
        .await;
    assert_eq!(
        results(&old)[0]["uri"],
        "godot://3.6/class/KinematicBody2D",
        "{old:?}"
    );
    // Issue 35, item 4: in 4.x an old name leads to the new one (Godot's
    // own rename table), and in 3.6 a new name to the old one.
    let default = client
        .call("godot.get_class", json!({"name": "KinematicBody2D"}))
        .await;
    assert_eq!(
        structured(&default)["name"],
        "CharacterBody2D",
        "{default:?}"
    );
    let note = structured(&default)["renamed"]["note"].clone();
    let note = note.as_str().unwrap();
    assert!(
        note.contains("renamed in Godot 4.0 to `CharacterBody2D`"),
        "{note}"
    );
    for (old, new) in [
        (
            "KinematicBody2D.move_and_slide",
            "CharacterBody2D.move_and_slide",
        ),
        ("Node.get_network_master", "Node.get_multiplayer_authority"),
    ] {
        let member = client.call("godot.get_symbol", json!({"qname": old})).await;
        assert_eq!(structured(&member)["qname"], new, "{member:?}");
    }
    let found = client
        .call("godot.search", json!({"query": "KinematicBody2D"}))
        .await;
    assert_eq!(
        results(&found)[0]["uri"],
        "godot://4/class/CharacterBody2D",
        "{found:?}"
    );
    let back = client
        .call(
            "godot.get_class",
            json!({"name": "CharacterBody2D", "version": "3.6"}),
        )
        .await;
    assert_eq!(structured(&back)["name"], "KinematicBody2D", "{back:?}");
    // `3` and `3.6.0` both name 3.6.
    for version in ["3", "3.6.0"] {
        let r = client
            .call(
                "godot.get_class",
                json!({"name": "KinematicBody2D", "version": version}),
            )
            .await;
        assert_eq!(
            structured(&r)["name"],
            "KinematicBody2D",
            "{version}: {r:?}"
        );
    }
    let new = client
        .call("godot.search", json!({"query": "CharacterBody2D"}))
        .await;
    assert_eq!(results(&new)[0]["uri"], "godot://4/class/CharacterBody2D");
    let missing = client
        .call("godot.list_classes", json!({"version": "5.0"}))
        .await;
    assert_eq!(error_code(&missing), "NOT_FOUND");
    assert_eq!(structured(&missing)["suggestions"], json!(["4", "3.6"]));
    // Issue 54, item 13: a long `version` is not echoed whole.
    let long = "9".repeat(5000);
    let missing = client
        .call("godot.list_classes", json!({"version": long}))
        .await;
    assert_eq!(error_code(&missing), "NOT_FOUND");
    let said = structured(&missing)["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        said.len() < 600 && said.contains("5000 characters"),
        "{said}"
    );

    // URIs: with a version, or without for the default.
    let class = read(&client, "godot://3.6/class/KinematicBody2D")
        .await
        .unwrap();
    assert_eq!(class["inherits"], "PhysicsBody2D");
    let symbol = read(
        &client,
        "godot://3.6/symbol/KinematicBody2D/method/move_and_slide",
    )
    .await
    .unwrap();
    assert_eq!(symbol["name"], "move_and_slide", "{symbol:#}");
    let class = read(&client, "godot://class/CharacterBody2D")
        .await
        .unwrap();
    assert_eq!(class["name"], "CharacterBody2D");

    // What a class inherits, by ancestor, nearest first, without prose.
    let r = client
        .call(
            "godot.get_class",
            json!({"name": "CharacterBody2D", "include_ancestors": true}),
        )
        .await;
    let inherited = structured(&r)["inherited"].as_array().unwrap().clone();
    let chain: Vec<&str> = inherited
        .iter()
        .map(|g| g["class"].as_str().unwrap())
        .collect();
    assert_eq!(
        chain,
        [
            "PhysicsBody2D",
            "CollisionObject2D",
            "Node2D",
            "CanvasItem",
            "Node",
            "Object"
        ]
    );
    let node = &inherited[4];
    let ready = node["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "_ready")
        .expect("Node._ready is inherited");
    assert!(ready.get("description").is_none(), "{ready:#}");
    assert!(
        node["signals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "ready")
    );
}

/// A `host call` reply's fields: its structure, or for an error that does
/// not fit the tool's output schema, the JSON under the text's first line.
fn fields(reply: &Value) -> Value {
    if !reply["structured"].is_null() {
        return reply["structured"].clone();
    }
    error_fields(reply["text"].as_str().unwrap_or_default()).unwrap_or(Value::Null)
}

/// `host call` runs one call without background work: the first builds
/// the index, the second loads it, a damaged one is rebuilt.
async fn one_call(env: &Env, query: &str) -> (Value, String) {
    let out = env
        .host(&[
            "call",
            "godot.search",
            &json!({ "query": query }).to_string(),
        ])
        .output()
        .await
        .unwrap();
    let reply: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (reply, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test]
async fn index_is_saved_reused_and_rebuilt_when_damaged() {
    let env = Env::new(&["godot"], &godot_config(&fixture_docs()));
    let (reply, log) = one_call(&env, "Widget").await;
    assert_eq!(
        fields(&reply)["results"][0]["uri"],
        "godot://class/Widget",
        "{reply:#}"
    );
    assert!(log.contains("index built"), "first start builds: {log}");

    let (reply, log) = one_call(&env, "Widget.spin").await;
    assert_eq!(
        fields(&reply)["results"][0]["uri"],
        "godot://symbol/Widget/method/spin",
        "{reply:#}"
    );
    assert!(
        log.contains("index opened") && !log.contains("index built"),
        "second start loads without parsing: {log}"
    );

    // Damage every file of the saved generation.
    let root = env.cache.join("plugins/godot/index/godot-4");
    let generation = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    for file in std::fs::read_dir(root.join(generation.trim()))
        .unwrap()
        .flatten()
    {
        std::fs::write(file.path(), b"garbage").unwrap();
    }
    let (reply, log) = one_call(&env, "Widget").await;
    assert_eq!(
        fields(&reply)["results"][0]["uri"],
        "godot://class/Widget",
        "{reply:#}"
    );
    assert!(
        log.contains("it will be rebuilt") && log.contains("index built"),
        "{log}"
    );
    let dirs = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .count();
    assert_eq!(dirs, 1, "the damaged generation is replaced, not kept");
}

/// Issue 54, item 9: an index whose headers are whole but whose data
/// blocks are damaged (a disk error, a copy cut short) is not served
/// broken for ever: the read that meets the damage lets it go, says so,
/// and the next call builds it again.
#[tokio::test]
async fn an_index_with_damaged_blocks_is_rebuilt() {
    let Some(docs) = godot_docs() else { return };
    let env = Env::new(&["godot"], &godot_config(&docs.join("4.x")));
    let (reply, _) = one_call(&env, "Node2D").await;
    assert_eq!(fields(&reply)["results"][0]["uri"], "godot://class/Node2D");
    // Garbage over the middle of every document store (megabytes of the
    // whole reference): the files open, the blocks there do not read.
    let root = env.cache.join("plugins/godot/index/godot-4");
    let generation = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    for file in walk(&root.join(generation.trim())) {
        if file.extension().is_some_and(|e| e == "store") {
            let mut bytes = std::fs::read(&file).unwrap();
            let (from, to) = (bytes.len() / 4, bytes.len() * 3 / 4);
            for b in &mut bytes[from..to] {
                *b = 0xA5;
            }
            std::fs::write(&file, bytes).unwrap();
        }
    }
    let mut answers = Vec::new();
    for _ in 0..3 {
        let (reply, log) = one_call(&env, "how do I move a character").await;
        let good = fields(&reply)["results"]
            .as_array()
            .is_some_and(|r| !r.is_empty());
        // Issue 72, item 16: a failed answer says the next call rebuilds,
        // and is retryable.
        if !good {
            let said = fields(&reply);
            assert_eq!(said["retryable"], true, "{said}");
            assert!(said.to_string().contains("call again"), "{said}");
        }
        answers.push((good, log));
        if good {
            break;
        }
    }
    let (good, _) = answers.last().unwrap();
    assert!(*good, "never answered again: {answers:#?}");
    let logs: String = answers.iter().map(|(_, l)| l.as_str()).collect();
    assert!(
        logs.contains("rebuilt") && logs.contains("index built"),
        "the damage was not said and the index not built again: {logs}"
    );
}

/// The hand-written fixture docs copied into the test's folder and served.
fn fixture_copy(env: &Env) -> PathBuf {
    let docs = env.dir.path().join("doc");
    copy_dir(&fixture_docs(), &docs);
    std::fs::write(&env.config, godot_config(&docs)).unwrap();
    docs
}

/// A new class `Sprocket`, made from the fixture's `Widget`.
fn sprocket_xml(docs: &Path) -> String {
    std::fs::read_to_string(docs.join("classes/Widget.xml"))
        .unwrap()
        .replace("name=\"Widget\"", "name=\"Sprocket\"")
        .replace("A widget for tests", "A sprocket for tests")
}

async fn sprockets(client: &Client) -> Vec<Value> {
    results(
        &client
            .call("godot.search", json!({ "query": "sprocket" }))
            .await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_xml_is_rebuilt_in_the_background_and_swapped_in() {
    let env = Env::new(&["godot"], "");
    let docs = fixture_copy(&env);
    let client = env.start().await;
    assert!(sprockets(&client).await.is_empty());
    let sprocket = sprocket_xml(&docs);
    // The refreshes after loading have ended (the first, and the one more
    // the host makes once its watcher is up); the next one is the change's.
    env.wait_for_log("background refresh done", 2).await;
    let refreshed = env.logged("background refresh done");
    std::fs::write(docs.join("classes/Sprocket.xml"), sprocket).unwrap();
    env.wait_for_log("background refresh done", refreshed + 1)
        .await;
    let found = sprockets(&client).await;
    assert_eq!(
        found.first().map(|r| r["uri"].clone()),
        Some(json!("godot://class/Sprocket")),
        "background rebuild never showed up: {}",
        std::fs::read_to_string(env.stderr_log()).unwrap()
    );
    // Searches during the rebuild saw the old index or the new one: never an error.
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    assert!(log.contains("background refresh done"), "{log}");
}

/// Issue 41, item 4: a warm start refreshes once. The folders watched are
/// remembered, so the watcher is up before the first refresh and nothing
/// that changes meanwhile is missed; a change afterwards is still seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_start_refreshes_once_and_still_sees_changes() {
    let env = Env::new(&["godot"], "");
    let docs = fixture_copy(&env);
    let client = env.start().await;
    assert!(sprockets(&client).await.is_empty());
    // The first start knows no folders yet: its watcher comes up after the
    // first refresh, and one more refresh looks at what changed meanwhile.
    env.wait_for_log("background refresh done", 2).await;
    drop(client);
    let before = env.logged("background refresh done");
    let client = env.start().await;
    assert!(sprockets(&client).await.is_empty());
    env.wait_for_log("background refresh done", before + 1)
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        env.logged("background refresh done"),
        before + 1,
        "a warm start refreshed more than once"
    );
    std::fs::write(docs.join("classes/Sprocket.xml"), sprocket_xml(&docs)).unwrap();
    env.wait_for_log("background refresh done", before + 2)
        .await;
    assert_eq!(
        sprockets(&client).await.first().map(|r| r["uri"].clone()),
        Some(json!("godot://class/Sprocket"))
    );
}

/// Issue 35, item 2: a workspace's `project.godot` picks the version
/// served by default (here a Godot 3 project beside a newer 4.x).
#[tokio::test]
async fn the_projects_godot_version_is_the_default() {
    let Some(docs) = godot_docs() else { return };
    let (four, three) = (docs.join("4.x"), docs.join("3.x"));
    let env = Env::new(&["godot"], "");
    let config = format!(
        "[plugins.godot]\nfs.read = [{f:?}, {t:?}, {w:?}]\nvars.GODOT_DOC_DIR = \"{f}:{t}\"\n",
        f = four.display().to_string(),
        t = three.display().to_string(),
        w = env.workspace.display().to_string(),
    );
    std::fs::write(&env.config, config).unwrap();
    std::fs::write(
        env.workspace.join("project.godot"),
        "config_version=4\n\n[application]\n\nconfig/name=\"Old game\"\n",
    )
    .unwrap();
    let client = env.start().await;
    let versions = client.call("godot.versions", json!({})).await;
    let versions = structured(&versions)["versions"].clone();
    assert_eq!(versions[0]["version"], "3.6", "{versions:#}");
    assert_eq!(versions[0]["default"], true, "{versions:#}");
    let class = client
        .call("godot.get_class", json!({"name": "KinematicBody2D"}))
        .await;
    assert_eq!(structured(&class)["name"], "KinematicBody2D", "{class:?}");
    assert!(structured(&class).get("renamed").is_none(), "{class:?}");
}

/// Issue 42, item 20: the first calls after a restart with changed XML
/// answer from the new files, not the index of the old ones (the refresh
/// after loading is waited for).
#[tokio::test]
async fn after_a_restart_with_changed_xml_the_first_call_sees_the_change() {
    let env = Env::new(&["godot"], "");
    let docs = fixture_copy(&env);
    let client = env.start().await;
    assert!(sprockets(&client).await.is_empty());
    drop(client);
    std::fs::write(docs.join("classes/Sprocket.xml"), sprocket_xml(&docs)).unwrap();
    let client = env.start().await;
    let found = sprockets(&client).await;
    assert_eq!(
        found.first().map(|r| r["uri"].clone()),
        Some(json!("godot://class/Sprocket")),
        "the first call after the restart answered from the old index: {found:?}"
    );
}

#[tokio::test]
async fn missing_doc_dir_and_broken_files_are_explained() {
    let env = Env::new(&["godot"], "");
    let nowhere = env.dir.path().join("no-such-doc");
    std::fs::write(&env.config, godot_config(&nowhere)).unwrap();
    let (reply, _) = one_call(&env, "node").await;
    assert_eq!(fields(&reply)["code"], "CONFIG_ERROR", "{reply:#}");
    let error = fields(&reply);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("no-such-doc") && message.contains("GODOT_DOC_DIR"),
        "{message}"
    );

    let docs = env.dir.path().join("doc");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(&env.config, godot_config(&docs)).unwrap();
    let (reply, _) = one_call(&env, "node").await;
    assert!(
        fields(&reply)["message"]
            .as_str()
            .unwrap()
            .contains("no `classes/` folder"),
        "{reply:#}"
    );

    copy_dir(&fixture_docs(), &docs);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/godot/malformed/Broken.xml"),
        docs.join("classes/Broken.xml"),
    )
    .unwrap();
    let (reply, log) = one_call(&env, "widget").await;
    assert_eq!(
        fields(&reply)["results"][0]["uri"],
        "godot://class/Widget",
        "the other files are indexed: {reply:#}"
    );
    assert!(
        log.contains("classes/Broken.xml:5:"),
        "the parse error names file, line and column: {log}"
    );
    // Asked for, the class says why it is missing (issue 54, item 13).
    let client = env.start().await;
    let r = client
        .call("godot.get_class", json!({"name": "Broken"}))
        .await;
    assert!(is_error(&r), "{r:?}");
    let error = structured(&r);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("does not parse") && message.contains("Broken.xml:5:"),
        "{error}"
    );
}

#[tokio::test]
async fn a_huge_query_is_refused_in_bounded_memory() {
    let env = Env::new(&["godot"], &godot_config(&fixture_docs()));
    let client = env.start().await;
    let warm = client.call("godot.search", json!({"query": "node"})).await;
    assert!(!is_error(&warm), "{warm:?}");
    let (before, _) = rss_kib(client.pid);

    // 5 MB of words: once 10 GB of host memory.
    let huge = "word ".repeat(1_000_000);
    let r = client.call("godot.search", json!({ "query": huge })).await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT");
    let uri = format!("godot://search?q={}", "word+".repeat(1_000_000));
    let err = read(&client, &uri)
        .await
        .expect_err("a 5 MB resource query");
    assert!(err.to_string().contains("at most 256 characters"), "{err}");
    // 40 words under the length limit are still too many.
    let wordy = "a ".repeat(40);
    let r = client.call("godot.search", json!({ "query": wordy })).await;
    assert_eq!(error_code(&r), "INVALID_ARGUMENT");
    let message = structured(&r)["message"].as_str().unwrap().to_string();
    assert!(message.contains("32 words"), "{message}");

    let (after, _) = rss_kib(client.pid);
    assert!(
        after.saturating_sub(before) < 100 * 1024,
        "host RSS grew from {before} to {after} KiB"
    );
}

#[tokio::test]
async fn an_index_root_never_follows_a_link_out_of_the_workspace() {
    let outside = tempfile::tempdir().unwrap();
    let config = format!(
        "[plugins.godot]\nfs.read = [{d:?}]\nvars.GODOT_DOC_DIR = {d:?}\nindex.root = \"${{workspace}}/.cache/godot-index\"\n",
        d = fixture_docs().display().to_string()
    );
    let env = Env::new(&["godot"], &config);
    // A repository's `.cache`, pointing elsewhere.
    std::os::unix::fs::symlink(outside.path(), env.workspace.join(".cache")).unwrap();
    let client = env.start().await;
    let r = client.call("godot.search", json!({"query": "node"})).await;
    assert!(is_error(&r), "{r:?}");
    let message = structured(&r)["message"].as_str().unwrap().to_string();
    assert!(message.contains("symbolic link"), "{message}");
    let written: Vec<_> = std::fs::read_dir(outside.path()).unwrap().collect();
    assert!(
        written.is_empty(),
        "the host wrote outside the workspace: {written:?}"
    );
}

#[tokio::test]
async fn the_log_level_applies_to_the_plugins_records() {
    let mut env = Env::new(&["godot"], &godot_config(&fixture_docs()));
    env.host_vars
        .push(("MCP_SERVER_LOG".into(), "error".into()));
    let client = env.start().await;
    let r = client
        .call("godot.search", json!({"query": "widget"}))
        .await;
    assert!(!is_error(&r), "{r:?}");
    drop(client);
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    assert!(
        log.lines()
            .all(|l| l.trim().is_empty() || l.contains(" ERROR ")),
        "MCP_SERVER_LOG=error printed more than errors:\n{log}"
    );
}

#[tokio::test]
async fn closing_stdin_during_an_index_build_is_clean() {
    let Some(docs) = godot_docs() else { return };
    let env = Env::new(&["godot"], &godot_config(&docs.join("4.x")));
    for _ in 0..3 {
        // A fresh build of the whole reference starts in the background.
        let _ = std::fs::remove_dir_all(&env.cache);
        let mut host = serve_raw(&env, std::process::Stdio::piped());
        let mut stdin = host.stdin.take().unwrap();
        use tokio::io::AsyncWriteExt;
        stdin.write_all(handshake().as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(stdin);
        let status = tokio::time::timeout(Duration::from_secs(10), host.wait())
            .await
            .expect("the host exits")
            .unwrap();
        assert!(status.success(), "{status:?}");
    }
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    assert!(!log.contains("panicked"), "{log}");
    // Whatever was cut short, the next host serves a working index.
    let client = env.start().await;
    let r = client
        .call("godot.search", json!({"query": "Node2D"}))
        .await;
    assert!(!is_error(&r), "{r:?}");
}

/// A real Godot engine: `$GODOT_ENGINE`, by default Debian's
/// `godot3-server` on PATH (3.2.3 on bookworm, which needs no display).
/// Missing is a failure under CI=true and a skip elsewhere.
fn godot_engine() -> Option<String> {
    let engine = std::env::var("GODOT_ENGINE").unwrap_or_else(|_| "godot3-server".into());
    let found = Path::new(&engine).is_file()
        || require_program(
            &engine,
            "install it (`apt-get install godot3-server`) or set GODOT_ENGINE to a Godot binary",
        );
    found.then_some(engine)
}

#[tokio::test]
async fn without_a_doc_dir_the_engines_own_reference_is_dumped_once_and_served() {
    let Some(engine) = godot_engine() else {
        return;
    };
    let mut env = Env::new(&["godot"], "");
    env.host_vars.push(("GODOT_BIN".into(), engine.clone()));
    env.host_vars.push(("GODOT_DOC_DIR".into(), String::new()));
    // KinematicBody2D is Godot 3's (4.x renamed it CharacterBody2D).
    let (reply, log) = one_call(&env, "KinematicBody2D").await;
    assert_eq!(
        fields(&reply)["results"][0]["uri"],
        "godot://class/KinematicBody2D",
        "{reply:#}\n{log}"
    );
    assert!(
        log.contains(&format!("from engine `{engine}` 3."))
            && log.contains("read from the engine binary, just now"),
        "the log says which engine's reference it serves, and how: {log}"
    );
    // Issue 35, item 1: the descriptions the binary carries (--doctool
    // leaves them out).
    let out = env
        .host(&[
            "call",
            "godot.get_class",
            &json!({"name": "KinematicBody2D"}).to_string(),
        ])
        .output()
        .await
        .unwrap();
    let class: Value = serde_json::from_slice(&out.stdout).unwrap();
    let description = fields(&class)["description"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        description.len() > 100 && description.contains("body"),
        "a full description: {description:?}"
    );
    let dumps = env.cache.join("plugins/godot/engine-docs");
    // Folders only: beside them, what each engine answered (probes.json).
    let versions: Vec<_> = std::fs::read_dir(&dumps)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(versions.len(), 1, "one dump, no staging left: {versions:?}");
    assert!(
        dumps
            .join(&versions[0])
            .join("classes/Node2D.xml")
            .is_file(),
        "{versions:?}"
    );

    // `host check` says what it serves.
    let out = env.host(&["check"]).output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "plugin godot: ready, serving from {}",
            dumps.join(&versions[0]).display()
        )),
        "{text}"
    );

    // A fresh index from the same engine reuses the dump.
    std::fs::remove_dir_all(env.workspace.join(".cache")).ok();
    std::fs::remove_dir_all(env.cache.join("plugins/godot/index")).ok();
    let (reply, log) = one_call(&env, "KinematicBody2D").await;
    assert_eq!(
        fields(&reply)["results"][0]["uri"],
        "godot://class/KinematicBody2D",
        "{reply:#}"
    );
    assert!(
        log.contains("reference read from the engine binary before"),
        "{log}"
    );
    // Issue 54, item 12: the doc folder nobody asked for (`${workspace}/
    // doc`, which does not exist) is not warned about at every call.
    assert!(
        !log.lines()
            .any(|l| l.contains("WARN") && l.contains("not preopened")),
        "{log}"
    );
}

/// Issue 42, item 19: with two engines of one version on PATH, one that
/// cannot dump its reference (Debian's `godot3` editor without a display)
/// does not hide one that can (`godot3-server`). The failing one is a
/// stand-in tried first, printing the real engine's version.
#[tokio::test]
async fn an_engine_that_cannot_dump_does_not_hide_one_that_can() {
    let Some(engine) = godot_engine() else {
        return;
    };
    let version = std::process::Command::new(&engine)
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string();
    let env = stand_in_before(
        &engine,
        "godot3",
        &format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo {version}; exit 255; fi\n\
             echo 'ERROR: Could not open display' >&2; exit 1\n"
        ),
    );
    let (reply, log) = one_call(&env, "KinematicBody2D").await;
    assert_eq!(
        fields(&reply)["results"][0]["uri"],
        "godot://class/KinematicBody2D",
        "{reply:#}\n{log}"
    );
}

/// Issue 54, item 11: an engine on PATH that hangs on `--version` is
/// given up on within seconds, said so in the log, and not asked again
/// at the next start; the real engine beside it is served.
#[tokio::test]
async fn an_engine_that_hangs_is_given_up_on_once() {
    let Some(engine) = godot_engine() else {
        return;
    };
    // The stand-in notes each start where an engine may write (its
    // programs are confined to the plugin's grants): Godot's cache folder.
    let mut env = stand_in_before(
        &engine,
        "godot4",
        "#!/bin/sh\necho asked >> \"$XDG_CACHE_HOME/godot/asked\"\nsleep 600\n",
    );
    let xdg_cache = env.dir.path().join("xdg-cache");
    env.host_vars
        .push(("XDG_CACHE_HOME".into(), xdg_cache.display().to_string()));
    let asked = xdg_cache.join("godot/asked");
    let (reply, log) = one_call(&env, "KinematicBody2D").await;
    assert_eq!(
        fields(&reply)["results"][0]["uri"],
        "godot://class/KinematicBody2D",
        "{reply:#}\n{log}"
    );
    assert!(
        log.contains("Godot engine `godot4` is skipped: `--version` gave no answer within 5 s"),
        "{log}"
    );
    // A fresh index (so the engines are looked for again): the hung build
    // is remembered, not asked again.
    std::fs::remove_dir_all(env.workspace.join(".cache")).ok();
    std::fs::remove_dir_all(env.cache.join("plugins/godot/index")).ok();
    let (reply, _) = one_call(&env, "KinematicBody2D").await;
    assert_eq!(
        fields(&reply)["results"][0]["uri"],
        "godot://class/KinematicBody2D"
    );
    let times = std::fs::read_to_string(&asked).unwrap().lines().count();
    assert_eq!(times, 1, "the hung engine was asked {times} times");
}

/// A host with the Godot plugin and no doc dir, whose PATH has a stand-in
/// engine `name` (the shell `script`) first, then the real `engine`'s
/// folder: engines are looked for as a user's PATH has them.
fn stand_in_before(engine: &str, name: &str, script: &str) -> Env {
    let mut env = Env::new(&["godot"], "");
    let bin = env.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let stand_in = bin.join(name);
    std::fs::write(&stand_in, script).unwrap();
    std::fs::set_permissions(
        &stand_in,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let real = std::fs::canonicalize(which(engine)).unwrap();
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        real.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.host_vars.push(("PATH".into(), path));
    env.host_vars.push(("GODOT_BIN".into(), String::new()));
    env.host_vars.push(("GODOT_DOC_DIR".into(), String::new()));
    env
}

/// `program` as PATH finds it (or itself, when a path).
fn which(program: &str) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

#[tokio::test]
async fn without_a_doc_dir_or_an_engine_the_error_gives_both_ways() {
    let mut env = Env::new(&["godot"], "");
    env.host_vars
        .push(("GODOT_BIN".into(), "no-such-godot".into()));
    env.host_vars.push(("GODOT_DOC_DIR".into(), String::new()));
    let (reply, _) = one_call(&env, "node").await;
    let error = fields(&reply);
    assert_eq!(error["code"], "CONFIG_ERROR", "{reply:#}");
    let message = error["message"].as_str().unwrap();
    for says in [
        "no-such-godot",
        "GODOT_BIN=",
        "apt-get install godot3-server",
        "GODOT_DOC_DIR=",
    ] {
        assert!(message.contains(says), "{says}: {message}");
    }
    let out = env.host(&["check"]).output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("plugin godot: NOT READY: CONFIG_ERROR: no Godot class reference"),
        "{text}"
    );
}
