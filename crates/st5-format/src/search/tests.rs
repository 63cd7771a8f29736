//! The collection's properties: random `add` / `upsert` / `remove` / reopen steps give what a
//! collection rebuilt from the surviving documents gives; filters agree with a brute-force scan
//! written apart from them; the text and JSON filter forms agree; prefixes, highlights, facets.

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};

use super::schema::tests::schema;
use super::*;
use crate::rng::Rng;

const WORDS: [&str; 16] = [
    "search",
    "searching",
    "index",
    "vector",
    "the",
    "running",
    "runs",
    "house",
    "houses",
    "paris",
    "café",
    "naïve",
    "Straße",
    "of",
    "model",
    "models",
];

fn pick<'a, T>(rng: &mut Rng, xs: &'a [T]) -> &'a T {
    &xs[rng.below(xs.len())]
}

fn text(rng: &mut Rng, max: usize) -> String {
    (0..rng.below(max)).map(|_| *pick(rng, &WORDS)).collect::<Vec<_>>().join(" ")
}

fn random_doc(rng: &mut Rng, id: String) -> Json {
    let mut d = json!({"id": id, "title": text(rng, 4), "body": text(rng, 12)});
    if rng.below(4) > 0 {
        d["year"] = json!(2015 + rng.below(10));
    }
    if rng.below(3) > 0 {
        d["lang"] = json!(pick(rng, &["en", "fr", "de"]));
    }
    if rng.below(2) > 0 {
        d["draft"] = json!(rng.below(2) == 0);
    }
    if rng.below(2) > 0 {
        let tags: Vec<&str> =
            (0..rng.below(3)).map(|_| *pick(rng, &["a", "b", "c", "d"])).collect();
        d["tags"] = json!(tags);
    }
    d
}

fn random_filter(rng: &mut Rng, depth: u32) -> Json {
    match rng.below(if depth > 1 { 6 } else { 9 }) {
        0 => {
            json!({"year": {pick(rng, &["gt", "gte", "lt", "lte", "eq", "ne"]).to_string(): 2015 + rng.below(10)}})
        }
        1 => json!({"lang": pick(rng, &["en", "fr", "xx"])}),
        2 => json!({"lang": {"in": ["en", "de"]}}),
        3 => json!({"draft": rng.below(2) == 0}),
        4 => json!({"tags": pick(rng, &["a", "b"])}),
        5 => json!({"tags": {"in": ["c", "d"]}, "year": {"gte": 2018, "lt": 2022}}),
        6 => json!({"and": [random_filter(rng, depth + 1), random_filter(rng, depth + 1)]}),
        7 => json!({"or": [random_filter(rng, depth + 1), random_filter(rng, depth + 1)]}),
        _ => json!({"not": random_filter(rng, depth + 1)}),
    }
}

/// The filter's meaning, over the JSON document itself: the brute-force reference.
fn passes(doc: &Json, f: &Json) -> bool {
    f.as_object().unwrap().iter().all(|(key, v)| match key.as_str() {
        "and" => v.as_array().unwrap().iter().all(|x| passes(doc, x)),
        "or" => v.as_array().unwrap().iter().any(|x| passes(doc, x)),
        "not" => !passes(doc, v),
        field => {
            let have = doc.get(field).filter(|x| !x.is_null());
            let eq = |x: &Json| match have {
                Some(Json::Array(items)) => items.contains(x),
                Some(h) => h == x || h.as_f64().is_some_and(|a| x.as_f64() == Some(a)),
                None => false,
            };
            match v.as_object() {
                None => eq(v),
                Some(ops) => ops.iter().all(|(op, x)| {
                    let (a, b) = (have.and_then(Json::as_f64), x.as_f64());
                    match op.as_str() {
                        "eq" => eq(x),
                        "ne" => !eq(x),
                        "in" => x.as_array().unwrap().iter().any(eq),
                        "gt" => matches!((a, b), (Some(a), Some(b)) if a > b),
                        "gte" => matches!((a, b), (Some(a), Some(b)) if a >= b),
                        "lt" => matches!((a, b), (Some(a), Some(b)) if a < b),
                        "lte" => matches!((a, b), (Some(a), Some(b)) if a <= b),
                        _ => unreachable!(),
                    }
                }),
            }
        }
    })
}

