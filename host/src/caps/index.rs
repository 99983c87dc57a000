//! `index`: named full-text indexes for plugins granted `index`. Checks the
//! grant and the index name, places the index under the plugin's
//! `index.root`, and hands the work to the [`textindex`] store (whose
//! types have the WIT types' shape: converted here, at the edge).

use std::path::PathBuf;

use wasmtime::component::Resource;

use crate::bindings::{CapabilityError, Refusal};
use textindex::{Builder, FieldSpec, Kind, Spec};

use crate::bindings::mcphost::plugin::index::{
    Analyzer, Document, FieldType, Hit, Host, HostBuilder, IndexInfo, Schema, SearchRequest,
};
use crate::paths::confine;
use crate::store::CallState;

type Answer<T> = Result<T, Refusal<CapabilityError>>;

impl CallState {
    /// The directory of index `name`, if the plugin may use indexes.
    fn index_dir(&self, name: &str) -> Result<PathBuf, CapabilityError> {
        self.grants
            .require("index")
            .map_err(CapabilityError::Denied)?;
        textindex::check_name(name).map_err(CapabilityError::Invalid)?;
        let dir = self.grants.index_root.join(name);
        // An index root inside the workspace or the plugin's cache stays
        // there: a `.cache` link in a repository must not carry the index
        // (and the host's writes) out of it.
        for base in [&self.grants.workspace, &self.grants.plugin_cache] {
            if dir.starts_with(base)
                && confine(&dir.to_string_lossy(), base, std::slice::from_ref(base)).is_none()
            {
                return Err(CapabilityError::Denied(format!(
                    "the index directory {} leads out of {} through a symbolic link: remove the link, \
                     or set index.root under [plugins.{}] to a real directory",
                    dir.display(),
                    base.display(),
                    self.grants.plugin
                )));
            }
        }
        Ok(dir)
    }

    pub(super) fn opened(
        &self,
        name: &str,
    ) -> Result<std::sync::Arc<textindex::Opened>, CapabilityError> {
        let dir = self.index_dir(name)?;
        textindex::open(name, &dir).ok_or_else(|| {
            CapabilityError::Invalid(format!("index `{name}` does not exist yet: build it first"))
        })
    }

    /// A read of `opened` failed with `why`: when its files are damaged it
    /// is let go, so the plugin's next `open` finds none and builds it
    /// again (issue 54, item 9), and the error says so.
    pub(super) fn read_failed(
        &self,
        name: &str,
        opened: &std::sync::Arc<textindex::Opened>,
        why: String,
    ) -> CapabilityError {
        if !opened.is_damaged() {
            return CapabilityError::Invalid(why);
        }
        if let Ok(dir) = self.index_dir(name) {
            textindex::forget_damaged(&dir, opened);
        }
        CapabilityError::Invalid(format!(
            "index `{name}`: {why}; it was let go and is built again at the next call"
        ))
    }
}

impl Host for CallState {
    async fn open(&mut self, name: String) -> Answer<Option<IndexInfo>> {
        let dir = self.index_dir(&name)?;
        Ok(textindex::open(&name, &dir).map(|o| info(&o.info)))
    }

    async fn build(
        &mut self,
        name: String,
        schema: Schema,
        version: String,
    ) -> Answer<Option<Resource<Builder>>> {
        let dir = self.index_dir(&name)?;
        let spec = spec(schema, &version)
            .map_err(|why| CapabilityError::Invalid(format!("index `{name}`: {why}")))?;
        match textindex::build(&name, &dir, spec).await {
            Ok(Some(builder)) => Ok(Some(self.table.push(builder)?)),
            Ok(None) => Ok(None),
            Err(e) => Err(CapabilityError::Invalid(format!(
                "cannot build index `{name}` in {}: {e:#}",
                dir.display()
            ))
            .into()),
        }
    }

    async fn search(&mut self, name: String, request: SearchRequest) -> Answer<Vec<Hit>> {
        let request = search_request(request);
        let opened = self.opened(&name)?;
        let hits = textindex::search(&opened, &request)
            .map_err(|why| self.read_failed(&name, &opened, why))?;
        Ok(hits
            .into_iter()
            .map(|h| Hit {
                score: h.score,
                fields: h.fields,
                snippet: h.snippet,
            })
            .collect())
    }

    async fn get(
        &mut self,
        name: String,
        id: String,
        return_: Vec<String>,
    ) -> Answer<Option<Document>> {
        let opened = self.opened(&name)?;
        Ok(opened
            .get(&id, &return_)
            .map_err(|why| self.read_failed(&name, &opened, why))?)
    }

    async fn terms(
        &mut self,
        name: String,
        field: String,
        prefix: String,
        limit: u32,
    ) -> Answer<Vec<String>> {
        let opened = self.opened(&name)?;
        Ok(opened
            .terms(&field, &prefix, limit as usize)
            .map_err(|why| self.read_failed(&name, &opened, why))?)
    }
}

impl HostBuilder for CallState {
    async fn add(&mut self, builder: Resource<Builder>, documents: Vec<Document>) -> Answer<()> {
        Ok(self
            .table
            .get_mut(&builder)?
            .add(documents)
            .map_err(CapabilityError::Invalid)?)
    }

    async fn commit(&mut self, builder: Resource<Builder>) -> Answer<IndexInfo> {
        let builder = self.table.get_mut(&builder)?;
        let committed = builder
            .commit()
            .await
            .map_err(|e| CapabilityError::Invalid(format!("commit failed: {e:#}")))?;
        Ok(info(&committed))
    }

    async fn drop(&mut self, builder: Resource<Builder>) -> wasmtime::Result<()> {
        self.table.delete(builder)?;
        Ok(())
    }
}

fn info(i: &textindex::IndexInfo) -> IndexInfo {
    IndexInfo {
        name: i.name.clone(),
        documents: i.documents,
        size_bytes: i.size_bytes,
        version: i.version.clone(),
    }
}

fn spec(schema: Schema, version: &str) -> Result<Spec, String> {
    let fields = schema
        .fields
        .into_iter()
        .map(|f| FieldSpec {
            name: f.name,
            kind: match f.type_ {
                FieldType::Text(Analyzer::Identifier) => Kind::Identifier,
                FieldType::Text(Analyzer::Prose) => Kind::Prose,
                FieldType::Keyword => Kind::Keyword,
                FieldType::Stored => Kind::Stored,
                FieldType::Weight => Kind::Weight,
            },
            stored: f.stored,
        })
        .collect();
    Spec::new(fields, &schema.id_field, version)
}

fn search_request(r: SearchRequest) -> textindex::SearchRequest {
    textindex::SearchRequest {
        query: r.query,
        fields: r
            .fields
            .into_iter()
            .map(|f| textindex::FieldBoost {
                field: f.field,
                boost: f.boost,
            })
            .collect(),
        terms: r
            .terms
            .into_iter()
            .map(|t| textindex::TermBoost {
                field: t.field,
                term: t.term,
                boost: t.boost,
            })
            .collect(),
        filters: r
            .filters
            .into_iter()
            .map(|f| textindex::Filter {
                field: f.field,
                any_of: f.any_of,
            })
            .collect(),
        coverage: r.coverage.map(|c| textindex::Coverage {
            fields: c.fields,
            bonus: c.bonus,
        }),
        limit: r.limit,
        snippet_field: r.snippet_field,
        snippet_chars: r.snippet_chars,
        return_: r.return_,
    }
}
