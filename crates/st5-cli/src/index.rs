//! `st5 index build|query|bench`: a saved search index for corpora too large to embed per query,
//! quantized (int8 or binary codes on the device, exact f32 rescoring from the memory-mapped
//! file) or not; and the scale benchmark behind the index's figures.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use st5_core::index_file::{self, IndexFile, IndexLayout};
use st5_core::model::l2_normalize_rows;
use st5_core::rng::Rng;
use st5_core::search_index::brute_force;
use st5_core::{DeviceChoice, Hit, OpenDevice, Quantize, VectorIndex};

use st5_core::search::{Fusion, Language, Passages, SearchMode, StoredField, TextField};

use crate::{ModelArgs, documents, embed, read_lines};

#[derive(Subcommand)]
pub enum IndexCommand {
    /// Embed a corpus (one document per line, `--corpus`; or documents with fields, `--docs`)
    /// and write it as an index file.
    Build {
        #[command(flatten)]
        model: ModelArgs,
        /// Corpus file, one document per line.
        #[arg(long, required_unless_present = "docs", conflicts_with = "docs")]
        corpus: Option<PathBuf>,
        /// Documents, one JSON object a line (JSON Lines), searched by vector, keyword or both;
        /// `--text` names the fields searched, `--field` those stored and filtered.
        #[arg(long)]
        docs: Option<PathBuf>,
        #[command(flatten)]
        schema: SchemaArgs,
        /// The index file to write (replaced only once written completely).
        #[arg(long)]
        output: PathBuf,
        /// The index's searchable codes: int8 (1 byte a dimension), binary (1 bit) or none
        /// (f32). `--quantize` is its older name (`st5 quantize` is for a model's weights).
        #[arg(long, alias = "quantize", default_value = "int8", value_parser = crate::parse_name::<Quantize>)]
        codes: Quantize,
    },
    /// Add documents to a documents index, replacing those of the same id (JSON Lines).
    Add {
        #[command(flatten)]
        model: ModelArgs,
        /// The index file (`st5 index build --docs`); rewritten whole, the old one kept on failure.
        index: PathBuf,
        #[arg(long)]
        docs: PathBuf,
    },
    /// Remove documents by id from a documents index (all named must be held).
    Remove {
        #[command(flatten)]
        model: ModelArgs,
        index: PathBuf,
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Search an index file for a query (with the model that built it).
    Query {
        #[command(flatten)]
        model: ModelArgs,
        /// The index file (`st5 index build`).
        index: PathBuf,
        /// Number of results.
        #[arg(short = 'k', long, default_value_t = 5)]
        k: usize,
        /// vector, keyword or hybrid; hybrid for a documents index, vector for lines.
        #[arg(long, value_parser = crate::parse_name::<SearchMode>)]
        mode: Option<SearchMode>,
        /// A filter on the stored fields: `year >= 2020 and (lang = en or tags in (a, b))`.
        #[arg(long = "where")]
        filter: Option<String>,
        /// Stored fields whose values to count over the matching documents, comma-separated.
        #[arg(long, value_delimiter = ',')]
        facets: Vec<String>,
        /// How hybrid fuses: convex:ALPHA, rrf, rrf:K or rrf:K:WEIGHT (the default when absent).
        #[arg(long, value_parser = crate::parse_name::<Fusion>)]
        fusion: Option<Fusion>,
        /// The query's last word also matches the words it begins (search as you type).
        #[arg(long)]
        prefix: bool,
        /// Candidates searched per result before exact rescoring; the mode's default when absent.
        #[arg(long, value_parser = at_least_one())]
        oversample: Option<usize>,
        /// Print `{"hits": [{"id", "score", "text"}]}` (the shape of `st5 serve`'s `/search`),
        /// scores at full f32 precision, instead of tab-separated lines.
        #[arg(long)]
        json: bool,
        /// The query text.
        query: String,
    },
    /// Memory, build time, query latency and recall@k of each mode against exact f32 search,
    /// on real vectors (`--vectors`, from `st5 embed --output x.npy`) or random unit vectors.
    Bench {
        /// Document vectors `[n, dim]` (.npy); the last `--queries` rows are held out as queries.
        #[arg(long, conflicts_with = "random")]
        vectors: Option<PathBuf>,
        /// This many random unit vectors (Gaussian directions) instead.
        #[arg(long, value_parser = at_least_one())]
        random: Option<usize>,
        /// Width of the random vectors.
        #[arg(long, default_value_t = 384, value_parser = at_least_one())]
        dim: usize,
        /// Queries timed one at a time.
        #[arg(long, default_value_t = 100, value_parser = at_least_one())]
        queries: usize,
        #[arg(short = 'k', long, default_value_t = 10, value_parser = at_least_one())]
        k: usize,
        /// Modes to measure, comma-separated.
        #[arg(long, default_value = "none,int8,binary", value_delimiter = ',', value_parser = crate::parse_name::<Quantize>)]
        modes: Vec<Quantize>,
        /// Candidates per result; each mode's default when absent.
        #[arg(long, value_parser = at_least_one())]
        oversample: Option<usize>,
        #[arg(long, default_value = "cpu", value_parser = crate::parse_name::<DeviceChoice>)]
        device: DeviceChoice,
    },
}

/// A count that must be at least 1 (refused by clap, naming the flag).
pub(crate) fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..)
}

