//! Keyword ranking: an inverted index per text field and BM25 over it (Lucene's variant, as
//! bm25s computes it: `idf = ln(1 + (N − df + 0.5) / (df + 0.5))`, a term's weight `idf · tf /
//! (tf + k1 · (1 − b + b · len / avg_len))`), summed over the query's terms and over the fields
//! times their boosts; the last term may match as a prefix, for search as you type.
//!
//! Documents are numbered by the caller's slots (`u32`); every posting of a removed slot is
//! dropped, and a term no document holds any more leaves the dictionary.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

/// BM25's two figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25 {
    /// Term-frequency saturation.
    pub k1: f64,
    /// Length normalisation.
    pub b: f64,
}

impl Default for Bm25 {
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

/// One document's analysed text: per field, its length in terms and each term's count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DocTerms {
    pub fields: Vec<(u32, BTreeMap<String, u32>)>,
    /// Its distinct lower-cased words with their terms, for prefix matching.
    pub words: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default)]
struct FieldIndex {
    /// term → slot → count.
    postings: HashMap<String, BTreeMap<u32, u32>>,
    /// slot → length in terms.
    lengths: HashMap<u32, u32>,
    total: u64,
}

/// The keyword side of a collection.
#[derive(Debug, Clone, Default)]
pub struct KeywordIndex {
    fields: Vec<FieldIndex>,
    /// lower-cased word → term → how many documents hold that word.
    words: BTreeMap<String, BTreeMap<String, u32>>,
    docs: u32,
}

/// A query term: the terms it matches (one, or a prefix's expansions); a document scores the
/// best of them.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryTerm(pub Vec<String>);

/// At most this many dictionary terms stand for a prefix (the most frequent).
pub const PREFIX_TERMS: usize = 50;

impl KeywordIndex {
    pub fn new(fields: usize) -> Self {
        Self { fields: vec![FieldIndex::default(); fields], words: BTreeMap::new(), docs: 0 }
    }

    /// Documents held.
    pub fn len(&self) -> u32 {
        self.docs
    }
    pub fn is_empty(&self) -> bool {
        self.docs == 0
    }

    /// Distinct terms held, over all fields.
    pub fn terms(&self) -> usize {
        let mut all: Vec<&String> = self.fields.iter().flat_map(|f| f.postings.keys()).collect();
        all.sort();
        all.dedup();
        all.len()
    }

    pub fn insert(&mut self, slot: u32, doc: &DocTerms) {
        for (f, (len, counts)) in self.fields.iter_mut().zip(&doc.fields) {
            for (term, &tf) in counts {
                f.postings.entry(term.clone()).or_default().insert(slot, tf);
            }
            f.lengths.insert(slot, *len);
            f.total += u64::from(*len);
        }
        for (word, term) in &doc.words {
            *self.words.entry(word.clone()).or_default().entry(term.clone()).or_default() += 1;
        }
        self.docs += 1;
    }

    /// Removes `slot`, inserted with `doc`, from every structure.
    pub fn remove(&mut self, slot: u32, doc: &DocTerms) {
        for (f, (len, counts)) in self.fields.iter_mut().zip(&doc.fields) {
            for term in counts.keys() {
                if let Some(p) = f.postings.get_mut(term) {
                    p.remove(&slot);
                    if p.is_empty() {
                        f.postings.remove(term);
                    }
                }
            }
            f.lengths.remove(&slot);
            f.total -= u64::from(*len);
        }
        for (word, term) in &doc.words {
            if let Some(terms) = self.words.get_mut(word) {
                if let Some(n) = terms.get_mut(term) {
                    *n -= 1;
                    if *n == 0 {
                        terms.remove(term);
                    }
                }
                if terms.is_empty() {
                    self.words.remove(word);
                }
            }
        }
        self.docs -= 1;
    }

    /// The terms of the words that start with `prefix` (lower-cased), most frequent first, at
    /// most [`PREFIX_TERMS`].
    pub fn expand_prefix(&self, prefix: &str) -> Vec<String> {
        let mut found: BTreeMap<&String, u32> = BTreeMap::new();
        for (_, terms) in
            self.words.range(prefix.to_string()..).take_while(|(w, _)| w.starts_with(prefix))
        {
            for (term, n) in terms {
                *found.entry(term).or_default() += n;
            }
        }
        let mut found: Vec<(&String, u32)> = found.into_iter().collect();
        found.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        found.into_iter().take(PREFIX_TERMS).map(|(t, _)| t.clone()).collect()
    }

    /// Every document with a positive score for `query`: slot → BM25 score, summed over the
    /// fields with their `boosts`. `keep` narrows the documents scored (a filter).
    pub fn scores(
        &self,
        query: &[QueryTerm],
        boosts: &[f32],
        bm25: Bm25,
        keep: &dyn Fn(u32) -> bool,
    ) -> HashMap<u32, f64> {
        let mut total: HashMap<u32, f64> = HashMap::new();
        if self.docs == 0 {
            return total;
        }
        let n = f64::from(self.docs);
        for (f, &boost) in self.fields.iter().zip(boosts) {
            let avg = f.total as f64 / n;
            for alternatives in query {
                // A document takes its best alternative for this query term.
                let mut best: HashMap<u32, f64> = HashMap::new();
                for term in &alternatives.0 {
                    let Some(postings) = f.postings.get(term) else { continue };
                    let df = postings.len() as f64;
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    for (&slot, &tf) in postings {
                        if !keep(slot) {
                            continue;
                        }
                        let len = f64::from(f.lengths[&slot]);
                        let tf = f64::from(tf);
                        let norm = if avg > 0.0 { len / avg } else { 0.0 };
                        let w = idf * tf / (tf + bm25.k1 * (1.0 - bm25.b + bm25.b * norm));
                        let e = best.entry(slot).or_insert(0.0);
                        *e = e.max(w);
                    }
                }
                for (slot, w) in best {
                    *total.entry(slot).or_default() += f64::from(boost) * w;
                }
            }
        }
        total
    }
}
