//! `st5`: embed and search text with Sentence-T5 models on the CPU (flex) or a GPU (wgpu).
//!
//! `st5 embed` reads one text per line (stdin or `--input`) and writes float32 `[n, dim]` to
//! `.npy`, or JSON Lines for `.jsonl` and stdout. `st5 search` ranks a corpus against a query;
//! `st5 index` builds a saved (optionally quantized) index for large corpora and queries it.

mod documents;
mod index;

use std::cell::OnceCell;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use st5_core::fingerprint::weights_fingerprint;
use st5_core::model::l2_normalize_rows;
use st5_core::prompt::Prompt;
use st5_core::save::convert;
use st5_core::tokenizer::Truncation;
use st5_core::{
    Batching, Compute, DEFAULT_BATCH_SIZE, DeviceChoice, Dir, Embedder, Embeddings, FileBytes,
    LoadOptions, MemoryFiles, OpenDevice, Quantize, Variant, VectorIndex, WeightDtype,
};
use st5_hub::ModelSource;

/// The built-in default model's files but its weights (build.rs lists them; its README is the
/// model card), compiled into the binary so that `st5` runs with no download and away from the
/// checkout, keyed by relative path.
const DEFAULT_MODEL: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/default_model.rs"));
/// Its `model.safetensors`, joined by build.rs from the parts it is committed in.
const DEFAULT_WEIGHTS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/model.safetensors"));
/// How messages name the built-in model's files.
const DEFAULT_LABEL: &str = concat!("built-in ", env!("ST5_DEFAULT_MODEL_NAME"), ":");

