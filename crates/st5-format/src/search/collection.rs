//! [`Collection`]: documents by id under a schema, with their keyword index: `add`, `upsert`,
//! `remove` and `get`, keyword search with filters and facets, and highlights. Each document
//! lives in a slot (`u32`, never reused) that the vector side keys its passages by; removing a
//! document frees it from every structure here, and its slot is a tombstone for the vectors.

use std::collections::{BTreeMap, HashMap};

use super::analyzer::Analyzer;
use super::filter::{Filter, facets};
use super::keyword::{Bm25, DocTerms, KeywordIndex, QueryTerm};
use super::schema::{Document, Schema, Value};
use crate::error::{Error, Result};

#[derive(Debug, Clone)]
struct Entry {
    doc: Document,
    terms: DocTerms,
}

/// A searchable collection of documents.
#[derive(Debug)]
pub struct Collection {
    schema: Schema,
    analyzer: Analyzer,
    bm25: Bm25,
    slots: Vec<Option<Entry>>,
    ids: HashMap<String, u32>,
    keyword: KeywordIndex,
}

impl Collection {
    /// An empty collection of `schema` (checked).
    pub fn new(schema: Schema) -> Result<Self> {
        schema.validate()?;
        Ok(Self {
            analyzer: Analyzer::new(schema.language),
            keyword: KeywordIndex::new(schema.text.len()),
            schema,
            bm25: Bm25::default(),
            slots: Vec::new(),
            ids: HashMap::new(),
        })
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }
    pub fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }
    /// Documents held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    /// Slots handed out so far, removed ones included: the next document's slot.
    pub fn slots(&self) -> u32 {
        self.slots.len() as u32
    }
    /// Distinct keyword terms held.
    pub fn terms(&self) -> usize {
        self.keyword.terms()
    }

    /// Adds documents, all or none: each is checked against the schema, and an id already held
    /// (or given twice) is refused, before any is added. Returns their slots.
    pub fn add(&mut self, objects: &[serde_json::Value]) -> Result<Vec<u32>> {
        let docs = self.check(objects)?;
        let mut seen = std::collections::HashSet::new();
        for d in &docs {
            if self.ids.contains_key(&d.id) || !seen.insert(d.id.as_str()) {
                return Err(Error::Document {
                    id: d.id.clone(),
                    field: self.schema.id.clone(),
                    message: "this id is already in the collection (upsert replaces)".into(),
                });
            }
        }
        Ok(docs.into_iter().map(|d| self.insert(d)).collect())
    }

    /// Adds documents or replaces those of the same id, all or none (each checked first; of an
    /// id given twice the last wins). Returns each one's new slot and the slot it replaced.
    pub fn upsert(&mut self, objects: &[serde_json::Value]) -> Result<Vec<(u32, Option<u32>)>> {
        let docs = self.check(objects)?;
        Ok(docs
            .into_iter()
            .map(|d| {
                let old = self.remove(&d.id);
                (self.insert(d), old)
            })
            .collect())
    }

    /// Removes the document `id`; its slot, if it was held.
    pub fn remove(&mut self, id: &str) -> Option<u32> {
        let slot = self.ids.remove(id)?;
        let entry = self.slots[slot as usize].take().expect("a held id has its entry");
        self.keyword.remove(slot, &entry.terms);
        Some(slot)
    }

    /// The document `id`.
    pub fn get(&self, id: &str) -> Option<&Document> {
        self.document(*self.ids.get(id)?)
    }
    /// The slot of document `id`.
    pub fn slot(&self, id: &str) -> Option<u32> {
        self.ids.get(id).copied()
    }
    /// The document in `slot`, unless removed.
    pub fn document(&self, slot: u32) -> Option<&Document> {
        self.slots.get(slot as usize)?.as_ref().map(|e| &e.doc)
    }
    /// Every document held, by slot.
    pub fn documents(&self) -> impl Iterator<Item = (u32, &Document)> + Clone {
        self.slots.iter().enumerate().filter_map(|(i, e)| Some((i as u32, &e.as_ref()?.doc)))
    }

    fn check(&self, objects: &[serde_json::Value]) -> Result<Vec<Document>> {
        objects.iter().map(|o| self.schema.document(o)).collect()
    }

    fn insert(&mut self, doc: Document) -> u32 {
        let slot = self.slots.len() as u32;
        let mut words = BTreeMap::new();
        let fields = doc
            .text
            .iter()
            .map(|text| {
                let mut counts: BTreeMap<String, u32> = BTreeMap::new();
                let mut len = 0;
                for w in self.analyzer.words(text) {
                    if let Some(term) = self.analyzer.term(&w.lower) {
                        *counts.entry(term.clone()).or_default() += 1;
                        words.insert(w.lower, term);
                        len += 1;
                    }
                }
                (len, counts)
            })
            .collect();
        let terms = DocTerms { fields, words };
        self.keyword.insert(slot, &terms);
        self.ids.insert(doc.id.clone(), slot);
        self.slots.push(Some(Entry { doc, terms }));
        slot
    }

    /// A query's terms; with `prefix`, a last word not followed by a space or punctuation also
    /// matches the words it begins (search as you type).
    pub fn query_terms(&self, query: &str, prefix: bool) -> Vec<QueryTerm> {
        let words = self.analyzer.words(query);
        let open = prefix && words.last().is_some_and(|w| w.end == query.len());
        let n = words.len();
        words
            .into_iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let own = self.analyzer.term(&w.lower);
                if open && i + 1 == n {
                    let mut alts = self.keyword.expand_prefix(&w.lower);
                    if let Some(t) = own.filter(|t| !alts.contains(t)) {
                        alts.insert(0, t);
                    }
                    return (!alts.is_empty()).then_some(QueryTerm(alts));
                }
                own.map(|t| QueryTerm(vec![t]))
            })
            .collect()
    }

    /// Whether the document in `slot` passes `filter` (a removed one never does).
    pub fn passes(&self, slot: u32, filter: Option<&Filter>) -> bool {
        match self.document(slot) {
            None => false,
            Some(d) => filter.is_none_or(|f| f.matches(&d.fields)),
        }
    }

    /// The slots of the documents that pass `filter`, in order.
    pub fn matching(&self, filter: Option<&Filter>) -> Vec<u32> {
        self.documents()
            .filter(|(_, d)| filter.is_none_or(|f| f.matches(&d.fields)))
            .map(|(s, _)| s)
            .collect()
    }

    /// The `k` best documents for `query` by BM25 among those that pass `filter`: `(slot,
    /// score)`, best first, ties to the lower slot.
    pub fn keyword_search(
        &self,
        query: &str,
        k: usize,
        filter: Option<&Filter>,
        prefix: bool,
    ) -> Vec<(u32, f32)> {
        let terms = self.query_terms(query, prefix);
        let boosts: Vec<f32> = self.schema.text.iter().map(|f| f.boost).collect();
        let keep = |slot: u32| filter.is_none_or(|f| self.passes(slot, Some(f)));
        let mut hits: Vec<(u32, f32)> = self
            .keyword
            .scores(&terms, &boosts, self.bm25, &keep)
            .into_iter()
            .map(|(s, x)| (s, x as f32))
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(k);
        hits
    }

    /// Facet counts of `fields` over the documents in `slots`.
    pub fn facets(
        &self,
        slots: &[u32],
        fields: &[String],
    ) -> Result<BTreeMap<String, Vec<(String, usize)>>> {
        let docs: Vec<&[Option<Value>]> =
            slots.iter().filter_map(|&s| self.document(s)).map(|d| d.fields.as_slice()).collect();
        facets(&self.schema, fields, docs.iter().copied())
    }

    /// The byte ranges of `text`'s words that match `query`'s terms (a prefix's too): what a
    /// page marks in a snippet.
    pub fn highlights(&self, text: &str, query: &str) -> Vec<(usize, usize)> {
        let terms: Vec<String> =
            self.query_terms(query, true).into_iter().flat_map(|t| t.0).collect();
        self.analyzer
            .words(text)
            .into_iter()
            .filter(|w| self.analyzer.term(&w.lower).is_some_and(|t| terms.contains(&t)))
            .map(|w| (w.start, w.end))
            .collect()
    }
}
