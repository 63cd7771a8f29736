//! Search over documents, without a tensor library: the one model of a searchable collection that
//! the CLI, the server and the browser package share; their embedders bring the vectors.
//!
//! - [`schema`]: the searched text fields (with boosts) and the stored, filtered fields, typed;
//!   a JSON object checked into a [`Document`] or refused by id and field;
//! - [`analyzer`]: Unicode words, case folding, stop words and Snowball stemming per language;
//! - [`keyword`]: the inverted index and BM25 (k1 = 1.2, b = 0.75, Lucene's idf, as bm25s);
//! - [`filter`]: `where` filters (eq, in, ranges, and / or / not), as JSON or as text, and facets;
//! - [`fusion`]: vector and keyword rankings fused (reciprocal rank or convex combination);
//! - [`passages`]: long texts cut into passages of the model's window, at sentence boundaries;
//! - [`collection`]: documents by id (`add`, `upsert`, `remove`, `get`), keyword search under a
//!   filter, facets and highlights;
//! - [`documents`]: a collection with its passages' vectors, searched in every mode, the one
//!   search every path runs.

pub mod analyzer;
pub mod collection;
pub mod documents;
pub mod filter;
pub mod fusion;
pub mod keyword;
pub mod passages;
pub mod schema;
#[cfg(test)]
mod tests;

pub use analyzer::{Analyzer, Language};
pub use collection::Collection;
pub use documents::{DocScore, DocumentIndex, SearchHit, SearchOptions, SearchResults};
pub use filter::Filter;
pub use fusion::{Fusion, fuse};
pub use keyword::Bm25;
pub use schema::{Document, FieldType, Passages, Schema, StoredField, TextField, Value};

use crate::by_name::by_name;

/// How a query ranks documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SearchMode {
    /// By the cosine of the query's vector and each passage's.
    Vector,
    /// By BM25 over the text fields.
    Keyword,
    /// Both, fused ([`Fusion`]).
    #[default]
    Hybrid,
}

impl SearchMode {
    pub const ALL: [SearchMode; 3] = [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid];

    pub fn name(self) -> &'static str {
        match self {
            SearchMode::Vector => "vector",
            SearchMode::Keyword => "keyword",
            SearchMode::Hybrid => "hybrid",
        }
    }
}

by_name!(SearchMode, "search mode", "vector, keyword or hybrid", serde);
