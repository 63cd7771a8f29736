//! `st5 index` over documents: `build --docs FILE.jsonl` (a schema from `--id`, `--text` and
//! `--field`), `add` (upsert) and `remove` by id, and `query` in any mode with a filter and
//! facets. The file is the index's version 2 (st5-format's `index_file`); the search is
//! st5-format's `DocumentIndex`, which the server and the browser run too.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use st5_core::Embedder;
use st5_core::Quantize;
use st5_core::index_file;
use st5_core::model::l2_normalize_rows;
use st5_core::search::documents::Offsets;
use st5_core::search::{
    DocumentIndex, FieldType, Filter, Fusion, Language, Passages, Schema, SearchMode,
    SearchOptions, StoredField, TextField,
};

use crate::{ModelArgs, embed};

/// Passage overlap by default, in tokens.
pub const DEFAULT_OVERLAP: usize = 16;

/// `--text title:2,body`: the searched fields, each with an optional boost.
pub fn parse_text_field(s: &str) -> Result<TextField, String> {
    let (name, boost) = match s.rsplit_once(':') {
        Some((name, boost)) => (
            name,
            boost
                .parse::<f32>()
                .map_err(|_| format!("`{s}`: the boost after `:` must be a number"))?,
        ),
        None => (s, 1.0),
    };
    if name.is_empty() {
        return Err(format!("`{s}`: a field name is missing"));
    }
    Ok(TextField { name: name.into(), boost })
}

/// `--field year:number`: a stored, filterable field and its type.
pub fn parse_stored_field(s: &str) -> Result<StoredField, String> {
    let (name, kind) = s.split_once(':').ok_or_else(|| {
        format!("`{s}`: expected NAME:TYPE (string, number, boolean or string[])")
    })?;
    if name.is_empty() {
        return Err(format!("`{s}`: a field name is missing"));
    }
    Ok(StoredField {
        name: name.into(),
        kind: kind.parse::<FieldType>().map_err(|e| e.to_string())?,
    })
}

/// The schema the flags describe.
pub fn schema(
    id: String,
    text: Vec<TextField>,
    fields: Vec<StoredField>,
    language: Language,
    passages: Passages,
) -> Result<Schema> {
    let s = Schema { id, text, fields, language, passages };
    s.validate()?;
    Ok(s)
}

/// The JSON objects of a JSON Lines file (blank lines skipped), each error naming its line.
pub fn read_jsonl(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{} line {}: not JSON", path.display(), i + 1))?;
        out.push(v);
    }
    Ok(out)
}

/// Embeds `prepared`'s passages and adds them: the one way documents enter an index here.
fn embed_and_commit(
    index: &mut DocumentIndex,
    embedder: &Embedder,
    objects: Vec<serde_json::Value>,
    upsert: bool,
) -> Result<usize> {
    let prepared = index.prepare(embedder.tokenizer(), objects, upsert)?;
    let passages = prepared.texts.len();
    let mut e = embed(embedder, &prepared.texts)?;
    l2_normalize_rows(&mut e.data, e.dim);
    index.commit(prepared, e.data)?;
    Ok(passages)
}

fn save(index: &DocumentIndex, path: &Path, codes: Quantize, identity: &str) -> Result<()> {
    let (saved, vectors) = index.save();
    index_file::write_documents(path, codes, identity, index.dim(), &saved, &vectors)?;
    Ok(())
}