#[derive(Parser)]
#[command(name = "st5", version, about = "Sentence-T5 embeddings and semantic search")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Embed texts, one per line, into float32 [n, dim].
    Embed {
        #[command(flatten)]
        model: ModelArgs,
        /// Input file (UTF-8, one text per line); stdin when absent. An empty line is an empty text.
        #[arg(long)]
        input: Option<PathBuf>,
        /// Output file: `.npy`, or JSON Lines when it ends in `.jsonl`; JSON Lines on stdout when absent.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Print load and embedding times (and texts/s) on stderr.
        #[arg(long)]
        stats: bool,
    },
    /// Rank the lines of a corpus by cosine similarity to a query.
    Search {
        #[command(flatten)]
        model: ModelArgs,
        /// Corpus file, one document per line.
        #[arg(long)]
        corpus: PathBuf,
        /// Number of results.
        #[arg(short = 'k', long, default_value_t = 5)]
        k: usize,
        /// The query text.
        query: String,
    },
    /// Serve embeddings over HTTP: text-embeddings-inference's API (`/embed`, `/tokenize`,
    /// `/info`, `/health`, `/metrics`) and OpenAI's (`/v1/embeddings`), described in
    /// `/openapi.json`; concurrent requests are batched together (docs/serve.md).
    Serve {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        serve: ServeArgs,
    },
    /// A saved search index for large corpora: build it once, query it many times.
    Index {
        #[command(subcommand)]
        command: index::IndexCommand,
    },
    /// Rewrite a model (sentence-transformers or Hugging Face T5, any dtype, sharded) as a
    /// sentence-transformers directory with its weights in another dtype: `int8` (Linear and
    /// embedding weights as int8 with per-row scales, about a quarter of f32), `f16` (for
    /// Python: an int8 model converts back), or `f32`.
    Quantize {
        /// Model directory, or Hugging Face hub id `org/name[@revision]`; the built-in default
        /// when absent.
        #[arg(long, value_parser = parse_source)]
        model: Option<ModelSource>,
        /// Storage dtype of the output: int8, f16 or f32.
        #[arg(long, value_parser = parse_name::<WeightDtype>)]
        dtype: WeightDtype,
        /// Output directory (replaced only once written completely).
        #[arg(long)]
        output: PathBuf,
        /// tokenizer.json to use when the model directory has none.
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        /// For int8: sentences (one a line) the f32 model embeds so that the CPU's int8 compute
        /// knows which input channels to multiply in f32; 128 built-in sentences when absent.
        #[arg(long)]
        calibration: Option<PathBuf>,
    },
    /// Evaluate as the paper does: STS (Spearman), SentEval transfer, SentGLUE, alignment/uniformity;
    /// on request, the WEAT/SEAT bias tests (`--tasks bias`) and retrieval over a corpus in BEIR's
    /// layout (`--tasks retrieval:DIR`: nDCG@10, recall@10 and @100, MRR@10).
    Eval {
        #[command(flatten)]
        model: ModelArgs,
        /// Task groups (sts, transfer, sentglue, geometry, bias), single tasks (sts12, stsb, sickr,
        /// mr, trec, ...), or `retrieval:DIR` (a BEIR directory, its qrels/test.tsv) and
        /// `retrieval:DIR@SPLIT` (qrels/SPLIT.tsv).
        #[arg(long, default_value = "sts,transfer,sentglue,geometry")]
        tasks: String,
        /// Retrieval: the vector index's codes searched (none: exact f32; int8 and binary
        /// rescore their candidates exactly, as `st5 index query` does).
        #[arg(long, default_value = "none", value_parser = parse_name::<Quantize>)]
        codes: Quantize,
        /// Retrieval: candidates per result before rescoring; the codes' default when absent.
        #[arg(long, value_parser = index::at_least_one())]
        oversample: Option<usize>,
        /// Retrieval: text put before every query (e.g. `query: ` for e5 models).
        #[arg(long, default_value = "")]
        query_prefix: String,
        /// Retrieval: text put before every document (e.g. `passage: `).
        #[arg(long, default_value = "")]
        document_prefix: String,
        /// Retrieval: how to rank, comma-separated: vector (the model), keyword (BM25 over the
        /// texts) and hybrid (both, fused by each `--fusion`).
        #[arg(long, default_value = "vector", value_delimiter = ',', value_parser = parse_name::<st5_core::search::SearchMode>)]
        modes: Vec<st5_core::search::SearchMode>,
        /// Retrieval: the fusions a hybrid run is measured with, comma-separated: convex:ALPHA
        /// (the vector's weight), rrf, rrf:K or rrf:K:WEIGHT; the library's default when absent.
        #[arg(long, value_delimiter = ',', value_parser = parse_name::<st5_core::search::Fusion>)]
        fusion: Vec<st5_core::search::Fusion>,
        /// The evaluation data directory (SentEval layout, as in shared/data); default:
        /// `$ST5_DATA`, else `../shared/data` from the working directory.
        #[arg(long)]
        data: Option<PathBuf>,
        /// A GLUE directory (TASK/{train,dev}.tsv) for the SentGLUE tasks that shared/data lacks.
        #[arg(long)]
        glue_dir: Option<PathBuf>,
        /// Where to write the results as JSON.
        #[arg(long, default_value = "st5-eval.json")]
        json: PathBuf,
        /// Outer folds for MR, CR, SUBJ and MPQA.
        #[arg(long, default_value_t = 10)]
        outer_folds: usize,
        /// Inner folds choosing the L2 strength.
        #[arg(long, default_value_t = 5)]
        inner_folds: usize,
    },
}

