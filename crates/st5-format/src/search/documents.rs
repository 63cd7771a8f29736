//! [`DocumentIndex`]: a [`Collection`] with its passages and their vectors, searched by vector,
//! keyword or both, under a filter, with facets and the best passages of each hit. It holds no
//! model: the caller embeds the passages [`prepare`](DocumentIndex::prepare) names and the query
//! (st5-core's embedder, the browser's, the server's), so every path ranks alike.
//!
//! Vector search is exact over the passages of the documents that pass the filter (a scan of
//! their unit vectors), so a filtered query returns the true top k of the matching documents. A
//! document's vector score is its best passage's ([`DocScore::Max`]) or the mean of its best few.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::SearchMode;
use super::collection::Collection;
use super::filter::Filter;
use super::fusion::{Fusion, fuse};
use super::passages::passages;
use super::schema::{Document, Schema};
use crate::error::{Error, Result};
use crate::tokenizer::T5Tokenizer;

/// A passage: a byte range of one text field of the document in `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passage {
    pub slot: u32,
    pub field: u32,
    pub start: u32,
    pub end: u32,
}

/// How a document's passages make its vector score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "method", rename_all = "lowercase")]
pub enum DocScore {
    /// Its best passage's.
    #[default]
    Max,
    /// The mean of its best `n` passages' (fewer when it has fewer).
    Mean { n: usize },
}

/// How a search runs.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    pub mode: SearchMode,
    pub k: usize,
    pub filter: Option<Filter>,
    /// Stored fields to count the matching documents' values of.
    pub facets: Vec<String>,
    pub fusion: Fusion,
    /// The last query word also matches the words it begins (search as you type).
    pub prefix: bool,
    pub doc_score: DocScore,
    /// Best passages returned a hit.
    pub passages: usize,
    /// Documents each side of a hybrid search brings to the fusion.
    pub candidates: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            mode: SearchMode::default(),
            k: 10,
            filter: None,
            facets: Vec::new(),
            fusion: Fusion::default(),
            prefix: true,
            doc_score: DocScore::default(),
            passages: 3,
            candidates: 100,
        }
    }
}

impl SearchOptions {
    /// Options from a request's parts, as the CLI, the server and the browser take them: the
    /// mode and the fusion by name, the filter as JSON or as its text form, facets checked
    /// against `schema`; what is absent is the default.
    pub fn parse(
        schema: &Schema,
        mode: Option<&str>,
        k: usize,
        filter: Option<&serde_json::Value>,
        facets: Vec<String>,
        fusion: Option<&str>,
        prefix: bool,
    ) -> Result<Self> {
        let filter = match filter {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(text)) => Some(Filter::parse(schema, text)?),
            Some(json) => Some(Filter::from_json(schema, json)?),
        };
        for f in &facets {
            schema.field(f)?;
        }
        Ok(SearchOptions {
            mode: mode.map(str::parse).transpose()?.unwrap_or_default(),
            k,
            filter,
            facets,
            fusion: fusion.map(str::parse).transpose()?.unwrap_or_default(),
            prefix,
            ..Default::default()
        })
    }
}

/// How an answer counts offsets into a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offsets {
    /// Unicode scalar values, as Python and `tokenizers` count them (the CLI, the server).
    Chars,
    /// UTF-16 code units, as JavaScript's strings count them (the browser package).
    Utf16,
}

/// A search's answer for a reader outside Rust: each hit with its document and its passages'
/// texts, offsets counted in [`Offsets`], the count matched and the facets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub hits: Vec<AnswerHit>,
    pub matched: usize,
    pub facets: BTreeMap<String, Vec<(String, usize)>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerHit {
    pub id: String,
    pub score: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_score: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword_score: Option<f32>,
    pub document: serde_json::Value,
    pub passages: Vec<AnswerPassage>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerPassage {
    pub field: String,
    pub start: usize,
    pub end: usize,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    pub highlights: Vec<[usize; 2]>,
}

/// A passage of a hit: its field, its byte range there, its cosine with the query (vector and
/// hybrid modes) and the byte ranges of the query's words in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassageHit {
    pub field: String,
    pub start: usize,
    pub end: usize,
    pub score: Option<f32>,
    pub highlights: Vec<(usize, usize)>,
}

/// One document found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    pub id: String,
    /// The mode's score: a cosine, a BM25 score, or the fused score.
    pub score: f32,
    pub vector_score: Option<f32>,
    pub keyword_score: Option<f32>,
    pub passages: Vec<PassageHit>,
}

