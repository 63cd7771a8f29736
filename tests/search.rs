//! The search library against its references: BM25 scores equal bm25s's (tests/fixtures/
//! bm25-golden.json, from tests/reference/make_bm25_fixture.py) within 1e-5 relative, given
//! bm25s's own tokens and through st5's analyzer and collection end to end; passages cut with a
//! model's tokenizer fit its window and cover the text; a document index's filtered vector
//! search is the brute-force top k, and saving, reopening, upserts and removals change no answer.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};
use st5_core::index_file::SavedCollection;
use st5_core::search::keyword::{Bm25, DocTerms, KeywordIndex, QueryTerm};
use st5_core::search::passages::passages;
use st5_core::search::{
    Collection, DocumentIndex, Filter, Passages, Schema, SearchMode, SearchOptions,
};
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

/// A stand-in embedder: a unit vector of width 16 drawn from a seed that is the text's hash, so
/// equal texts get equal vectors and the test can recompute any passage's.
fn fake_vector(text: &str) -> Vec<f32> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    let mut rng = st5_core::rng::Rng::new(h.finish());
    let mut v: Vec<f32> = (0..16).map(|_| rng.unit() as f32 - 0.5).collect();
    st5_core::model::l2_normalize_rows(&mut v, 16);
    v
}

fn doc_schema() -> Schema {
    serde_json::from_value(json!({
        "text": [{"name": "title", "boost": 2.0}, {"name": "body"}],
        "fields": [{"name": "year", "type": "number"}, {"name": "lang", "type": "string"}, {"name": "tags", "type": "string[]"}]
    }))
    .unwrap()
}

fn random_docs(n: usize, seed: u64) -> Vec<Value> {
    let mut rng = st5_core::rng::Rng::new(seed);
    let g = golden();
    (0..n)
        .map(|i| {
            let body: Vec<&str> =
                (0..1 + rng.below(4)).map(|_| g.docs[rng.below(g.docs.len())].as_str()).collect();
            let lang = ["en", "fr", "de"][rng.below(3)];
            let tags: &[&str] = [&["a"][..], &["b"], &["a", "c"]][rng.below(3)];
            json!({
                "id": format!("d{i}"),
                "title": g.queries[rng.below(g.queries.len())],
                "body": body.join("\n\n"),
                "year": 2010 + rng.below(15),
                "lang": lang,
                "tags": tags,
            })
        })
        .collect()
}

fn filled(docs: Vec<Value>, tokenizer: &st5_core::tokenizer::T5Tokenizer) -> DocumentIndex {
    let mut index = DocumentIndex::new(doc_schema(), 16, 32, 8).unwrap();
    add_docs(&mut index, docs, tokenizer, false);
    index
}

fn add_docs(
    index: &mut DocumentIndex,
    docs: Vec<Value>,
    tokenizer: &st5_core::tokenizer::T5Tokenizer,
    upsert: bool,
) {
    let prepared = index.prepare(tokenizer, docs, upsert).unwrap();
    let vectors: Vec<f32> = prepared.texts.iter().flat_map(|t| fake_vector(t)).collect();
    index.commit(prepared, vectors).unwrap();
}

/// Each document's passage vectors, recomputed from its JSON: every passage of every text field.
fn passage_vectors(docs: &[Value]) -> Vec<Vec<Vec<f32>>> {
    let fields: Vec<&str> =
        docs.iter().flat_map(|d| ["title", "body"].map(|f| d[f].as_str().unwrap())).collect();
    let cuts = passages(&tokenizer(), &fields, 32, 8, Passages::Window).unwrap();
    let mut per_field = fields.iter().zip(cuts).map(|(text, cut)| {
        cut.into_iter().map(|(a, b)| fake_vector(&text[a..b])).collect::<Vec<_>>()
    });
    docs.iter().map(|_| [per_field.next().unwrap(), per_field.next().unwrap()].concat()).collect()
}

/// The exact top `k` of the documents that pass `filter`, by their best passage.
fn brute_force_vector(
    index: &DocumentIndex,
    docs: &[Value],
    vectors: &[Vec<Vec<f32>>],
    query: &[f32],
    filter: &Json,
    k: usize,
) -> Vec<(String, f32)> {
    let mut scored: Vec<(String, f32)> = docs
        .iter()
        .zip(vectors)
        .filter(|(d, _)| passes(d, filter))
        .filter_map(|(d, vs)| {
            let best = vs
                .iter()
                .map(|v| v.iter().zip(query).map(|(x, y)| x * y).sum::<f32>())
                .reduce(f32::max)?;
            Some((d["id"].as_str().unwrap().to_string(), best))
        })
        .collect();
    scored.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| index.collection().slot(&a.0).cmp(&index.collection().slot(&b.0)))
    });
    scored.truncate(k);
    scored
}

type Json = Value;

/// The brute-force meaning of the few filters used here.
fn passes(doc: &Json, f: &Json) -> bool {
    f.as_object().unwrap().iter().all(|(k, v)| match (k.as_str(), v) {
        ("year", Value::Object(o)) => o["gte"].as_f64().unwrap() <= doc["year"].as_f64().unwrap(),
        ("lang", v) => &doc["lang"] == v,
        ("tags", v) => doc["tags"].as_array().unwrap().contains(v),
        _ => unreachable!(),
    })
}

fn tokenizer() -> st5_core::tokenizer::T5Tokenizer {
    st5_core::tokenizer::T5Tokenizer::from_file(&st5_tests::tokenizer_json(), 512).unwrap()
}