#[derive(Args)]
struct ModelArgs {
    /// Model directory (sentence-transformers or Hugging Face T5 layout), or Hugging Face hub id
    /// `org/name[@revision]` (an existing directory wins); the built-in default when absent.
    #[arg(long, value_parser = parse_source)]
    model: Option<ModelSource>,
    /// Pooling variant; defaults to the model's Pooling module (enc-mean for a plain T5 directory).
    #[arg(long, value_parser = parse_name::<Variant>)]
    variant: Option<Variant>,
    /// Device: cpu (flex) or wgpu.
    #[arg(long, default_value = "cpu", value_parser = parse_name::<DeviceChoice>)]
    device: DeviceChoice,
    /// Arithmetic: auto (an int8 model keeps its weights int8: int8 products on the CPU, f32
    /// products over int8 codes on a GPU) or f32 (every model in f32, int8 weights dequantized at
    /// load: the exact path).
    #[arg(long, default_value = "auto", value_parser = parse_name::<Compute>)]
    compute: Compute,
    /// Texts per forward pass.
    #[arg(long, default_value_t = DEFAULT_BATCH_SIZE)]
    batch_size: usize,
    /// Batch layout: auto (packed without padding on the CPU, so that a text's vector is the same
    /// bits in any batch; padded on a GPU) or padded (padded everywhere, to compare against).
    #[arg(long, default_value = "auto", value_parser = parse_name::<Batching>)]
    batching: Batching,
    /// tokenizer.json to use when the model directory has none.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Override the model's max_seq_length (tokens, `</s>` included).
    #[arg(long)]
    max_seq_length: Option<usize>,
    /// A soft prompt (`trainer` with `prompt_length`) to put before every text; it must have been
    /// trained on this model.
    #[arg(long)]
    prompt: Option<PathBuf>,
    /// The model's directory once resolved (a hub model's cached snapshot, fetched on first
    /// use), so that loading and the index's model identity read the same files.
    #[arg(skip)]
    dir: OnceCell<Option<PathBuf>>,
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    hostname: std::net::IpAddr,
    /// Port to listen on (0: any free port, printed when listening).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Requests in flight at once; more are answered 429 with Retry-After.
    #[arg(long, default_value_t = 512)]
    max_concurrent_requests: usize,
    /// Tokens one batch may hold: texts of concurrent requests run together up to it.
    #[arg(long, default_value_t = 16384)]
    max_batch_tokens: usize,
    /// Inputs one request may hold.
    #[arg(long, default_value_t = 32)]
    max_client_batch_size: usize,
    /// Bytes one request body may hold.
    #[arg(long, default_value_t = 2_000_000)]
    payload_limit: usize,
    /// Truncate inputs past the model's length unless a request says otherwise (OpenAI's route
    /// never does); without it they are refused with 422.
    #[arg(long)]
    auto_truncate: bool,
    /// Bearer token required on every route but /health (or `$ST5_API_KEY`).
    #[arg(long)]
    api_key: Option<String>,
    /// Log one JSON object a line instead of text.
    #[arg(long)]
    json_output: bool,
    /// A soft prompt by name, `NAME=FILE` (repeatable): requests choose it with `prompt_name`.
    #[arg(long, value_parser = parse_named_prompt)]
    prompt_name: Vec<(String, PathBuf)>,
    /// An index file built with this model (`st5 index build`): `POST /search` answers from it.
    #[arg(long)]
    index: Option<PathBuf>,
}

/// `st5 serve --index`: the saved index, searched on the server's model thread.
enum ServedIndex {
    /// A lines index: by vector, on the model's device, with its codes.
    Lines(index::Opened),
    /// A documents index: every mode, filters and facets.
    Documents(st5_core::search::DocumentIndex),
}

impl st5_serve::Searcher for ServedIndex {
    fn search(
        &self,
        r: &st5_serve::SearchRequest,
        vector: &[f32],
    ) -> Result<st5_serve::SearchResponse, st5_serve::SearchError> {
        use st5_serve::SearchError::{Failed, Refused};
        match self {
            ServedIndex::Lines(opened) => {
                if r.mode.as_deref().is_some_and(|m| m != "vector")
                    || r.filter.is_some()
                    || !r.facets.is_empty()
                {
                    return Err(Refused(
                        "this index holds lines, searched by vector only: build it with `st5 index build --docs` for modes, filters and facets".into(),
                    ));
                }
                let hits =
                    opened.search(vector, r.k, None).map_err(|e| Failed(format!("{e:#}")))?;
                let hits = hits
                    .into_iter()
                    .map(|(h, text)| st5_serve::SearchHit {
                        id: st5_serve::HitId::Line(h.id),
                        score: h.score,
                        text: Some(text.into()),
                        document: None,
                        vector_score: None,
                        keyword_score: None,
                        passages: Vec::new(),
                    })
                    .collect();
                Ok(st5_serve::SearchResponse { hits, matched: None, facets: None })
            }
            ServedIndex::Documents(index) => {
                let options = st5_core::search::SearchOptions::parse(
                    index.schema(),
                    r.mode.as_deref(),
                    r.k,
                    r.filter.as_ref(),
                    r.facets.clone(),
                    r.fusion.as_deref(),
                    r.prefix,
                )
                .map_err(|e| Refused(format!("{e:#}")))?;
                let results = index
                    .search(&r.query, Some(vector), &options)
                    .map_err(|e| Refused(e.to_string()))?;
                Ok(documents::response(index, &results))
            }
        }
    }
}

fn parse_named_prompt(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => {
            Ok((name.to_string(), PathBuf::from(file)))
        }
        _ => Err(format!("expected NAME=FILE, got {s:?}")),
    }
}

