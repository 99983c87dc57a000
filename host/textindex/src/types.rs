//! The request and answer types of the store: the index capability's WIT
//! types have the same shape and are converted at the capability's edge.

/// Field name and value; a field may occur more than once.
pub type Document = Vec<(String, String)>;

/// An index's figures, as saved with its generation.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexInfo {
    pub name: String,
    pub documents: u64,
    pub size_bytes: u64,
    /// The label given to `build`, e.g. a fingerprint of the sources.
    pub version: String,
}

#[derive(Debug, Clone)]
pub struct FieldBoost {
    pub field: String,
    pub boost: f32,
}

#[derive(Debug, Clone)]
pub struct TermBoost {
    pub field: String,
    pub term: String,
    pub boost: f32,
}

/// Keep only documents whose keyword `field` is one of `any_of`.
#[derive(Debug, Clone)]
pub struct Filter {
    pub field: String,
    pub any_of: Vec<String>,
}

/// Extra score for documents in which every query word matches in at
/// least one of `fields`.
#[derive(Debug, Clone)]
pub struct Coverage {
    pub fields: Vec<String>,
    pub bonus: f32,
}

#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub query: String,
    pub fields: Vec<FieldBoost>,
    pub terms: Vec<TermBoost>,
    pub filters: Vec<Filter>,
    pub coverage: Option<Coverage>,
    pub limit: u32,
    pub snippet_field: Option<String>,
    pub snippet_chars: u32,
    /// Stored fields to return with each hit.
    pub return_: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Hit {
    pub score: f32,
    pub fields: Document,
    pub snippet: Option<String>,
}