/// What a search found: the hits best first, how many documents passed the filter, and the
/// facet counts over them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResults {
    pub hits: Vec<SearchHit>,
    pub matched: usize,
    pub facets: BTreeMap<String, Vec<(String, usize)>>,
}

/// A documents index as its file holds it (beside the vectors).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedCollection {
    pub schema: Schema,
    /// Tokens a passage may hold, and repeat from the one before.
    pub window: [usize; 2],
    /// The documents as JSON objects.
    pub documents: Vec<serde_json::Value>,
    /// Each passage: its document's position in `documents`, its field, its byte range.
    pub passages: Vec<[u32; 4]>,
}

impl SavedCollection {
    /// Lines as documents of one `text` field, ids their line numbers; a non-empty line is one
    /// passage.
    pub fn from_lines(lines: &[String]) -> Self {
        let schema = Schema {
            id: "id".into(),
            text: vec![super::schema::TextField { name: "text".into(), boost: 1.0 }],
            fields: Vec::new(),
            language: Default::default(),
            passages: Default::default(),
        };
        let documents = lines
            .iter()
            .enumerate()
            .map(|(i, t)| serde_json::json!({"id": i.to_string(), "text": t}))
            .collect();
        let passages = (lines.iter().enumerate())
            .filter(|(_, t)| !t.is_empty())
            .map(|(i, t)| [i as u32, 0, 0, t.len() as u32])
            .collect();
        Self { schema, window: [usize::MAX, 0], documents, passages }
    }
}

/// Documents checked and cut, waiting for their passages' vectors.
#[derive(Debug, Clone)]
pub struct Prepared {
    objects: Vec<serde_json::Value>,
    /// Per document, its passages as (field, start, end).
    cuts: Vec<Vec<(u32, u32, u32)>>,
    /// The passages' texts, in order: what to embed.
    pub texts: Vec<String>,
    upsert: bool,
}

/// Documents, passages and vectors.
#[derive(Debug)]
pub struct DocumentIndex {
    collection: Collection,
    dim: usize,
    /// Every passage ever added, in order; those of removed documents until [`compact`](Self::compact).
    passages: Vec<Passage>,
    /// `[passages.len(), dim]`, unit rows.
    vectors: Vec<f32>,
    /// Passage rows by slot.
    by_slot: HashMap<u32, std::ops::Range<usize>>,
    /// Tokens a passage may hold (the model's window) and repeat from the one before.
    max_tokens: usize,
    overlap: usize,
}

impl DocumentIndex {
    /// An empty index of `schema` for vectors of width `dim`, passages of at most `max_tokens`
    /// tokens (the model's window) overlapping by `overlap`.
    pub fn new(schema: Schema, dim: usize, max_tokens: usize, overlap: usize) -> Result<Self> {
        if dim == 0 || max_tokens == 0 {
            return Err(Error::Schema("vector width and passage length must be positive".into()));
        }
        Ok(Self {
            collection: Collection::new(schema)?,
            dim,
            passages: Vec::new(),
            vectors: Vec::new(),
            by_slot: HashMap::new(),
            max_tokens,
            overlap,
        })
    }