/// `st5 serve`: the model loads on the server's model thread while it already listens.
fn serve(model: ModelArgs, args: ServeArgs) -> Result<()> {
    if model.prompt.is_some() {
        bail!("st5 serve takes soft prompts by name: --prompt-name NAME=FILE");
    }
    st5_serve::init_logging(args.json_output);
    let config = st5_serve::ServeConfig {
        addr: std::net::SocketAddr::new(args.hostname, args.port),
        limits: st5_serve::Limits {
            max_concurrent_requests: args.max_concurrent_requests,
            max_batch_tokens: args.max_batch_tokens,
            max_client_batch_size: args.max_client_batch_size,
            payload_limit: args.payload_limit,
            auto_truncate: args.auto_truncate,
        },
        api_key: args.api_key.or_else(|| std::env::var("ST5_API_KEY").ok()),
        model_id: model
            .model
            .as_ref()
            .map_or_else(|| env!("ST5_DEFAULT_MODEL_NAME").to_string(), ModelSource::to_string),
        device: model.device.to_string(),
        search: args.index.is_some(),
    };
    let (prompts, index_path) = (args.prompt_name, args.index);
    let loader: st5_serve::Loader = Box::new(move || {
        let load = || -> Result<st5_serve::Model> {
            let embedder = model.load()?;
            let fingerprint = match (prompts.is_empty(), model.dir()?) {
                (true, _) => String::new(),
                (false, Some(dir)) => weights_fingerprint(&Dir(dir.to_path_buf()))?,
                (false, None) => weights_fingerprint(&builtin_files())?,
            };
            let prompts = prompts
                .into_iter()
                .map(|(name, path)| st5_serve::Model::prompt(name, path))
                .collect::<Result<_, _>>()?;
            let index = match &index_path {
                Some(path) if st5_core::index_file::IndexLayout::read(path)?.is_documents() => {
                    let (opened, _) = documents::open(&model, &embedder, path)?;
                    Some(Box::new(ServedIndex::Documents(opened)) as Box<dyn st5_serve::Searcher>)
                }
                Some(path) => {
                    let opened = index::Opened::open(&model, &embedder, path)?;
                    Some(Box::new(ServedIndex::Lines(opened)) as Box<dyn st5_serve::Searcher>)
                }
                None => None,
            };
            Ok(st5_serve::Model { embedder, prompts, fingerprint, index })
        };
        load().map_err(|e| format!("{e:#}"))
    });
    Ok(st5_serve::run(config, loader)?)
}

/// clap's parser for st5's closed sets (variant, dtype, device, codes): their own `FromStr`,
/// whose error lists the accepted names.
fn parse_name<T: std::str::FromStr<Err: std::fmt::Display>>(s: &str) -> Result<T, String> {
    s.parse().map_err(|e: T::Err| e.to_string())
}

/// clap's parser for `--model`: a path from the working directory, or a hub id (no network yet).
fn parse_source(s: &str) -> Result<ModelSource, String> {
    Ok(ModelSource::parse(s, Path::new("")))
}

impl ModelArgs {
    /// What a saved index records as the model that embedded it: the weights fingerprint, and
    /// everything else that changes the vectors: the pooling variant and `max_seq_length`
    /// `embedder` resolved, and the SHA-256 of a `--tokenizer` or soft prompt file.
    fn identity(&self, embedder: &Embedder) -> Result<String> {
        let weights = match self.dir()? {
            Some(dir) => weights_fingerprint(&Dir(dir.to_path_buf()))?,
            None => weights_fingerprint(&builtin_files())?,
        };
        let mut extras = Vec::new();
        for (what, path) in [("tokenizer", &self.tokenizer), ("prompt", &self.prompt)] {
            if let Some(path) = path {
                let bytes =
                    std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
                extras.push((what, st5_core::fingerprint::sha256_hex(&bytes)));
            }
        }
        Ok(st5_core::fingerprint::index_identity(
            &weights,
            embedder.variant(),
            embedder.layout().max_seq_length,
            &extras,
        ))
    }

    /// The directory `--model` names, `None` for the built-in model: [`st5_hub::resolve`], the
    /// one resolution of every subcommand, run once.
    fn dir(&self) -> Result<Option<&Path>> {
        if self.dir.get().is_none() {
            let dir = self.model.as_ref().map(|m| st5_hub::resolve(m, &[])).transpose()?;
            let _ = self.dir.set(dir);
        }
        Ok(self.dir.get().and_then(Option::as_deref))
    }

