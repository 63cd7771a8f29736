//! The search library against its reference: BM25 scores equal bm25s's (tests/fixtures/
//! bm25-golden.json, from tests/reference/make_bm25_fixture.py) within 1e-5 relative, given
//! bm25s's own tokens and through st5's analyzer and collection end to end.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};
use st5_core::search::keyword::{Bm25, DocTerms, KeywordIndex, QueryTerm};
use st5_core::search::{Collection, Schema};
use st5_tests::root;

struct Golden {
    docs: Vec<String>,
    doc_tokens: Vec<Vec<String>>,
    queries: Vec<String>,
    query_tokens: Vec<Vec<String>>,
    scores: Vec<Vec<f64>>,
}

fn golden() -> Golden {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/bm25-golden.json")).unwrap(),
    )
    .unwrap();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
    };
    let lists =
        |v: &Value| -> Vec<Vec<String>> { v.as_array().unwrap().iter().map(strings).collect() };
    Golden {
        docs: strings(&v["docs"]),
        doc_tokens: lists(&v["doc_tokens"]),
        queries: strings(&v["queries"]),
        query_tokens: lists(&v["query_tokens"]),
        scores: v["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect())
            .collect(),
    }
}

/// `got` (slot → score, absent = 0) against bm25s's row over all documents.
fn check(got: &HashMap<u32, f64>, want: &[f64], what: &str) -> f64 {
    let mut worst = 0f64;
    for (doc, &w) in want.iter().enumerate() {
        let g = got.get(&(doc as u32)).copied().unwrap_or(0.0);
        let err = (g - w).abs() / w.abs().max(1.0);
        assert!(err <= 1e-5, "{what}: document {doc}: {g} against bm25s's {w}");
        worst = worst.max(err);
    }
    worst
}

#[test]
fn bm25_equals_bm25s_on_its_tokens() {
    let g = golden();
    let mut index = KeywordIndex::new(1);
    for (slot, tokens) in g.doc_tokens.iter().enumerate() {
        let mut counts = BTreeMap::new();
        tokens.iter().for_each(|t| *counts.entry(t.clone()).or_default() += 1);
        index.insert(
            slot as u32,
            &DocTerms { fields: vec![(tokens.len() as u32, counts)], words: BTreeMap::new() },
        );
    }
    let mut worst = 0f64;
    for (q, want) in g.query_tokens.iter().zip(&g.scores) {
        let terms: Vec<QueryTerm> = q.iter().map(|t| QueryTerm(vec![t.clone()])).collect();
        let got = index.scores(&terms, &[1.0], Bm25::default(), &|_| true);
        worst = worst.max(check(&got, want, &format!("{q:?}")));
    }
    eprintln!("bm25s tokens: {} queries, worst relative error {worst:.1e}", g.queries.len());
}

#[test]
fn collection_keyword_search_equals_bm25s_end_to_end() {
    let g = golden();
    let schema: Schema = serde_json::from_value(json!({"text": [{"name": "body"}]})).unwrap();
    let mut c = Collection::new(schema).unwrap();
    let docs: Vec<Value> =
        g.docs.iter().enumerate().map(|(i, d)| json!({"id": format!("d{i}"), "body": d})).collect();
    let slots = c.add(&docs).unwrap();
    assert_eq!(slots, (0..docs.len() as u32).collect::<Vec<_>>());
    for (text, tokens) in g.docs.iter().zip(&g.doc_tokens) {
        assert_eq!(&c.analyzer().terms(text), tokens, "{text:?}");
    }
    let mut worst = 0f64;
    for (query, want) in g.queries.iter().zip(&g.scores) {
        let hits = c.keyword_search(query, usize::MAX, None, false);
        let got: HashMap<u32, f64> = hits.iter().map(|&(s, x)| (s, f64::from(x))).collect();
        worst = worst.max(check(&got, want, query));
        assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1), "{query}: not best first");
    }
    eprintln!("st5 analyzer: {} documents, worst relative error {worst:.1e}", g.docs.len());
}
