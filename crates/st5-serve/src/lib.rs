//! `st5-serve`: the HTTP embedding server behind `st5 serve`. It speaks text-embeddings-inference's
//! API (`/embed`, `/`, `/tokenize`, `/info`, `/health`, `/metrics`) and OpenAI's
//! (`/v1/embeddings`), describes both in `/openapi.json`, and runs any model st5 loads (T5, BERT,
//! MPNet; int8 or float; CPU or wgpu) through one thread that batches concurrent requests
//! (`batcher.rs`). It is stateless, so it scales out as replicas behind a load balancer.
//!
//! Built on tokio, axum and tower-http; native only (the wasm build never sees it).

pub mod api;
mod batcher;
pub mod error;
mod metrics;
mod routes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use st5_core::Embedder;
use st5_core::prompt::Prompt;
use st5_core::tokenizer::Truncation;
use tokio::sync::{Semaphore, mpsc, oneshot};

pub use crate::api::{HitId, SearchHit, SearchPassage, SearchRequest, SearchResponse};
pub use crate::batcher::NamedPrompt;
pub use crate::error::{ApiError, ErrorKind, ServeError};
pub use crate::routes::openapi;

/// The limits a server enforces; `Default` is text-embeddings-inference's.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Requests in flight at once; more are answered 429 with `Retry-After`.
    pub max_concurrent_requests: usize,
    /// Tokens a batch may hold (texts of concurrent requests run together up to it).
    pub max_batch_tokens: usize,
    /// Inputs one request may hold.
    pub max_client_batch_size: usize,
    /// Bytes a request body may hold (413 past it).
    pub payload_limit: usize,
    /// Truncate inputs past the model's length when a request does not say (`/v1/embeddings`
    /// never says): otherwise they are refused with 422.
    pub auto_truncate: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent_requests: 512,
            max_batch_tokens: 16384,
            max_client_batch_size: 32,
            payload_limit: 2_000_000,
            auto_truncate: false,
        }
    }
}

/// How the server is started.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub addr: SocketAddr,
    pub limits: Limits,
    /// Bearer token every route but `/health` requires.
    pub api_key: Option<String>,
    /// What `/info` and `/v1/embeddings` call the model.
    pub model_id: String,
    /// What `/info` calls the device.
    pub device: String,
    /// Whether the loader will hand over an index, so that `POST /search` is routed.
    pub search: bool,
}

/// What the loader hands the server: the model, what its soft prompts are checked against, and
/// the index `/search` answers from.
pub struct Model {
    pub embedder: Embedder,
    /// Soft prompts by name (`prompt_name`), each checked against the model at start.
    pub prompts: Vec<NamedPrompt>,
    /// The model's weights fingerprint (`st5_core::fingerprint`), which prompts must match.
    pub fingerprint: String,
    /// A saved index built with this model (`st5 serve --index FILE`), read-only.
    pub index: Option<Box<dyn Searcher>>,
}

/// A saved index, searched on the model thread (where its device memory lives).
pub trait Searcher {
    /// The answer to `request` whose query's unit vector is `vector`: `Err(Refused)` for a
    /// request the index cannot take (a 422), `Err(Failed)` when searching failed (a 500).
    fn search(
        &self,
        request: &SearchRequest,
        vector: &[f32],
    ) -> Result<SearchResponse, SearchError>;
}

/// Why a search has no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchError {
    /// The request asks what the index cannot do (a bad filter, a mode a lines index lacks).
    Refused(String),
    Failed(String),
}

impl Model {
    /// A named prompt read from `path`.
    pub fn prompt(name: String, path: PathBuf) -> Result<NamedPrompt, ServeError> {
        let bytes = std::fs::read(&path)
            .map_err(|e| ServeError::Load(format!("reading {}: {e}", path.display())))?;
        let prompt = Prompt::from_bytes(&bytes, &path).map_err(st5_core::Error::from)?;
        Ok(NamedPrompt { name, prompt, path })
    }
}

/// Loads the model on the server's model thread (the server already answers `/health` with 503
/// meanwhile); its error is the message `st5 serve` exits with.
pub type Loader = Box<dyn FnOnce() -> Result<Model, String> + Send>;

/// Serves until SIGTERM or Ctrl-C, then stops accepting, answers the requests in flight and
/// returns. Returns the load error if the model does not load.
pub fn run(config: ServeConfig, loader: Loader) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(serve(config, loader))
}