    fn load(&self) -> Result<Embedder> {
        let device = self.device.device()?;
        let options = LoadOptions {
            variant: self.variant,
            tokenizer: self.tokenizer.clone(),
            max_seq_length: self.max_seq_length,
            batch_size: self.batch_size,
            max_buffer_bytes: None,
            compute: self.compute,
        };
        let name = self.model.as_ref().map(ModelSource::to_string);
        let (mut embedder, name, fingerprint) = match (self.dir()?, name) {
            (Some(dir), Some(name)) => (
                Embedder::load(dir, &options, &device)
                    .with_context(|| format!("loading model {name}"))?,
                name,
                self.prompt
                    .as_ref()
                    .map(|_| weights_fingerprint(&Dir(dir.to_path_buf())))
                    .transpose()?,
            ),
            _ => {
                let files = builtin_files();
                (
                    Embedder::load_from(&files, &options, &device)
                        .context("loading the built-in model")?,
                    "the built-in model".into(),
                    self.prompt.as_ref().map(|_| weights_fingerprint(&files)).transpose()?,
                )
            }
        };
        embedder.set_batching(self.batching);
        if let (Some(path), Some(fingerprint)) = (&self.prompt, fingerprint) {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let prompt = Prompt::from_bytes(&bytes, path)?;
            embedder.set_prompt(Some((&prompt, path)), &fingerprint)?;
        }
        let unused = &embedder.report().unused;
        // A decoder and LM head are expected leftovers when an enc-* variant reads a full T5.
        let surprising: Vec<&String> = unused
            .iter()
            .filter(|n| {
                embedder.variant().needs_decoder()
                    || !(n.starts_with("decoder.") || n.starts_with("lm_head."))
            })
            .collect();
        if !surprising.is_empty() {
            eprintln!(
                "warning: {} unused tensor(s) in {name}: {}",
                surprising.len(),
                join_some(&surprising, 8)
            );
        }
        Ok(embedder)
    }
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() { dir_bytes(&entry.path())? } else { meta.len() };
    }
    Ok(total)
}

/// The built-in model's files, borrowed from the binary (no copy).
fn builtin_files() -> MemoryFiles {
    let mut files = MemoryFiles { label: DEFAULT_LABEL.into(), ..Default::default() };
    for (rel, bytes) in DEFAULT_MODEL.iter().chain([&("model.safetensors", DEFAULT_WEIGHTS)]) {
        files.insert(*rel, FileBytes::from_static(bytes));
    }
    files
}

fn join_some(names: &[&String], n: usize) -> String {
    let mut s = names.iter().take(n).map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
    if names.len() > n {
        s += &format!(", ... ({} more)", names.len() - n);
    }
    s
}

/// Splits UTF-8 text into lines: `\n` or `\r\n` separated, a final newline ends the last line
/// rather than starting an empty one. Invalid UTF-8 is reported with its line number.
fn read_lines(bytes: Vec<u8>, source: &str) -> Result<Vec<String>> {
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            bail!("{source}: invalid UTF-8 at line {line} (byte {at})");
        }
    };
    let body = text.strip_suffix('\n').unwrap_or(&text);
    if text.is_empty() {
        return Ok(Vec::new());
    }
    Ok(body.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l).to_string()).collect())
}

fn read_input(path: Option<&Path>) -> Result<Vec<String>> {
    match path {
        Some(p) => read_lines(
            std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
            &p.display().to_string(),
        ),
        None => {
            let mut buf = Vec::new();
            std::io::stdin().read_to_end(&mut buf).context("reading stdin")?;
            read_lines(buf, "stdin")
        }
    }
}

fn embed(embedder: &Embedder, texts: &[String]) -> st5_core::Result<Embeddings> {
    // Only draw a bar for a person watching, and only when there is more than one batch.
    let bar = (std::io::stderr().is_terminal() && texts.len() > 64).then(|| {
        let bar = ProgressBar::new(texts.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} texts {per_sec} eta {eta}")
                .expect("valid template"),
        );
        bar
    });
    let out = embedder.embed_with_progress(texts, |done, _| {
        if let Some(b) = &bar {
            b.set_position(done as u64);
        }
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(out)
}

/// `st5 eval`'s model: embeds as `st5 embed` does and searches as `st5 index query` does (the
/// library's index over the chosen codes, exact rescoring after them), on the model's device.
struct Evaluated<'a> {
    embedder: &'a Embedder,
    codes: Quantize,
    oversample: Option<usize>,
    limit: Option<u64>,
}