/// `st5 index build --docs`.
pub fn build(
    model: &ModelArgs,
    docs: &Path,
    output: &Path,
    codes: Quantize,
    schema: Schema,
    overlap: usize,
) -> Result<()> {
    let t0 = Instant::now();
    let objects = read_jsonl(docs)?;
    let embedder = model.load()?;
    let window = embedder.layout().max_seq_length;
    let mut index = DocumentIndex::new(schema, embedder.dim(), window, overlap)?;
    let n = objects.len();
    let passages = embed_and_commit(&mut index, &embedder, objects, false)
        .with_context(|| format!("indexing {}", docs.display()))?;
    save(&index, output, codes, &model.identity(&embedder)?)?;
    eprintln!(
        "wrote {} ({n} documents, {passages} passages of at most {window} tokens, {codes}) in {:.1} s",
        output.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A documents index opened for the model that built it (a lines index is converted).
pub fn open(
    model: &ModelArgs,
    embedder: &Embedder,
    path: &Path,
) -> Result<(DocumentIndex, Quantize)> {
    let file = crate::index::open_for(model, embedder, path)?;
    let saved = file.collection()?;
    let index = DocumentIndex::open(saved, file.header.dim, file.collection_vectors()?)
        .with_context(|| format!("{}: its collection", path.display()))?;
    Ok((index, file.header.quantize))
}

/// `st5 index add`: documents added, or replacing those of the same id.
pub fn add(model: &ModelArgs, path: &Path, docs: &Path) -> Result<()> {
    let embedder = model.load()?;
    let (mut index, codes) = open(model, &embedder, path)?;
    let objects = read_jsonl(docs)?;
    let n = objects.len();
    let passages = embed_and_commit(&mut index, &embedder, objects, true)
        .with_context(|| format!("adding {}", docs.display()))?;
    index.compact();
    save(&index, path, codes, &model.identity(&embedder)?)?;
    eprintln!(
        "{}: {n} documents added or replaced ({passages} passages); {} held",
        path.display(),
        index.len()
    );
    Ok(())
}

/// `st5 index remove`.
pub fn remove(model: &ModelArgs, path: &Path, ids: &[String]) -> Result<()> {
    let embedder = model.load()?;
    let (mut index, codes) = open(model, &embedder, path)?;
    let missing: Vec<&String> = ids.iter().filter(|id| index.get(id).is_none()).collect();
    if !missing.is_empty() {
        bail!("{}: no document with id {missing:?}; nothing removed", path.display());
    }
    ids.iter().for_each(|id| {
        index.remove(id);
    });
    index.compact();
    save(&index, path, codes, &model.identity(&embedder)?)?;
    eprintln!("{}: {} documents removed; {} held", path.display(), ids.len(), index.len());
    Ok(())
}

/// What `st5 index query` asks of a documents search.
pub struct Query<'a> {
    pub text: &'a str,
    pub mode: SearchMode,
    pub k: usize,
    pub filter: Option<&'a str>,
    pub facets: Vec<String>,
    pub fusion: Option<Fusion>,
    pub prefix: bool,
    pub json: bool,
}

/// `st5 index query` over documents.
pub fn query(model: &ModelArgs, path: &Path, q: Query) -> Result<()> {
    let embedder = model.load()?;
    let (index, _) = open(model, &embedder, path)?;
    let filter = q.filter.map(|f| Filter::parse(index.schema(), f)).transpose()?;
    let vector = match q.mode {
        SearchMode::Keyword => None,
        _ => {
            let mut v = embedder.embed(&[q.text])?;
            l2_normalize_rows(&mut v.data, v.dim);
            Some(v.data)
        }
    };
    let options = SearchOptions {
        mode: q.mode,
        k: q.k,
        filter,
        facets: q.facets,
        fusion: q.fusion.unwrap_or_default(),
        prefix: q.prefix,
        ..Default::default()
    };
    let results = index.search(q.text, vector.as_deref(), &options)?;
    let mut out = std::io::stdout().lock();
    if q.json {
        writeln!(out, "{}", serde_json::to_string(&index.answer(&results, Offsets::Chars))?)?;
        return Ok(());
    }
    for (rank, hit) in results.hits.iter().enumerate() {
        let passage =
            hit.passages.first().map(|p| passage_text(&index, &hit.id, p)).unwrap_or_default();
        writeln!(
            out,
            "{}\t{:.4}\t{}\t{}",
            rank + 1,
            hit.score,
            hit.id,
            passage.replace(['\n', '\t'], " ")
        )?;
    }
    for (field, counts) in &results.facets {
        let counts: Vec<String> = counts.iter().map(|(v, n)| format!("{v}={n}")).collect();
        writeln!(out, "# {field}: {}", counts.join(" "))?;
    }
    Ok(())
}

fn passage_text(
    index: &DocumentIndex,
    id: &str,
    p: &st5_core::search::documents::PassageHit,
) -> String {
    let doc = index.get(id).expect("a hit's document is held");
    doc[&p.field].as_str().map(|t| t[p.start..p.end].to_string()).unwrap_or_default()
}

/// `st5 serve`'s `/search` answer: what `st5 index query --json` prints, typed for the
/// server's schema.
pub fn response(
    index: &DocumentIndex,
    r: &st5_core::search::SearchResults,
) -> st5_serve::SearchResponse {
    let a = index.answer(r, Offsets::Chars);
    let hits = a
        .hits
        .into_iter()
        .map(|h| st5_serve::SearchHit {
            id: st5_serve::HitId::Document(h.id),
            score: h.score,
            text: None,
            document: Some(h.document),
            vector_score: h.vector_score,
            keyword_score: h.keyword_score,
            passages: h
                .passages
                .into_iter()
                .map(|p| st5_serve::SearchPassage {
                    field: p.field,
                    start: p.start,
                    end: p.end,
                    text: p.text,
                    score: p.score,
                    highlights: p.highlights,
                })
                .collect(),
        })
        .collect();
    let facets = serde_json::to_value(&a.facets).expect("facets serialize");
    st5_serve::SearchResponse { hits, matched: Some(a.matched), facets: Some(facets) }
}