/// A documents index's schema, from flags.
#[derive(clap::Args)]
pub struct SchemaArgs {
    /// The key of each document's id (a string).
    #[arg(long, default_value = "id")]
    id: String,
    /// The fields searched, comma-separated, each with an optional boost: `title:2,body`.
    #[arg(long, value_delimiter = ',', default_value = "text", value_parser = documents::parse_text_field)]
    text: Vec<TextField>,
    /// A stored, filterable field `NAME:TYPE` (string, number, boolean, string[]); repeatable.
    #[arg(long, value_delimiter = ',', value_parser = documents::parse_stored_field)]
    field: Vec<StoredField>,
    /// The language of the text: its stemmer and stop words (`none`: words as they are).
    #[arg(long, default_value = "english", value_parser = crate::parse_name::<Language>)]
    language: Language,
    /// How long texts are cut: `window` (passages fill the model's window) or `paragraphs` (a
    /// blank line always ends a passage).
    #[arg(long, default_value = "window", value_parser = crate::parse_name::<Passages>)]
    passages: Passages,
    /// Tokens a passage repeats from the one before, when a text is longer than the model's window.
    #[arg(long, default_value_t = documents::DEFAULT_OVERLAP)]
    overlap: usize,
}

pub fn run(command: IndexCommand) -> Result<()> {
    match command {
        IndexCommand::Build { model, docs: Some(docs), output, codes, schema: a, .. } => {
            let schema = documents::schema(a.id, a.text, a.field, a.language, a.passages)?;
            documents::build(&model, &docs, &output, codes, schema, a.overlap)
        }
        IndexCommand::Add { model, index, docs } => documents::add(&model, &index, &docs),
        IndexCommand::Remove { model, index, ids } => documents::remove(&model, &index, &ids),
        IndexCommand::Query {
            model,
            index,
            k,
            mode,
            filter,
            facets,
            fusion,
            prefix,
            json,
            query,
            ..
        } if mode.is_some_and(|m| m != SearchMode::Vector)
            || filter.is_some()
            || !facets.is_empty()
            || IndexLayout::read(&index).is_ok_and(|l| l.is_documents()) =>
        {
            let q = documents::Query {
                text: &query,
                mode: mode.unwrap_or_default(),
                k,
                filter: filter.as_deref(),
                facets,
                fusion,
                prefix,
                json,
            };
            documents::query(&model, &index, q)
        }
        IndexCommand::Build { model, corpus, output, codes, .. } => {
            let corpus = corpus.expect("clap requires --corpus without --docs");
            let docs = read_lines(
                std::fs::read(&corpus).with_context(|| format!("reading {}", corpus.display()))?,
                &corpus.display().to_string(),
            )?;
            let t0 = Instant::now();
            let embedder = model.load()?;
            let mut e = embed(&embedder, &docs)?;
            l2_normalize_rows(&mut e.data, e.dim);
            let identity = model.identity(&embedder)?;
            index_file::write(&output, codes, &identity, e.dim, &docs, &e.data)?;
            let bytes = std::fs::metadata(&output)
                .with_context(|| format!("reading {}", output.display()))?
                .len();
            eprintln!(
                "wrote {} ({} documents, {codes}, {:.1} MB) in {:.1} s",
                output.display(),
                docs.len(),
                bytes as f64 / 1e6,
                t0.elapsed().as_secs_f64()
            );
            Ok(())
        }
        IndexCommand::Query { model, index, k, oversample, json, query, .. } => {
            let embedder = model.load()?;
            let opened = Opened::open(&model, &embedder, &index)?;
            let mut q = embedder.embed(&[query.as_str()])?;
            l2_normalize_rows(&mut q.data, q.dim);
            let hits = opened.search(&q.data, k, oversample)?;
            let mut out = std::io::stdout().lock();
            if json {
                let hits: Vec<_> = hits
                    .iter()
                    .map(
                        |(h, text)| serde_json::json!({"id": h.id, "score": h.score, "text": text}),
                    )
                    .collect();
                writeln!(out, "{}", serde_json::json!({ "hits": hits }))?;
            } else {
                for (rank, (hit, text)) in hits.iter().enumerate() {
                    writeln!(out, "{}\t{:.4}\t{text}", rank + 1, hit.score)?;
                }
            }
            Ok(())
        }
        IndexCommand::Bench { vectors, random, dim, queries, k, modes, oversample, device } => {
            let (data, dim, source) = match (vectors, random) {
                (Some(path), None) => read_npy(&path)?,
                (None, Some(n)) => (random_unit(n + queries, dim, 19), dim, "random".to_string()),
                _ => bail!("give --vectors FILE.npy or --random N"),
            };
            bench(&data, dim, &source, queries, k, &modes, oversample, device)
        }
    }
}