impl st5_eval::Embed for Evaluated<'_> {
    fn embed(&mut self, texts: &[String]) -> st5_eval::Result<(Vec<f32>, usize)> {
        let e = embed(self.embedder, texts).map_err(st5_eval::EvalError::embed)?;
        Ok((e.data, e.dim))
    }

    fn truncated(&mut self, texts: &[String]) -> st5_eval::Result<Option<usize>> {
        let tokenizer = self.embedder.tokenizer();
        let whole =
            tokenizer.with_truncation(Truncation::Off).map_err(st5_eval::EvalError::embed)?;
        let mut n = 0;
        for chunk in texts.chunks(1024) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let ids = whole.encode_batch(&refs).map_err(st5_eval::EvalError::embed)?;
            n += ids.iter().filter(|t| t.len() > tokenizer.max_len()).count();
        }
        Ok(Some(n))
    }

    fn search(
        &mut self,
        corpus: &[f32],
        dim: usize,
        queries: &[f32],
        k: usize,
    ) -> st5_eval::Result<Vec<Vec<(u32, f32)>>> {
        let run = || -> st5_core::Result<Vec<Vec<st5_core::search_index::Hit>>> {
            let mut index =
                VectorIndex::with_quantize(dim, self.embedder.device(), self.limit, self.codes)?;
            index.add(corpus)?;
            let over = self.oversample.unwrap_or(self.codes.default_oversample());
            index.search_rescored(queries, k, over, |ids| {
                Ok(ids.iter().flat_map(|&i| &corpus[i as usize * dim..][..dim]).copied().collect())
            })
        };
        let hits = run().map_err(st5_eval::EvalError::embed)?;
        Ok(hits.into_iter().map(|q| q.into_iter().map(|h| (h.id, h.score)).collect()).collect())
    }

    fn codes(&self) -> String {
        self.codes.to_string()
    }
}

fn write_jsonl(mut w: impl Write, e: &Embeddings) -> std::io::Result<()> {
    for row in e.rows() {
        serde_json::to_writer(&mut w, row)?;
        w.write_all(b"\n")?;
    }
    w.flush()
}