async fn serve(config: ServeConfig, loader: Loader) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|source| ServeError::Bind { addr: config.addr.to_string(), source })?;
    let local = listener.local_addr().map_err(ServeError::Runtime)?;
    let metrics = Arc::new(metrics::Metrics::new());
    let (jobs, rx) = mpsc::unbounded_channel();
    let state = Arc::new(routes::AppState {
        limits: config.limits.clone(),
        api_key: config.api_key.clone(),
        ready: OnceLock::new(),
        jobs,
        permits: Arc::new(Semaphore::new(config.limits.max_concurrent_requests.max(1))),
        metrics: metrics.clone(),
    });

    let (ready_tx, ready_rx) = oneshot::channel();
    let worker = {
        let (config, metrics) = (config.clone(), metrics.clone());
        std::thread::Builder::new()
            .name("st5-model".into())
            .spawn(move || {
                let model = loader().and_then(|m| prepare(m, &config).map_err(|e| e.to_string()));
                match model {
                    Ok((model, ready)) => {
                        let _ = ready_tx.send(Ok(ready));
                        let Model { embedder, prompts, fingerprint, index } = model;
                        let worker = batcher::Worker { embedder, prompts, fingerprint, index };
                        batcher::run(worker, config.limits.max_batch_tokens, rx, metrics);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(ServeError::Runtime)?
    };

    // The model loads while the server already listens; a load failure stops the server.
    let (fail_tx, fail_rx) = oneshot::channel::<String>();
    {
        let state = state.clone();
        tokio::spawn(async move {
            match ready_rx.await {
                Ok(Ok(ready)) => {
                    tracing::info!(model = %ready.info.model_id, %local, "ready");
                    let _ = state.ready.set(ready);
                }
                Ok(Err(e)) => {
                    let _ = fail_tx.send(e);
                }
                Err(_) => {
                    let _ = fail_tx.send("the model thread stopped while loading".into());
                }
            }
        });
    }
    tracing::info!(%local, "listening");
    let failed = Arc::new(OnceLock::new());
    let shutdown = {
        let failed = failed.clone();
        async move {
            tokio::select! {
                () = terminated() => tracing::info!("shutting down: answering requests in flight"),
                Ok(e) = fail_rx => { let _ = failed.set(e); }
            }
        }
    };
    let app = routes::router(state, config.search);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServeError::Runtime)?;
    // Every handler has returned and the router (with the job sender) is gone: the model thread
    // finishes what it holds and stops.
    tokio::task::spawn_blocking(move || worker.join()).await.ok();
    match failed.get() {
        Some(e) => Err(ServeError::Load(e.clone())),
        None => Ok(()),
    }
}

/// Checks the prompts against the model and builds what the routes read.
fn prepare(model: Model, config: &ServeConfig) -> Result<(Model, routes::Ready), ServeError> {
    let Model { mut embedder, prompts, fingerprint, index } = model;
    if index.is_some() != config.search {
        return Err(ServeError::Load(
            "the index was announced but not loaded, or the reverse".into(),
        ));
    }
    for p in &prompts {
        embedder.set_prompt(Some((&p.prompt, p.path.as_path())), &fingerprint)?;
    }
    embedder.set_prompt(None, &fingerprint)?;
    let tokenizer = embedder.tokenizer();
    let layout = embedder.layout();
    let int8 = embedder.model().int8_matrices().next().is_some();
    let limits = &config.limits;
    let info = api::Info {
        model_id: config.model_id.clone(),
        model_type: layout.config.family().to_string(),
        pooling: embedder.variant().to_string(),
        dimension: embedder.dim(),
        model_dtype: if int8 { "int8" } else { "float32" }.into(),
        device: config.device.clone(),
        max_input_length: tokenizer.max_len(),
        prompts: prompts.iter().map(|p| p.name.clone()).collect(),
        search: index.is_some(),
        max_concurrent_requests: limits.max_concurrent_requests,
        max_batch_tokens: limits.max_batch_tokens,
        max_client_batch_size: limits.max_client_batch_size,
        payload_limit: limits.payload_limit,
        auto_truncate: limits.auto_truncate,
        version: env!("CARGO_PKG_VERSION"),
    };
    let ready = routes::Ready {
        right: tokenizer.with_truncation(Truncation::Right).map_err(st5_core::Error::from)?,
        left: tokenizer.with_truncation(Truncation::Left).map_err(st5_core::Error::from)?,
        whole: tokenizer.with_truncation(Truncation::Off).map_err(st5_core::Error::from)?,
        vocab_size: layout.config.vocab_size(),
        info,
    };
    Ok((Model { embedder, prompts, fingerprint, index }, ready))
}

/// SIGTERM (an orchestrator stopping a replica) or Ctrl-C.
async fn terminated() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// Logs to stderr, one line a request: plain text, or JSON with `json`.
pub fn init_logging(json: bool) {
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}