/// A saved index opened for the model that built it: the one path of `st5 index query` and
/// `st5 serve --index`.
pub struct Opened {
    file: IndexFile,
    searchable: VectorIndex,
    texts: Vec<String>,
}

/// Opens `path` (checked whole) after checking that it was built with this model and these
/// settings: every command that reads an index opens it here.
pub fn open_for(
    model: &ModelArgs,
    embedder: &st5_core::Embedder,
    path: &Path,
) -> Result<IndexFile> {
    let file = IndexFile::open(path)?;
    let identity = model.identity(embedder)?;
    if file.header.model != identity || file.header.dim != embedder.dim() {
        bail!(
            "{} was built with another model or settings ({}, width {}; this model: {identity}, width {}); rebuild it with `st5 index build`",
            path.display(),
            file.header.model,
            file.header.dim,
            embedder.dim()
        );
    }
    Ok(file)
}

impl Opened {
    /// Opens `path` (checked whole) and loads its searchable part on `embedder`'s device, after
    /// checking that it was built with this model and these settings.
    pub fn open(model: &ModelArgs, embedder: &st5_core::Embedder, path: &Path) -> Result<Self> {
        let file = open_for(model, embedder, path)?;
        let (_, limit) = model.device.device_with_limit()?;
        let searchable = load(&file, embedder.device(), limit)?;
        let texts = file.texts()?;
        Ok(Self { file, searchable, texts })
    }

    /// The `k` best documents for the unit vector `query`, rescored exactly from the file's f32
    /// rows after `oversample` candidates a result (the index's default when `None`).
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        oversample: Option<usize>,
    ) -> Result<Vec<(Hit, &str)>> {
        let oversample = oversample.unwrap_or(self.file.header.quantize.default_oversample());
        let hits = self
            .searchable
            .search_rescored(query, k, oversample, |ids| Ok(self.file.rows(ids)?))?
            .remove(0);
        Ok(hits.into_iter().map(|h| (h, self.texts[h.id as usize].as_str())).collect())
    }
}

