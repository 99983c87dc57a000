//! `godot.*`: the Godot class reference, offline (seed 004).
//!
//! The class reference XML (`GODOT_DOC_DIR`, or the engines' own dumps,
//! one reference per Godot version) is parsed ([`parse`], [`bbcode`]) into
//! typed classes ([`model`]) and indexed in the host's index store
//! ([`corpus`]); the tools ([`api`]) search and read those indexes, so a
//! call never parses XML. Every tool takes an optional `version` (the
//! newest served by default). `refresh` (run by the host after load and
//! when a doc dir changes) rebuilds an index when its XML no longer
//! matches it.

pub mod api;
pub mod bbcode;
pub mod binary;
pub mod budget;
pub mod corpus;
mod documents;
pub mod engine;
pub mod links;
pub mod manual;
pub mod meaning;
pub mod model;
pub mod parse;
pub mod ranking;
pub mod renames;
pub mod reranker;
pub mod search;
pub mod source;
pub mod thesaurus;
pub mod uri;
mod version;

use plugin_sdk::resources::{Contents, ResourceTemplate};
use plugin_sdk::{Hints, McpTool, ToolError, ToolOutput, lifecycle, resources, structured_output};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Serves the reference's resources and keeps its index fresh.
struct Godot;

/// The `version` argument every tool takes.
const VERSION_DOC: &str = "Godot version to answer from, e.g. `4.6` or `3.6` (godot.versions lists them); default: the newest served.";

/// `godot.search`.
struct Search;

// Tool errors use the seed's codes; so do invalid arguments caught by the
// host's schema check (`x-error-code`).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-error-code" = "INVALID_ARGUMENT"))]
struct SearchArgs {
    /// Words or a name, e.g. `move_and_slide`, `http request`, `Node._ready`.
    #[schemars(length(min = 1, max = search::MAX_QUERY_CHARS))]
    query: String,
    /// Only this kind of entry.
    #[schemars(extend("enum" = search::SEARCH_KINDS))]
    kind: Option<String>,
    #[schemars(range(min = 1, max = 100), extend("default" = 10))]
    limit: Option<u32>,
    #[schemars(description = VERSION_DOC)]
    version: Option<String>,
}

impl McpTool for Search {
    const NAME: &'static str = "godot.search";
    const TITLE: Option<&'static str> = Some("Search the Godot docs");
    const VIEW: Option<&'static str> = Some("docs");
    const DESCRIPTION: &'static str = "Full-text search of the Godot class reference (classes, methods, properties, signals, constants) \
        and, when it is served, the Godot manual's sections (kind `manual`). Best match first; an exact class \
        or member name ranks first, and the three best reference entries come before manual sections. \
        Each result has a godot:// uri for godot.get_class / godot.get_symbol or resources/read.";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = SearchArgs;

    fn output_schema() -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": { "results": { "type": "array", "items": { "type": "object",
                "properties": {
                    "uri": { "type": "string" }, "name": { "type": "string" }, "kind": { "type": "string" },
                    "class": { "type": "string" }, "score": { "type": "number" }, "snippet": { "type": "string" }
                },
                "required": ["uri", "name", "kind", "score", "snippet"] } },
                "order": { "type": "string", "description": "Present when the results are not in score order, saying why." } },
            "required": ["results"],
        }))
    }

    fn call(args: SearchArgs) -> Result<ToolOutput, ToolError> {
        let results = search::search(
            args.version.as_deref(),
            &args.query,
            args.kind.as_deref(),
            args.limit.unwrap_or(10),
        )?;
        let mut answer = json!({ "results": results });
        // The reference's best lead whatever the manual scores (a question
        // about a name must get the name): when that breaks the score
        // order, the answer says so.
        if results.windows(2).any(|w| w[0].score < w[1].score) {
            answer["order"] = json!(
                "not by score throughout: the class reference's three best entries come first, \
                 then the rest of the reference and the manual's sections by score"
            );
        }
        Ok(structured_output(&answer))
    }
}

/// `godot.get_class`.
struct GetClass;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-error-code" = "INVALID_ARGUMENT"))]
struct ClassArgs {
    /// Class name, e.g. `Node2D`.
    #[schemars(length(min = 1, max = api::MAX_NAME_CHARS))]
    name: String,
    /// Also list what it inherits, grouped by ancestor (nearest first),
    /// each member without its description.
    #[schemars(extend("default" = false))]
    include_ancestors: Option<bool>,
    /// For a long class: list only this section's members (the others are
    /// counted in `omitted`), from `offset`.
    #[schemars(extend("enum" = api::MEMBER_SECTIONS))]
    section: Option<String>,
    /// The first member of `section` to list (an answer's
    /// `omitted.<section>.next_offset`).
    #[schemars(range(min = 0, max = 100_000), extend("default" = 0))]
    offset: Option<u32>,
    #[schemars(description = VERSION_DOC)]
    version: Option<String>,
}