fn write_output(path: Option<&Path>, e: &Embeddings) -> Result<()> {
    let Some(path) = path else { return Ok(write_jsonl(std::io::stdout().lock(), e)?) };
    // Written whole or not at all: a failure never leaves a half-written file.
    let jsonl = path.extension().is_some_and(|x| x == "jsonl");
    Ok(st5_core::atomic::write_with(path, |file| {
        if jsonl {
            write_jsonl(file, e)
        } else {
            st5_core::npy::write_f32(file, &e.data, e.len(), e.dim)
        }
    })?)
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Embed { model, input, output, stats } => {
            let texts = read_input(input.as_deref())?;
            let t0 = Instant::now();
            let embedder = model.load()?;
            let t1 = Instant::now();
            let e = embed(&embedder, &texts)?;
            let t2 = Instant::now();
            if stats {
                let secs = (t2 - t1).as_secs_f64();
                // What ran, so that a figure can be traced: the arithmetic and, in int8, the kernel
                // this CPU chose (st5-int8's `Kernel::best`).
                let arithmetic = if embedder.model().computes_in_int8() {
                    format!("int8 ({:?} kernel)", st5_core::int8::kernel())
                } else {
                    "f32".into()
                };
                eprintln!(
                    "loaded in {:.3} s; embedded {} texts in {secs:.3} s ({:.1} texts/s, {} on {}, {arithmetic}, batch {})",
                    (t1 - t0).as_secs_f64(),
                    texts.len(),
                    texts.len() as f64 / secs.max(1e-9),
                    embedder.variant(),
                    model.device,
                    model.batch_size
                );
            }
            write_output(output.as_deref(), &e)
        }
        Command::Quantize { model, dtype, output, tokenizer, calibration } => {
            let tokenizer = tokenizer.as_deref();
            let calibration = match &calibration {
                Some(path) => {
                    let texts = read_input(Some(path))?;
                    if !texts.iter().any(|t| !t.trim().is_empty()) {
                        bail!("--calibration {}: no sentences in it", path.display());
                    }
                    Some(texts)
                }
                None => None,
            };
            let calibration = calibration.as_deref();
            let (result, name) = match &model {
                Some(source) => (
                    // The model card, which `convert` carries over, is not needed to load.
                    convert(
                        &Dir(st5_hub::resolve(source, &["README.md"])?),
                        tokenizer,
                        dtype,
                        &output,
                        calibration,
                    ),
                    source.to_string(),
                ),
                None => (
                    convert(&builtin_files(), tokenizer, dtype, &output, calibration),
                    "the built-in model".into(),
                ),
            };
            result.with_context(|| format!("converting {name} to {dtype}"))?;
            let bytes = dir_bytes(&output)?;
            eprintln!("wrote {} ({dtype}, {:.1} MB)", output.display(), bytes as f64 / 1e6);
            Ok(())
        }
        Command::Eval {
            model,
            tasks,
            codes,
            oversample,
            query_prefix,
            document_prefix,
            modes,
            fusion,
            data,
            glue_dir,
            json,
            outer_folds,
            inner_folds,
        } => {
            if outer_folds < 2 || inner_folds < 2 {
                bail!("--outer-folds and --inner-folds must be at least 2");
            }
            let options = st5_eval::EvalOptions {
                data_dir: data.unwrap_or_else(st5_eval::data::default_data_dir),
                glue_dir,
                tasks: st5_eval::expand_tasks(&tasks)?,
                protocol: st5_eval::tasks::Protocol {
                    outer_folds,
                    inner_folds,
                    ..Default::default()
                },
                query_prefix,
                document_prefix,
                modes,
                fusions: fusion,
            };
            let embedder = model.load()?;
            let (_, limit) = model.device.device_with_limit()?;
            let mut evaluated = Evaluated { embedder: &embedder, codes, oversample, limit };
            let report = st5_eval::run(&options, &mut evaluated)?;
            print!("{}", report.markdown());
            st5_core::atomic::write(&json, &serde_json::to_vec_pretty(&report)?)?;
            eprintln!("wrote {}", json.display());
            Ok(())
        }
        Command::Index { command } => index::run(command),
        Command::Serve { model, serve: args } => serve(model, args),
        Command::Search { model, corpus, k, query } => {
            let docs = read_lines(
                std::fs::read(&corpus).with_context(|| format!("reading {}", corpus.display()))?,
                &corpus.display().to_string(),
            )?;
            let embedder = model.load()?;
            let mut e = embed(&embedder, &docs)?;
            let mut q = embedder.embed(&[query.as_str()])?;
            // Cosine similarity: dot products of unit rows (a no-op for a Normalize model).
            l2_normalize_rows(&mut e.data, e.dim);
            l2_normalize_rows(&mut q.data, q.dim);
            // The library's exact top-k (ties to the lower id), on the model's device.
            let (_, limit) = model.device.device_with_limit()?;
            let mut index = VectorIndex::new(e.dim, embedder.device(), limit)?;
            index.add(&e.data)?;
            let hits = index.search(&q.data, k)?.remove(0);
            let mut out = std::io::stdout().lock();
            for (rank, hit) in hits.iter().enumerate() {
                writeln!(out, "{}\t{:.4}\t{}", rank + 1, hit.score, docs[hit.id as usize])?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_follow_text_file_conventions() {
        let cases: [(&[u8], &[&str]); 7] = [
            (b"", &[]),
            (b"\n", &[""]),
            (b"a", &["a"]),
            (b"a\n", &["a"]),
            (b"a\n\nb\n", &["a", "", "b"]),
            (b"a\r\nb\r\n", &["a", "b"]),
            ("caf\u{e9}\n".as_bytes(), &["caf\u{e9}"]),
        ];
        for (input, want) in cases {
            assert_eq!(read_lines(input.to_vec(), "t").unwrap(), want, "{input:?}");
        }
    }

    #[test]
    fn invalid_utf8_names_the_line() {
        let err = read_lines(b"ok\nok\nbad \xff\n".to_vec(), "in.txt").unwrap_err().to_string();
        assert!(err.contains("in.txt") && err.contains("line 3"), "{err}");
    }
}