/// The searchable part of a saved index on `device`: its codes, or its f32 vectors.
fn load(file: &IndexFile, device: &st5_core::Device, limit: Option<u64>) -> Result<VectorIndex> {
    let h = &file.header;
    let mut index = VectorIndex::with_quantize(h.dim, device, limit, h.quantize)?;
    match file.codes() {
        Some(codes) => index.add_codes(&codes),
        None => index.add(&file.vectors()),
    }
    .with_context(|| format!("{}: its vectors", file.path.display()))?;
    Ok(index)
}

fn read_npy(path: &Path) -> Result<(Vec<f32>, usize, String)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let (mut data, _, dim) =
        st5_core::npy::read_f32(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    l2_normalize_rows(&mut data, dim);
    Ok((data, dim, path.display().to_string()))
}

/// `n` unit vectors with Gaussian directions (Box-Muller over the shared seeded generator).
fn random_unit(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut v: Vec<f32> = (0..n * dim)
        .map(|_| {
            let (u1, u2) = (rng.unit().max(1e-12), rng.unit());
            ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
        })
        .collect();
    l2_normalize_rows(&mut v, dim);
    v
}

/// Resident memory of this process, from `/proc/self/statm` (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

#[allow(clippy::too_many_arguments)]
fn bench(
    data: &[f32],
    dim: usize,
    source: &str,
    queries: usize,
    k: usize,
    modes: &[Quantize],
    oversample: Option<usize>,
    choice: DeviceChoice,
) -> Result<()> {
    let total = data.len() / dim;
    if total <= queries {
        bail!("{total} vectors: need more than --queries {queries}");
    }
    let n = total - queries;
    let (docs, held_out) = data.split_at(n * dim);
    let (device, limit) = choice.device_with_limit()?;
    // The exact answer, from the tested host loop.
    let t0 = Instant::now();
    let truth: Vec<Vec<Hit>> = held_out.chunks(dim).map(|q| brute_force(docs, dim, q, k)).collect();
    eprintln!("exact answers for {queries} queries in {:.1} s", t0.elapsed().as_secs_f64());
    println!(
        "| vectors | n | dim | mode | oversample | bytes/vector (layout) | bytes/vector (index buffers) | RSS growth/vector | build s | query ms median | p95 | recall@{k} |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, &mode) in modes.iter().enumerate() {
        let over = oversample.unwrap_or(mode.default_oversample());
        let rss0 = rss_bytes();
        let t0 = Instant::now();
        let mut index = VectorIndex::with_quantize(dim, &device, limit, mode)?;
        // In batches, as an application adds documents.
        for chunk in docs.chunks(65536 * dim) {
            index.add(chunk)?;
        }
        index.search(&held_out[..dim], 1)?; // waits for the uploads
        let build = t0.elapsed().as_secs_f64();
        // Freed memory is reused by the next mode, so only the first mode's growth means anything.
        let grown = match i {
            0 => format!("{:.0}", rss_bytes().saturating_sub(rss0) as f64 / n as f64),
            _ => "-".into(),
        };
        let mut times = Vec::with_capacity(queries);
        let mut found = 0;
        for (query, want) in held_out.chunks(dim).zip(&truth) {
            let t = Instant::now();
            let hits = index
                .search_rescored(query, k, over, |ids| {
                    Ok(ids
                        .iter()
                        .flat_map(|&i| &docs[i as usize * dim..][..dim])
                        .copied()
                        .collect())
                })?
                .remove(0);
            times.push(t.elapsed().as_secs_f64() * 1e3);
            found += hits.iter().filter(|h| want.iter().any(|w| w.id == h.id)).count();
        }
        times.sort_by(f64::total_cmp);
        let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
        println!(
            "| {source} | {n} | {dim} | {mode} | {over} | {} | {:.0} | {grown} | {build:.2} | {:.2} | {:.2} | {:.4} |",
            mode.bytes_per_vector(dim),
            index.bytes() as f64 / n as f64,
            pct(0.5),
            pct(0.95),
            found as f64 / (k * queries) as f64
        );
        drop(index);
    }
    Ok(())
}