/// Every keyword score of a query, by id (the slots differ between collections).
fn by_id(c: &Collection, query: &str, filter: Option<&Filter>, prefix: bool) -> Vec<(String, u32)> {
    let mut hits: Vec<(String, u32)> = c
        .keyword_search(query, usize::MAX, filter, prefix)
        .into_iter()
        .map(|(s, x)| (c.document(s).unwrap().id.clone(), x.to_bits()))
        .collect();
    hits.sort();
    hits
}

fn rebuilt(live: &BTreeMap<String, Json>) -> Collection {
    let mut c = Collection::new(schema()).unwrap();
    c.add(&live.values().cloned().collect::<Vec<_>>()).unwrap();
    c
}

#[test]
fn random_updates_give_what_a_rebuild_from_the_survivors_gives() {
    let mut rng = Rng::new(58);
    let mut c = Collection::new(schema()).unwrap();
    let mut live: BTreeMap<String, Json> = BTreeMap::new();
    let queries = ["search", "houses of paris", "run", "naive cafe", "mod", "straße index", "se"];
    for step in 0..10_000u32 {
        let id = format!("doc{}", rng.below(300));
        match rng.below(10) {
            0..=3 => {
                let d = random_doc(&mut rng, id.clone());
                let added = c.add(std::slice::from_ref(&d));
                assert_eq!(added.is_ok(), !live.contains_key(&id), "step {step}: add {id}");
                if added.is_ok() {
                    live.insert(id, d);
                }
            }
            4..=6 => {
                let d = random_doc(&mut rng, id.clone());
                let (_, old) = c.upsert(std::slice::from_ref(&d)).unwrap()[0];
                assert_eq!(old.is_some(), live.contains_key(&id), "step {step}: upsert {id}");
                live.insert(id, d);
            }
            7 | 8 => assert_eq!(
                c.remove(&id).is_some(),
                live.remove(&id).is_some(),
                "step {step}: remove {id}"
            ),
            _ => {
                // A bad document in a batch: nothing of the batch is added.
                let before = c.len();
                let batch =
                    [random_doc(&mut rng, "fresh".into()), json!({"id": id, "year": "soon"})];
                assert!(c.upsert(&batch).is_err() && c.add(&batch).is_err());
                assert_eq!((c.len(), c.get("fresh")), (before, None), "step {step}");
            }
        }
        assert_eq!(c.len(), live.len());
        if step % 1000 == 999 {
            // Reopen: the documents written out and read back are the same collection.
            let saved: Vec<Json> = c.documents().map(|(_, d)| c.schema().to_json(d)).collect();
            let mut reopened = Collection::new(schema()).unwrap();
            reopened.add(&saved).unwrap();
            let fresh = rebuilt(&live);
            assert_eq!(c.terms(), fresh.terms(), "step {step}: a removed document's terms linger");
            for q in queries {
                let filter = Filter::from_json(c.schema(), &random_filter(&mut rng, 0)).unwrap();
                for (f, prefix) in [(None, false), (Some(&filter), true)] {
                    let want = by_id(&fresh, q, f, prefix);
                    assert_eq!(by_id(&c, q, f, prefix), want, "step {step}: {q:?} {f:?}");
                    assert_eq!(by_id(&reopened, q, f, prefix), want, "step {step}: reopened {q:?}");
                }
            }
            for (id, d) in &live {
                assert_eq!(
                    c.get(id),
                    Some(&c.schema().document(d).unwrap()),
                    "step {step}: get {id}"
                );
            }
            c = reopened;
        }
    }
}

#[test]
fn filters_agree_with_a_brute_force_scan() {
    let mut rng = Rng::new(7);
    let mut c = Collection::new(schema()).unwrap();
    let docs: Vec<Json> = (0..400).map(|i| random_doc(&mut rng, format!("d{i}"))).collect();
    c.add(&docs).unwrap();
    for _ in 0..500 {
        let f = random_filter(&mut rng, 0);
        let filter = Filter::from_json(c.schema(), &f).unwrap();
        let got = c.matching(Some(&filter));
        let want: Vec<u32> =
            (0..docs.len() as u32).filter(|&i| passes(&docs[i as usize], &f)).collect();
        assert_eq!(got, want, "{f}");
        // A filtered keyword search ranks exactly the matching documents that hold a term.
        let hits = c.keyword_search("search house", usize::MAX, Some(&filter), false);
        assert!(hits.iter().all(|(s, _)| want.contains(s)), "{f}");
        let all = c.keyword_search("search house", usize::MAX, None, false);
        let kept: Vec<(u32, f32)> = all.into_iter().filter(|(s, _)| want.contains(s)).collect();
        assert_eq!(hits, kept, "{f}: not the true ranking of the matching documents");
    }
}