impl McpTool for GetClass {
    const NAME: &'static str = "godot.get_class";
    const TITLE: Option<&'static str> = Some("Godot class");
    const VIEW: Option<&'static str> = Some("docs");
    const DESCRIPTION: &'static str = "One class of the Godot reference: description, methods, properties (members), signals, constants, \
        theme items, annotations, operators, constructors. Sections a class lacks are empty lists. With \
        include_ancestors, `inherited` lists the members of each ancestor too. A long class (over 20 KB) comes \
        compact: members with a one-sentence `summary`, as many as fit, `omitted` saying what is left and \
        `section`/`offset` to ask for the rest.";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = ClassArgs;

    fn call(args: ClassArgs) -> Result<ToolOutput, ToolError> {
        let part = budget::Part {
            section: args.section.as_deref(),
            offset: args.offset.unwrap_or(0) as usize,
        };
        let class = api::get_class(
            args.version.as_deref(),
            &args.name,
            args.include_ancestors.unwrap_or(false),
            Some(&part),
        )?;
        Ok(structured_output(&class))
    }
}

/// `godot.get_symbol`.
struct GetSymbol;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-error-code" = "INVALID_ARGUMENT"))]
struct SymbolArgs {
    /// `<Class>.<member>`; split at the first dot.
    #[schemars(length(min = 1, max = api::MAX_NAME_CHARS))]
    qname: String,
    /// Which kind, when the name is used by several (e.g. Button.pressed).
    #[schemars(extend("enum" = model::SYMBOL_KINDS))]
    kind: Option<String>,
    #[schemars(description = VERSION_DOC)]
    version: Option<String>,
}

impl McpTool for GetSymbol {
    const NAME: &'static str = "godot.get_symbol";
    const TITLE: Option<&'static str> = Some("Godot class member");
    const VIEW: Option<&'static str> = Some("docs");
    const DESCRIPTION: &'static str = "One member of a Godot class by qualified name `<Class>.<member>`, e.g. `Node._ready`, `Vector2.x`, \
        `Button.pressed`. Members inherited from ancestors are found too.";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = SymbolArgs;

    fn call(args: SymbolArgs) -> Result<ToolOutput, ToolError> {
        Ok(structured_output(&api::get_symbol(
            args.version.as_deref(),
            &args.qname,
            args.kind.as_deref(),
        )?))
    }
}

/// `godot.list_classes`.
struct ListClasses;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-error-code" = "INVALID_ARGUMENT"))]
struct ListArgs {
    prefix: Option<String>,
    #[schemars(range(min = 1, max = 5000), extend("default" = 200))]
    limit: Option<u32>,
    #[schemars(description = VERSION_DOC)]
    version: Option<String>,
}

impl McpTool for ListClasses {
    const NAME: &'static str = "godot.list_classes";
    const TITLE: Option<&'static str> = Some("List Godot classes");
    const DESCRIPTION: &'static str = "Class names of the Godot reference, sorted, optionally only those starting with `prefix` (any case).";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = ListArgs;

    fn output_schema() -> Option<Value> {
        Some(
            json!({ "type": "object", "properties": { "classes": { "type": "array", "items": { "type": "string" } } }, "required": ["classes"] }),
        )
    }

    fn call(args: ListArgs) -> Result<ToolOutput, ToolError> {
        let classes = api::list_classes(
            args.version.as_deref(),
            args.prefix.as_deref().unwrap_or(""),
            args.limit.unwrap_or(200) as usize,
        )?;
        Ok(structured_output(&json!({ "classes": classes })))
    }
}

/// `godot.versions`.
struct Versions;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-error-code" = "INVALID_ARGUMENT"))]
struct NoArgs {}