#[test]
fn passages_fit_the_window_and_are_pieces_of_their_field() {
    let tok = tokenizer();
    let whole = tok.with_truncation(st5_core::tokenizer::Truncation::Off).unwrap();
    let docs = random_docs(40, 3);
    // Two bodies a text, a blank line between them: split by paragraphs, no passage holds it.
    let bodies: Vec<&str> = docs.iter().map(|d| d["body"].as_str().unwrap()).collect();
    let joined: Vec<String> = bodies.chunks(2).map(|p| p.join("\n\n")).collect();
    let texts: Vec<&str> = joined.iter().map(String::as_str).collect();
    for (split, (text, cut)) in Passages::ALL.into_iter().flat_map(|split| {
        texts.iter().zip(passages(&tok, &texts, 32, 8, split).unwrap()).map(move |c| (split, c))
    }) {
        assert!(!cut.is_empty());
        if split == Passages::Paragraphs {
            assert!(cut.iter().all(|&(a, b)| !text[a..b].contains("\n\n")), "{text:?}: {cut:?}");
        }
        let mut covered = 0;
        for &(a, b) in &cut {
            let n = whole.encode_batch(&[&text[a..b]]).unwrap()[0].len();
            assert!(n <= 32, "a passage of {n} tokens (window 32): {:?}", &text[a..b]);
            assert!(
                a < covered || text[covered..a].trim().is_empty(),
                "text dropped before byte {a}"
            );
            covered = covered.max(b);
        }
        assert_eq!(text[covered..].trim(), "", "text left after the last passage");
    }
}

#[test]
fn filtered_vector_search_is_the_exact_top_k_and_survives_save_and_updates() {
    let tok = tokenizer();
    let docs = random_docs(300, 11);
    let mut index = filled(docs.clone(), &tok);
    assert!(index.live_passages() > 300, "long bodies make several passages");
    let expected = passage_vectors(&docs);
    let mut rng = st5_core::rng::Rng::new(5);
    let filters = [
        json!({}),
        json!({"year": {"gte": 2020}}),
        json!({"lang": "fr", "tags": "a"}),
        json!({"tags": "c"}),
    ];
    for _ in 0..20 {
        let query = fake_vector(&rng.below(1_000_000).to_string());
        for f in &filters {
            let options = SearchOptions {
                mode: SearchMode::Vector,
                k: 10,
                filter: Some(Filter::from_json(index.schema(), f).unwrap()),
                ..Default::default()
            };
            let got: Vec<(String, f32)> = index
                .search("", Some(&query), &options)
                .unwrap()
                .hits
                .into_iter()
                .map(|h| (h.id, h.score))
                .collect();
            assert_eq!(got, brute_force_vector(&index, &docs, &expected, &query, f, 10), "{f}");
        }
    }
    // Saved (as JSON, as the file holds it) and opened: the same answers in every mode.
    let options = SearchOptions {
        facets: vec!["lang".into()],
        filter: Some(Filter::parse(index.schema(), "year >= 2015").unwrap()),
        ..Default::default()
    };
    let query = fake_vector("q");
    let before = index.search("search index", Some(&query), &options).unwrap();
    let (saved, vectors) = index.save();
    let saved: SavedCollection =
        serde_json::from_str(&serde_json::to_string(&saved).unwrap()).unwrap();
    let reopened = DocumentIndex::open(saved, 16, vectors).unwrap();
    assert_eq!(reopened.search("search index", Some(&query), &options).unwrap(), before);
    assert!(before.facets["lang"].iter().map(|(_, n)| n).sum::<usize>() == before.matched);
    // Upserts and removals, compacted: the answers of an index built from the survivors.
    let mut survivors = docs.clone();
    let changed: Vec<Value> = random_docs(50, 12).into_iter().step_by(2).collect();
    add_docs(&mut index, changed.clone(), &tok, true);
    for c in &changed {
        let at = survivors.iter().position(|d| d["id"] == c["id"]).unwrap();
        survivors[at] = c.clone();
    }
    for id in ["d1", "d7", "d250"] {
        assert!(index.remove(id));
        survivors.retain(|d| d["id"] != id);
    }
    index.compact();
    assert_eq!(index.live_passages(), index.save().1.len() / 16);
    let fresh = filled(survivors, &tok);
    for mode in [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid] {
        let options = SearchOptions { mode, k: 20, ..Default::default() };
        let ids = |ix: &DocumentIndex| -> Vec<(String, u32)> {
            let mut h: Vec<(String, u32)> = ix
                .search("search houses", Some(&query), &options)
                .unwrap()
                .hits
                .into_iter()
                .map(|h| (h.id, h.score.to_bits()))
                .collect();
            h.sort();
            h
        };
        assert_eq!(ids(&index), ids(&fresh), "{mode}");
    }
    // One id twice in an upsert: the last wins, and the first's passages are not counted.
    let live = index.live_passages();
    let twice = vec![json!({"id": "d3", "body": "first"}), json!({"id": "d3", "body": "second"})];
    add_docs(&mut index, twice, &tok, true);
    assert_eq!(index.get("d3").unwrap()["body"], "second");
    let d3 = fresh.collection().slot("d3").and_then(|s| fresh.collection().document(s)).unwrap();
    let before: usize = d3
        .text
        .iter()
        .map(|t| passages(&tok, &[t], 32, 8, Passages::Window).unwrap()[0].len())
        .sum();
    assert_eq!(index.live_passages(), live - before + 1, "the replaced passages linger");
    // A bad document in a batch: nothing of it added, the index as it was.
    let n = index.len();
    let err = index
        .prepare(
            &tok,
            vec![json!({"id": "new", "title": "x"}), json!({"id": "bad", "year": "soon"})],
            true,
        )
        .unwrap_err();
    assert!(err.to_string().contains("\"bad\"") && err.to_string().contains("`year`"), "{err}");
    assert_eq!((index.len(), index.get("new")), (n, None));
}
