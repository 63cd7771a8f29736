//! Search over documents, without a tensor library: the one model of a searchable collection that
//! the CLI, the server and the browser package share. st5-core adds the vectors.
//!
//! - [`schema`]: the searched text fields (with boosts) and the stored, filtered fields, typed;
//!   a JSON object checked into a [`Document`] or refused by id and field;
//! - [`analyzer`]: Unicode words, case folding, stop words and Snowball stemming per language;
//! - [`keyword`]: the inverted index and BM25 (k1 = 1.2, b = 0.75, Lucene's idf, as bm25s);
//! - [`filter`]: `where` filters (eq, in, ranges, and / or / not), as JSON or as text, and facets;
//! - [`fusion`]: vector and keyword rankings fused (reciprocal rank or convex combination);
//! - [`collection`]: documents by id (`add`, `upsert`, `remove`, `get`), keyword search under a
//!   filter, facets and highlights.

pub mod analyzer;
pub mod collection;
pub mod filter;
pub mod fusion;
pub mod keyword;
pub mod schema;
#[cfg(test)]
mod tests;

pub use analyzer::{Analyzer, Language};
pub use collection::Collection;
pub use filter::Filter;
pub use fusion::{Fusion, fuse};
pub use keyword::Bm25;
pub use schema::{Document, FieldType, Schema, Value};