#[test]
fn the_text_form_of_a_filter_is_the_json_form() {
    let s = schema();
    // (text, JSON)
    let cases = [
        ("year >= 2020", json!({"year": {"gte": 2020}})),
        ("lang = en and year < 2018", json!({"lang": "en", "year": {"lt": 2018}})),
        (
            "lang = 'en' or not draft = true",
            json!({"or": [{"lang": "en"}, {"not": {"draft": true}}]}),
        ),
        ("tags in (a, \"b\")", json!({"tags": {"in": ["a", "b"]}})),
        (
            "(lang = fr or lang = de) and year != 2019",
            json!({"and": [{"or": [{"lang": "fr"}, {"lang": "de"}]}, {"year": {"ne": 2019}}]}),
        ),
    ];
    for (text, j) in cases {
        assert_eq!(Filter::parse(&s, text).unwrap(), Filter::from_json(&s, &j).unwrap(), "{text}");
    }
    // (filter, the words its error must hold)
    let bad: [(&str, &[&str]); 9] = [
        ("colour = red", &["colour", "year, lang, draft, tags"]),
        ("year >= soon", &["year", "number"]),
        ("draft > true", &["draft", "no ranges"]),
        ("lang = ", &["a value", "the end"]),
        ("(lang = en", &["`)`"]),
        ("lang = en extra", &["extra"]),
        ("lang = 'en", &["unclosed quote"]),
        // A lone `!` once looped forever (found by fuzzing: fuzz/regressions/search_filter).
        ("lang ! en", &["unexpected `!`"]),
        ("=!!!!", &["unexpected `!`"]),
    ];
    for (text, words) in bad {
        let err = Filter::parse(&s, text).unwrap_err().to_string();
        assert!(words.iter().all(|w| err.contains(w)), "{text}: {err}");
    }
    for (j, word) in [
        (json!({"year": {"about": 3}}), "about"),
        (json!({"lang": 3}), "lang"),
        (json!({"or": {"lang": "en"}}), "array"),
        (json!(["lang"]), "object"),
    ] {
        let err = Filter::from_json(&s, &j).unwrap_err().to_string();
        assert!(err.contains(word), "{j}: {err}");
    }
}

#[test]
fn prefixes_highlights_and_facets() {
    let mut c = Collection::new(schema()).unwrap();
    c.add(&[
        json!({"id": "1", "title": "Searching the index", "body": "Vectors and houses.", "tags": ["a", "b"], "lang": "en"}),
        json!({"id": "2", "title": "Paris", "body": "A house in Paris, by the Seine.", "tags": ["b"], "lang": "fr"}),
        json!({"id": "3", "title": "Séance", "body": "", "lang": "fr", "year": 2020}),
    ])
    .unwrap();
    fn ids(c: &Collection, hits: Vec<(u32, f32)>) -> Vec<String> {
        hits.iter().map(|h| c.document(h.0).unwrap().id.clone()).collect()
    }
    // "se" as typed: a prefix of "searching" and "seine" (not of "séance"); a finished word is
    // not.
    assert_eq!(ids(&c, c.keyword_search("se", 10, None, true)), ["1", "2"]);
    assert_eq!(ids(&c, c.keyword_search("sea", 10, None, true)), ["1"]);
    assert!(ids(&c, c.keyword_search("sea", 10, None, false)).is_empty());
    assert!(ids(&c, c.keyword_search("sea ", 10, None, true)).is_empty());
    // Both hold "hous"; 1's body is the shorter (2 terms against 3).
    assert_eq!(ids(&c, c.keyword_search("houses", 10, None, false)), ["1", "2"]);
    let text = "A house in Paris, by the Seine.";
    let marked: Vec<&str> =
        c.highlights(text, "paris hou").iter().map(|&(a, b)| &text[a..b]).collect();
    assert_eq!(marked, ["house", "Paris"]);
    let all = c.matching(None);
    let f = c.facets(&all, &["tags".into(), "lang".into()]).unwrap();
    assert_eq!(f["tags"], [("b".to_string(), 2), ("a".to_string(), 1)]);
    assert_eq!(f["lang"], [("fr".to_string(), 2), ("en".to_string(), 1)]);
    assert!(c.facets(&all, &["colour".into()]).unwrap_err().to_string().contains("colour"));
    assert_eq!(c.remove("2"), Some(1));
    assert_eq!(c.remove("2"), None);
    assert_eq!(ids(&c, c.keyword_search("houses", 10, None, false)), ["1"]);
}