impl McpTool for Versions {
    const NAME: &'static str = "godot.versions";
    const TITLE: Option<&'static str> = Some("Godot versions served");
    const DESCRIPTION: &'static str = "The Godot versions whose class reference is served, newest (the default) first, \
        each with where its docs come from and whether questions in sentences are also searched by \
        meaning (`meaning`: the host's sentence vectors, ready or how far along). Pass one as `version` \
        to the other godot.* tools.";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = NoArgs;

    fn output_schema() -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": { "versions": { "type": "array", "items": { "type": "object",
                "properties": {
                    "version": { "type": "string" }, "default": { "type": "boolean" },
                    "source": { "type": "string" }, "path": { "type": "string" },
                    "meaning": { "type": "object", "properties": {
                        "state": { "enum": ["ready", "building", "unavailable", "failed", "not indexed"] },
                        "done": { "type": "integer" }, "total": { "type": "integer" },
                        "model": { "type": "string" }, "why": { "type": "string" } },
                        "required": ["state"] }
                },
                "required": ["version", "default", "source", "path"] } } },
            "required": ["versions"],
        }))
    }

    fn call(_: NoArgs) -> Result<ToolOutput, ToolError> {
        let versions: Vec<Value> = corpus::DocDir::served(false)?
            .iter()
            .enumerate()
            .map(|(i, d)| {
                json!({
                    "version": d.version,
                    "default": i == 0,
                    "source": d.source,
                    "path": d.path.to_string_lossy(),
                    "meaning": meaning::describe(&d.index()),
                })
            })
            .collect();
        Ok(structured_output(&json!({ "versions": versions })))
    }
}

impl resources::Guest for Godot {
    fn templates() -> Vec<ResourceTemplate> {
        let template = |uri: &str, name: &str, description: &str| ResourceTemplate {
            uri_template: uri.into(),
            name: name.into(),
            description: description.into(),
            mime_type: "application/json".into(),
        };
        vec![
            template(
                "godot://class/{name}",
                "Godot class",
                "One class of the Godot reference (as godot.get_class). Every godot:// URI may name a \
                 version first: godot://{version}/class/{name}.",
            ),
            template(
                "godot://symbol/{class}/{kind}/{name}",
                "Godot class member",
                "One member; kind is method, property, signal, constant, theme_item, annotation, operator or constructor.",
            ),
            template(
                "godot://search{?q,kind}",
                "Godot reference search",
                "Search results (as godot.search, 10 best).",
            ),
            template(
                "godot://manual/{+page}",
                "Godot manual page",
                "A page of the Godot manual (when GODOT_MANUAL_DIR names a godot-docs checkout), \
                 section by section; `#section` reads one section.",
            ),
        ]
    }

    fn read(resource: String) -> Result<Contents, ToolError> {
        let (version, target) =
            uri::parse(&resource).map_err(|e| ToolError::new("INVALID_ARGUMENT", e))?;
        let version = version.as_deref();
        let text = match target {
            uri::Target::Class(name) => api::get_class(version, &name, false, None)?.to_string(),
            uri::Target::Symbol { class, kind, name } => {
                if !model::SYMBOL_KINDS.contains(&kind.as_str()) {
                    return Err(ToolError::new(
                        "INVALID_ARGUMENT",
                        format!(
                            "unknown kind `{kind}`: use one of {}",
                            model::SYMBOL_KINDS.join(", ")
                        ),
                    ));
                }
                let value = api::get_symbol(version, &format!("{class}.{name}"), Some(&kind))?;
                if value.get("inherited_from").is_some() {
                    return Err(ToolError::new(
                        "NOT_FOUND",
                        format!("`{class}` does not declare {kind} `{name}` itself"),
                    ));
                }
                value.to_string()
            }
            uri::Target::Search { query, kind } => {
                if let Some(k) = kind
                    .as_deref()
                    .filter(|k| !search::SEARCH_KINDS.contains(k))
                {
                    return Err(ToolError::new(
                        "INVALID_ARGUMENT",
                        format!(
                            "unknown kind `{k}`: use one of {}",
                            search::SEARCH_KINDS.join(", ")
                        ),
                    ));
                }
                json!({ "results": search::search(version, &query, kind.as_deref(), 10)? })
                    .to_string()
            }
            uri::Target::Manual { page, anchor } => {
                api::manual_page(&page, anchor.as_deref())?.to_string()
            }
        };
        Ok(Contents {
            uri: resource,
            mime_type: "application/json".into(),
            text,
        })
    }
}

impl lifecycle::Guest for Godot {
    fn refresh(_changed: Vec<String>) -> Result<Vec<String>, ToolError> {
        let served = corpus::refresh()?;
        Ok(served
            .iter()
            .map(|d| d.path.clone())
            .chain(corpus::manual_dir())
            .map(|p| p.to_string_lossy().into_owned())
            .collect())
    }
}

plugin_sdk::view!("docs", "Godot docs", "views/docs.html");

plugin_sdk::export! {
    tools: [Search, GetClass, GetSymbol, ListClasses, Versions],
    resources: Godot,
    lifecycle: Godot,
}