    pub fn collection(&self) -> &Collection {
        &self.collection
    }
    pub fn schema(&self) -> &Schema {
        self.collection.schema()
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn len(&self) -> usize {
        self.collection.len()
    }
    pub fn is_empty(&self) -> bool {
        self.collection.is_empty()
    }
    /// Passages of the documents held.
    pub fn live_passages(&self) -> usize {
        self.by_slot.values().map(|r| r.len()).sum()
    }
    pub fn window(&self) -> (usize, usize) {
        (self.max_tokens, self.overlap)
    }

    /// Checks `objects` against the schema (and, unless `upsert`, that their ids are new) and cuts
    /// their text fields into passages with `tokenizer`: embed [`Prepared::texts`], then
    /// [`commit`](Self::commit). Nothing changes until then.
    pub fn prepare(
        &self,
        tokenizer: &T5Tokenizer,
        objects: Vec<serde_json::Value>,
        upsert: bool,
    ) -> Result<Prepared> {
        let schema = self.schema();
        let docs: Vec<Document> =
            objects.iter().map(|o| schema.document(o)).collect::<Result<_>>()?;
        let mut seen = std::collections::HashSet::new();
        for d in &docs {
            if !upsert && (self.collection.slot(&d.id).is_some() || !seen.insert(d.id.clone())) {
                return Err(Error::Document {
                    id: d.id.clone(),
                    field: schema.id.clone(),
                    message: "this id is already in the collection (upsert replaces)".into(),
                });
            }
        }
        let fields: Vec<&str> =
            docs.iter().flat_map(|d| d.text.iter().map(String::as_str)).collect();
        let mut cut = passages(tokenizer, &fields, self.max_tokens, self.overlap, schema.passages)?
            .into_iter();
        let mut texts = Vec::new();
        let mut cuts = Vec::with_capacity(docs.len());
        for d in &docs {
            let mut mine = Vec::new();
            for (f, text) in d.text.iter().enumerate() {
                for (a, b) in cut.next().expect("one cut a field") {
                    mine.push((f as u32, a as u32, b as u32));
                    texts.push(text[a..b].to_string());
                }
            }
            cuts.push(mine);
        }
        Ok(Prepared { objects, cuts, texts, upsert })
    }

    /// Adds what `prepare` checked, with its passages' unit `vectors` (`[texts.len(), dim]`, as
    /// the embedder gave them: a text's vector here is its vector there, bit for bit). Returns
    /// the documents' slots.
    pub fn commit(&mut self, prepared: Prepared, vectors: Vec<f32>) -> Result<Vec<u32>> {
        if vectors.len() != prepared.texts.len() * self.dim {
            return Err(Error::Invalid(format!(
                "{} vector values for {} passages of width {}",
                vectors.len(),
                prepared.texts.len(),
                self.dim
            )));
        }
        check_unit(&vectors, self.dim)?;
        let slots: Vec<u32> = if prepared.upsert {
            let done = self.collection.upsert(&prepared.objects)?;
            for (_, old) in &done {
                if let Some(old) = old {
                    self.by_slot.remove(old);
                }
            }
            done.into_iter().map(|(s, _)| s).collect()
        } else {
            self.collection.add(&prepared.objects)?
        };
        let mut row = self.passages.len();
        for (slot, cut) in slots.iter().zip(&prepared.cuts) {
            for &(field, start, end) in cut {
                self.passages.push(Passage { slot: *slot, field, start, end });
            }
            // An id upserted twice in one call: its first slot is already replaced.
            if self.collection.document(*slot).is_some() {
                self.by_slot.insert(*slot, row..row + cut.len());
            }
            row += cut.len();
        }
        self.vectors.extend_from_slice(&vectors);
        Ok(slots)
    }

    /// Removes document `id`; whether it was held.
    pub fn remove(&mut self, id: &str) -> bool {
        match self.collection.remove(id) {
            Some(slot) => {
                self.by_slot.remove(&slot);
                true
            }
            None => false,
        }
    }

    /// The document `id` as JSON.
    pub fn get(&self, id: &str) -> Option<serde_json::Value> {
        self.collection.get(id).map(|d| self.schema().to_json(d))
    }

    /// Compacts when the removed documents' passages outnumber the live ones.
    pub fn compact_if_worthwhile(&mut self) {
        if self.passages.len() > 2 * self.live_passages() {
            self.compact();
        }
    }

    /// Drops the passages and vectors of removed documents.
    pub fn compact(&mut self) {
        let mut passages = Vec::with_capacity(self.live_passages());
        let mut vectors = Vec::with_capacity(self.live_passages() * self.dim);
        let mut by_slot = HashMap::new();
        let mut slots: Vec<(&u32, &std::ops::Range<usize>)> = self.by_slot.iter().collect();
        slots.sort_by_key(|(_, r)| r.start);
        for (&slot, rows) in slots {
            by_slot.insert(slot, passages.len()..passages.len() + rows.len());
            passages.extend_from_slice(&self.passages[rows.clone()]);
            vectors.extend_from_slice(&self.vectors[rows.start * self.dim..rows.end * self.dim]);
        }
        (self.passages, self.vectors, self.by_slot) = (passages, vectors, by_slot);
    }

    /// The text of a passage.
    fn text(&self, p: &Passage) -> &str {
        let doc = self.collection.document(p.slot).expect("a live passage's document");
        &doc.text[p.field as usize][p.start as usize..p.end as usize]
    }

    /// Searches for `query` (its text, and its unit vector `[dim]` for the vector and hybrid modes).
    pub fn search(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        options: &SearchOptions,
    ) -> Result<SearchResults> {
        let filter = options.filter.as_ref();
        let matched = self.collection.matching(filter);
        let need_vector = options.mode != SearchMode::Keyword;
        let vector: Option<&[f32]> = match (need_vector, vector) {
            (true, Some(v)) if v.len() == self.dim => {
                check_unit(v, self.dim)?;
                Some(v)
            }
            (true, _) => {
                return Err(Error::Query(format!(
                    "{} search needs the query's vector of width {}",
                    options.mode, self.dim
                )));
            }
            (false, _) => None,
        };
        // Each side's best documents with their scores, and each document's scored passages.
        let want = match options.mode {
            SearchMode::Hybrid => options.candidates.max(options.k),
            _ => options.k,
        };
        let mut passage_scores: HashMap<u32, Vec<(usize, f32)>> = HashMap::new();
        let vector_hits = match &vector {
            Some(q) => {
                let mut docs: Vec<(u32, f32)> = Vec::new();
                for &slot in &matched {
                    let Some(rows) = self.by_slot.get(&slot) else { continue };
                    let mut scored: Vec<(usize, f32)> = rows
                        .clone()
                        .map(|r| (r, dot(&self.vectors[r * self.dim..][..self.dim], q)))
                        .collect();
                    if scored.is_empty() {
                        continue;
                    }
                    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                    let score = match options.doc_score {
                        DocScore::Max => scored[0].1,
                        DocScore::Mean { n } => {
                            let top = &scored[..n.clamp(1, scored.len())];
                            top.iter().map(|s| s.1).sum::<f32>() / top.len() as f32
                        }
                    };
                    docs.push((slot, score));
                    passage_scores.insert(slot, scored);
                }
                docs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                docs.truncate(want);
                docs
            }
            None => Vec::new(),
        };
        let keyword_hits = match options.mode {
            SearchMode::Vector => Vec::new(),
            _ => self.collection.keyword_search(query, want, filter, options.prefix),
        };
        let ranked = match options.mode {
            SearchMode::Vector => vector_hits.clone(),
            SearchMode::Keyword => keyword_hits.clone(),
            SearchMode::Hybrid => fuse(&vector_hits, &keyword_hits, options.fusion),
        };
        let vmap: HashMap<u32, f32> = vector_hits.iter().copied().collect();
        let kmap: HashMap<u32, f32> = keyword_hits.iter().copied().collect();
        let hits = ranked
            .into_iter()
            .take(options.k)
            .map(|(slot, score)| {
                let doc = self.collection.document(slot).expect("a ranked document is held");
                SearchHit {
                    id: doc.id.clone(),
                    score,
                    vector_score: vmap.get(&slot).copied(),
                    keyword_score: kmap.get(&slot).copied(),
                    passages: self.best_passages(
                        slot,
                        query,
                        passage_scores.get(&slot),
                        options.passages,
                    ),
                }
            })
            .collect();
        let facets = self.collection.facets(&matched, &options.facets)?;
        Ok(SearchResults { hits, matched: matched.len(), facets })
    }

    /// `results` for a reader outside Rust, offsets counted in `unit`.
    pub fn answer(&self, results: &SearchResults, unit: Offsets) -> Answer {
        let count = |text: &str, byte: usize| match unit {
            Offsets::Chars => text[..byte].chars().count(),
            Offsets::Utf16 => text[..byte].encode_utf16().count(),
        };
        let hits = results
            .hits
            .iter()
            .map(|h| {
                let slot = self.collection.slot(&h.id).expect("a hit's document is held");
                let doc = self.collection.document(slot).expect("a held slot's document");
                let passages = h
                    .passages
                    .iter()
                    .map(|p| {
                        let f = self
                            .schema()
                            .text
                            .iter()
                            .position(|t| t.name == p.field)
                            .expect("a text field");
                        let text = &doc.text[f];
                        AnswerPassage {
                            field: p.field.clone(),
                            start: count(text, p.start),
                            end: count(text, p.end),
                            text: text[p.start..p.end].to_string(),
                            score: p.score,
                            highlights: p
                                .highlights
                                .iter()
                                .map(|&(a, b)| [count(text, a), count(text, b)])
                                .collect(),
                        }
                    })
                    .collect();
                AnswerHit {
                    id: h.id.clone(),
                    score: h.score,
                    vector_score: h.vector_score,
                    keyword_score: h.keyword_score,
                    document: self.schema().to_json(doc),
                    passages,
                }
            })
            .collect();
        Answer { hits, matched: results.matched, facets: results.facets.clone() }
    }

    /// A hit's best passages: by cosine where scored, else (keyword mode) those with the most
    /// query words, in text order among equals.
    fn best_passages(
        &self,
        slot: u32,
        query: &str,
        scored: Option<&Vec<(usize, f32)>>,
        n: usize,
    ) -> Vec<PassageHit> {
        let schema = self.schema();
        let rows: Vec<(usize, Option<f32>)> = match (scored, self.by_slot.get(&slot)) {
            (Some(s), _) => s.iter().map(|&(r, x)| (r, Some(x))).collect(),
            (None, Some(rows)) => {
                let mut r: Vec<(usize, usize)> = rows
                    .clone()
                    .map(|r| {
                        (r, self.collection.highlights(self.text(&self.passages[r]), query).len())
                    })
                    .collect();
                r.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                r.into_iter().map(|(r, _)| (r, None)).collect()
            }
            (None, None) => Vec::new(),
        };
        rows.into_iter()
            .take(n)
            .map(|(r, score)| {
                let p = &self.passages[r];
                let text = self.text(p);
                let start = p.start as usize;
                PassageHit {
                    field: schema.text[p.field as usize].name.clone(),
                    start,
                    end: p.end as usize,
                    score,
                    highlights: self
                        .collection
                        .highlights(text, query)
                        .into_iter()
                        .map(|(a, b)| (start + a, start + b))
                        .collect(),
                }
            })
            .collect()
    }

    /// The index as a saved collection, with its passages' vectors `[passages, dim]`.
    pub fn save(&self) -> (SavedCollection, Vec<f32>) {
        let (documents, passages, vectors) = self.parts();
        let saved = SavedCollection {
            schema: self.schema().clone(),
            window: [self.max_tokens, self.overlap],
            documents,
            passages,
        };
        (saved, vectors)
    }

    /// The index [`save`](Self::save) gave.
    pub fn open(saved: SavedCollection, dim: usize, vectors: Vec<f32>) -> Result<Self> {
        let [max_tokens, overlap] = saved.window;
        Self::from_parts(
            saved.schema,
            dim,
            (max_tokens, overlap),
            &saved.documents,
            &saved.passages,
            vectors,
        )
    }

    /// The index's parts for saving: the documents as JSON (in slot order), each live passage
    /// (document position, field, byte range) and the live vectors `[passages, dim]`.
    fn parts(&self) -> (Vec<serde_json::Value>, Vec<[u32; 4]>, Vec<f32>) {
        let mut docs = Vec::with_capacity(self.len());
        let mut passages = Vec::new();
        let mut vectors = Vec::new();
        for (slot, doc) in self.collection.documents() {
            let position = docs.len() as u32;
            docs.push(self.schema().to_json(doc));
            if let Some(rows) = self.by_slot.get(&slot) {
                for r in rows.clone() {
                    let p = &self.passages[r];
                    passages.push([position, p.field, p.start, p.end]);
                    vectors.extend_from_slice(&self.vectors[r * self.dim..][..self.dim]);
                }
            }
        }
        (docs, passages, vectors)
    }

    /// An index from [`parts`](Self::parts), each passage checked against its document's text.
    fn from_parts(
        schema: Schema,
        dim: usize,
        (max_tokens, overlap): (usize, usize),
        docs: &[serde_json::Value],
        passages: &[[u32; 4]],
        vectors: Vec<f32>,
    ) -> Result<Self> {
        let mut index = Self::new(schema, dim, max_tokens, overlap)?;
        let slots = index.collection.add(docs)?;
        if vectors.len() != passages.len() * dim {
            return Err(Error::Invalid(format!(
                "{} vector values for {} passages of width {dim}",
                vectors.len(),
                passages.len()
            )));
        }
        let mut last: Option<u32> = None;
        for (row, &[position, field, start, end]) in passages.iter().enumerate() {
            let bad = |m: &str| Error::Invalid(format!("passage {row}: {m}"));
            if last.is_some_and(|l| position < l) {
                return Err(bad("passages are out of document order"));
            }
            last = Some(position);
            let slot = *slots.get(position as usize).ok_or_else(|| bad("names no document"))?;
            let doc = index.collection.document(slot).expect("just added");
            let text = doc.text.get(field as usize).ok_or_else(|| bad("names no text field"))?;
            let (a, b) = (start as usize, end as usize);
            if a >= b || b > text.len() || !text.is_char_boundary(a) || !text.is_char_boundary(b) {
                return Err(bad("its range is not a piece of its field"));
            }
            index.passages.push(Passage { slot, field, start, end });
            let range = index.by_slot.entry(slot).or_insert(row..row);
            range.end = row + 1;
        }
        check_unit(&vectors, dim)?;
        index.vectors = vectors;
        Ok(index)
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Refuses a row of `[n, dim]` whose length is not 1 (within 1e-3): cosines by dot product need
/// unit vectors, and a caller that forgot to normalize would rank silently wrong.
fn check_unit(vectors: &[f32], dim: usize) -> Result<()> {
    for (i, row) in vectors.chunks(dim).enumerate() {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        // NaN fails too.
        if (norm - 1.0).abs().is_nan() || (norm - 1.0).abs() > 1e-3 {
            return Err(Error::Invalid(format!(
                "vector {i} has length {norm}, not 1: give unit vectors"
            )));
        }
    }
    Ok(())
}
