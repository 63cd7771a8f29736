//! The routes: text-embeddings-inference's (`/embed`, `/`, `/tokenize`, `/info`, `/health`,
//! `/metrics`) and OpenAI's (`/v1/embeddings`), the OpenAPI description generated from their
//! types (`/openapi.json`), and the layers around them: the bearer token, one log line a request,
//! and a panic turned into a 500 JSON error.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::Json;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde::de::DeserializeOwned;
use st5_core::model::l2_normalize_rows;
use st5_core::tokenizer::{T5Tokenizer, out_of_vocab};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tower_http::catch_panic::CatchPanicLayer;
use utoipa::OpenApi;

use crate::Limits;
use crate::api::{
    EmbedRequest, EmbedResponse, EncodingFormat, Info, OpenAiEmbedding, OpenAiError, OpenAiInput,
    OpenAiRequest, OpenAiResponse, OpenAiUsage, OpenAiVector, SearchRequest, SearchResponse,
    SimpleToken, TeiError, TokenizeRequest, TokenizeResponse, TruncationDirection,
};
use crate::batcher::{Job, Work};
use crate::error::{Api, ApiError, ErrorKind};
use crate::metrics::Metrics;

/// What the routes need once the model has loaded.
pub struct Ready {
    pub info: Info,
    /// The model's tokenizer cutting the end, cutting the start, and not cutting.
    pub right: T5Tokenizer,
    pub left: T5Tokenizer,
    pub whole: T5Tokenizer,
    pub vocab_size: usize,
}

pub struct AppState {
    pub limits: Limits,
    pub api_key: Option<String>,
    pub ready: OnceLock<Ready>,
    pub jobs: mpsc::UnboundedSender<Work>,
    pub permits: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
}

type Reply<T> = Result<T, ApiError>;

impl AppState {
    fn ready(&self) -> Reply<&Ready> {
        self.ready.get().ok_or_else(|| ApiError::new(ErrorKind::Unhealthy, "the model is loading"))
    }

    /// Tokenizes `texts` as the request asks: truncated at the model's input length, or
    /// refused past it.
    fn tokenize(
        &self,
        texts: &[String],
        truncate: bool,
        direction: TruncationDirection,
    ) -> Reply<Vec<Vec<u32>>> {
        let ready = self.ready()?;
        if let Some(i) = texts.iter().position(String::is_empty) {
            return Err(ApiError::new(ErrorKind::Empty, format!("input {i} is an empty string")));
        }
        let tokenizer = match (truncate, direction) {
            (false, _) => &ready.whole,
            (true, TruncationDirection::Right) => &ready.right,
            (true, TruncationDirection::Left) => &ready.left,
        };
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let seqs = tokenizer
            .encode_batch(&refs)
            .map_err(|e| ApiError::new(ErrorKind::Tokenizer, e.to_string()))?;
        self.check_lengths(&seqs)?;
        Ok(seqs)
    }

    /// Refuses a sequence longer than the model reads.
    fn check_lengths(&self, seqs: &[Vec<u32>]) -> Reply<()> {
        let max = self.ready()?.info.max_input_length;
        match seqs.iter().position(|s| s.len() > max) {
            Some(i) => Err(ApiError::new(
                ErrorKind::Validation,
                format!(
                    "input {i} has {} tokens, more than the model's {max}: shorten it or send `truncate: true`",
                    seqs[i].len()
                ),
            )),
            None => Ok(()),
        }
    }

    fn check_count(&self, n: usize) -> Reply<()> {
        if n == 0 {
            return Err(ApiError::new(ErrorKind::Empty, "`inputs` cannot be empty"));
        }
        let max = self.limits.max_client_batch_size;
        if n > max {
            return Err(ApiError::new(
                ErrorKind::Validation,
                format!("batch size {n} > maximum allowed batch size {max}"),
            ));
        }
        Ok(())
    }

    fn check_dimensions(&self, dimensions: Option<usize>) -> Reply<()> {
        let dim = self.ready()?.info.dimension;
        match dimensions {
            Some(d) if d != dim => Err(ApiError::new(
                ErrorKind::Validation,
                format!(
                    "`dimensions` {d}: this model gives {dim} dimensions and was not trained for shorter (Matryoshka) prefixes"
                ),
            )
            .param("dimensions")),
            _ => Ok(()),
        }
    }

    fn prompt_index(&self, name: Option<&str>) -> Reply<Option<usize>> {
        let Some(name) = name else { return Ok(None) };
        let prompts = &self.ready()?.info.prompts;
        match prompts.iter().position(|p| p == name) {
            Some(i) => Ok(Some(i)),
            None => Err(ApiError::new(
                ErrorKind::Validation,
                format!(
                    "unknown prompt_name {name:?}; this server has {}",
                    if prompts.is_empty() {
                        "no prompts (start it with --prompt-name NAME=FILE)".into()
                    } else {
                        prompts.join(", ")
                    }
                ),
            )),
        }
    }

    /// Holds one of `--max-concurrent-requests` places, or answers 429.
    fn admit(&self) -> Reply<tokio::sync::OwnedSemaphorePermit> {
        self.permits
            .clone()
            .try_acquire_owned()
            .map_err(|_| ApiError::new(ErrorKind::Overloaded, "Model is overloaded"))
    }

    /// Queues `seqs` for the model and waits for their rows `[seqs.len(), dim]`.
    async fn embed(&self, seqs: Vec<Vec<u32>>, prompt: Option<usize>) -> Reply<Vec<f32>> {
        self.ask(|reply| Work::Embed(Job { seqs, prompt, reply, enqueued: Instant::now() })).await
    }

    /// The index's answer to `request`, whose query's unit vector is `vector`.
    async fn search(&self, request: SearchRequest, vector: Vec<f32>) -> Reply<SearchResponse> {
        self.ask(|reply| Work::Search { request, vector, reply })
            .await?
            .map_err(|m| ApiError::new(ErrorKind::Validation, m))
    }

    /// Sends the model thread the work `make` builds around a reply channel, and waits for the
    /// answer; a failure there is a 500.
    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, String>>) -> Work,
    ) -> Reply<T> {
        let (reply, answer) = oneshot::channel();
        let gone = || ApiError::new(ErrorKind::Backend, "the model worker has stopped");
        self.jobs.send(make(reply)).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?.map_err(|e| ApiError::new(ErrorKind::Backend, e))
    }

    /// Counts the request's outcome under `method` and its duration.
    fn finish(&self, method: &str, t0: Instant, reply: Reply<Response>, api: Api) -> Response {
        let m = &self.metrics;
        m.request_count.with_label_values(&[method]).inc();
        m.request_duration.observe(t0.elapsed().as_secs_f64());
        match reply {
            Ok(r) => {
                m.request_success.with_label_values(&[method]).inc();
                r
            }
            Err(e) => {
                m.request_failure.with_label_values(&[e.kind.name()]).inc();
                e.api(api).into_response()
            }
        }
    }
}

/// The body, at most `limit` bytes, as `T`: 413 past the limit, 400 for bytes that are not
/// UTF-8 JSON, 422 for JSON of the wrong shape (naming the field).
async fn parse<T: DeserializeOwned>(body: Body, limit: usize) -> Reply<T> {
    let bytes = to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(
            ErrorKind::PayloadTooLarge,
            format!("the body is larger than the payload limit ({limit} bytes)"),
        )
    })?;
    if let Err(e) = std::str::from_utf8(&bytes) {
        return Err(ApiError::new(
            ErrorKind::Malformed,
            format!("the body is not valid UTF-8 (byte {})", e.valid_up_to()),
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let kind = match inner.classify() {
            serde_json::error::Category::Data => ErrorKind::Validation,
            _ => ErrorKind::Malformed,
        };
        let at = if path == "." { String::new() } else { format!(" at `{path}`") };
        ApiError::new(kind, format!("invalid request body{at}: {inner}"))
    })
}

#[utoipa::path(post, path = "/embed", request_body = EmbedRequest,
    responses((status = 200, body = EmbedResponse), (status = 400, body = TeiError),
        (status = 413, body = TeiError), (status = 422, body = TeiError),
        (status = 429, body = TeiError), (status = 500, body = TeiError), (status = 503, body = TeiError)))]
async fn embed(State(s): State<Arc<AppState>>, body: Body) -> Response {
    let t0 = Instant::now();
    let reply = async {
        let req: EmbedRequest = parse(body, s.limits.payload_limit).await?;
        let _permit = s.admit()?;
        let texts = req.inputs.into_vec();
        s.check_count(texts.len())?;
        s.check_dimensions(req.dimensions)?;
        let prompt = s.prompt_index(req.prompt_name.as_deref())?;
        let truncate = req.truncate.unwrap_or(s.limits.auto_truncate);
        let seqs = s.tokenize(&texts, truncate, req.truncation_direction)?;
        let mut rows = s.embed(seqs, prompt).await?;
        let dim = s.ready()?.info.dimension;
        if req.normalize {
            l2_normalize_rows(&mut rows, dim);
        }
        Ok(Json(EmbedResponse(rows.chunks(dim).map(<[f32]>::to_vec).collect())).into_response())
    }
    .await;
    s.finish("embed", t0, reply, Api::Tei)
}

#[utoipa::path(post, path = "/v1/embeddings", request_body = OpenAiRequest,
    responses((status = 200, body = OpenAiResponse), (status = 400, body = OpenAiError),
        (status = 413, body = OpenAiError), (status = 422, body = OpenAiError),
        (status = 429, body = OpenAiError), (status = 500, body = OpenAiError), (status = 503, body = OpenAiError)))]
async fn openai(State(s): State<Arc<AppState>>, body: Body) -> Response {
    let t0 = Instant::now();
    let reply = async {
        let req: OpenAiRequest =
            parse(body, s.limits.payload_limit).await.map_err(|e| e.param("input"))?;
        let _permit = s.admit()?;
        s.check_dimensions(req.dimensions)?;
        let truncate = s.limits.auto_truncate;
        let seqs = match req.input {
            OpenAiInput::Single(t) => texts_to_ids(&s, vec![t], truncate)?,
            OpenAiInput::Batch(t) => texts_to_ids(&s, t, truncate)?,
            OpenAiInput::Ids(ids) => ids_checked(&s, vec![ids], truncate)?,
            OpenAiInput::BatchIds(ids) => ids_checked(&s, ids, truncate)?,
        };
        let tokens = seqs.iter().map(Vec::len).sum();
        let mut rows = s.embed(seqs, None).await?;
        let ready = s.ready()?;
        let dim = ready.info.dimension;
        l2_normalize_rows(&mut rows, dim);
        let data = rows
            .chunks(dim)
            .enumerate()
            .map(|(index, row)| OpenAiEmbedding {
                object: "embedding",
                embedding: match req.encoding_format {
                    EncodingFormat::Float => OpenAiVector::Float(row.to_vec()),
                    EncodingFormat::Base64 => OpenAiVector::Base64(
                        base64::engine::general_purpose::STANDARD.encode(bytemuck_le(row)),
                    ),
                },
                index,
            })
            .collect();
        Ok(Json(OpenAiResponse {
            object: "list",
            data,
            model: req.model.unwrap_or_else(|| ready.info.model_id.clone()),
            usage: OpenAiUsage { prompt_tokens: tokens, total_tokens: tokens },
        })
        .into_response())
    }
    .await;
    s.finish("openai", t0, reply, Api::OpenAi)
}

/// The little-endian bytes of `row`'s float32 values (OpenAI's base64 encoding).
fn bytemuck_le(row: &[f32]) -> Vec<u8> {
    row.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn texts_to_ids(s: &AppState, texts: Vec<String>, truncate: bool) -> Reply<Vec<Vec<u32>>> {
    s.check_count(texts.len()).map_err(|e| e.param("input"))?;
    s.tokenize(&texts, truncate, TruncationDirection::Right).map_err(|e| e.param("input"))
}

/// Token ids as the client sent them, numbered by this model's tokenizer: used as they are
/// (no special tokens added), refused outside the vocabulary.
fn ids_checked(s: &AppState, mut seqs: Vec<Vec<u32>>, truncate: bool) -> Reply<Vec<Vec<u32>>> {
    s.check_count(seqs.len()).map_err(|e| e.param("input"))?;
    let ready = s.ready()?;
    if let Some(i) = seqs.iter().position(Vec::is_empty) {
        return Err(
            ApiError::new(ErrorKind::Empty, format!("input {i} has no token ids")).param("input")
        );
    }
    let vocab = ready.vocab_size;
    if let Some((i, id)) = out_of_vocab(&seqs, vocab) {
        return Err(ApiError::new(
            ErrorKind::Tokenizer,
            format!(
                "input {i}: token id {id} is outside the model's vocabulary ({vocab} ids). Token ids must be this model's own; LangChain's OpenAIEmbeddings sends tiktoken ids unless `check_embedding_ctx_length=False`"
            ),
        )
        .param("input"));
    }
    if truncate {
        let max = ready.info.max_input_length;
        seqs.iter_mut().for_each(|t| t.truncate(max));
    }
    s.check_lengths(&seqs).map_err(|e| e.param("input"))?;
    Ok(seqs)
}

/// The most results one search may ask for.
const MAX_K: usize = 1000;

/// Served only when the server was started with `--index FILE` (404 otherwise).
#[utoipa::path(post, path = "/search", request_body = SearchRequest,
    responses((status = 200, body = SearchResponse), (status = 400, body = TeiError),
        (status = 422, body = TeiError), (status = 429, body = TeiError), (status = 503, body = TeiError)))]
async fn search(State(s): State<Arc<AppState>>, body: Body) -> Response {
    let t0 = Instant::now();
    let reply = async {
        let req: SearchRequest = parse(body, s.limits.payload_limit).await?;
        let _permit = s.admit()?;
        if !(1..=MAX_K).contains(&req.k) {
            return Err(ApiError::new(
                ErrorKind::Validation,
                format!("`k` {} is outside 1..={MAX_K}", req.k),
            ));
        }
        let truncate = req.truncate.unwrap_or(s.limits.auto_truncate);
        let seqs =
            s.tokenize(std::slice::from_ref(&req.query), truncate, TruncationDirection::Right)?;
        let mut vector = s.embed(seqs, None).await?;
        l2_normalize_rows(&mut vector, usize::MAX);
        Ok(Json(s.search(req, vector).await?).into_response())
    }
    .await;
    s.finish("search", t0, reply, Api::Tei)
}

#[utoipa::path(post, path = "/tokenize", request_body = TokenizeRequest,
    responses((status = 200, body = TokenizeResponse), (status = 400, body = TeiError),
        (status = 422, body = TeiError), (status = 503, body = TeiError)))]
async fn tokenize(State(s): State<Arc<AppState>>, body: Body) -> Response {
    let t0 = Instant::now();
    let reply = async {
        let req: TokenizeRequest = parse(body, s.limits.payload_limit).await?;
        let texts = req.inputs.into_vec();
        s.check_count(texts.len())?;
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let tokens = s
            .ready()?
            .whole
            .tokens(&refs)
            .map_err(|e| ApiError::new(ErrorKind::Tokenizer, e.to_string()))?;
        let out = tokens
            .into_iter()
            .map(|seq| {
                seq.into_iter()
                    .filter(|t| req.add_special_tokens || !t.special)
                    .map(|t| SimpleToken {
                        id: t.id,
                        text: t.text,
                        special: t.special,
                        start: (!t.special).then_some(t.start),
                        stop: (!t.special).then_some(t.stop),
                    })
                    .collect()
            })
            .collect();
        Ok(Json(TokenizeResponse(out)).into_response())
    }
    .await;
    s.finish("tokenize", t0, reply, Api::Tei)
}

#[utoipa::path(get, path = "/info", responses((status = 200, body = Info), (status = 503, body = TeiError)))]
async fn info(State(s): State<Arc<AppState>>) -> Response {
    match s.ready() {
        Ok(r) => Json(r.info.clone()).into_response(),
        Err(e) => e.into_response(),
    }
}

/// 200 once the model is loaded, 503 before.
#[utoipa::path(get, path = "/health", responses((status = 200), (status = 503, body = TeiError)))]
async fn health(State(s): State<Arc<AppState>>) -> Response {
    match s.ready() {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => e.into_response(),
    }
}

/// The metrics in Prometheus' text format.
#[utoipa::path(get, path = "/metrics", responses((status = 200, content_type = "text/plain")))]
async fn metrics(State(s): State<Arc<AppState>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], s.metrics.render())
        .into_response()
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "st5 serve",
        description = "Sentence embeddings over text-embeddings-inference's and OpenAI's APIs"
    ),
    paths(embed, openai, search, tokenize, info, health, metrics),
    components(schemas(TeiError, OpenAiError))
)]
struct ApiDoc;

/// The OpenAPI 3 description of every route, generated from the request and response types.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    // `POST /` is `/embed` under text-embeddings-inference's root route.
    if let Some(item) = doc.paths.paths.get("/embed").cloned() {
        doc.paths.paths.insert("/".into(), item);
    }
    doc.info.version = env!("CARGO_PKG_VERSION").into();
    doc
}

async fn openapi_json() -> Response {
    Json(openapi()).into_response()
}

/// Every route but `/health` needs `Authorization: Bearer KEY` when the server has a key.
async fn authorize(State(s): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Some(key) = &s.api_key
        && req.uri().path() != "/health"
    {
        let sent = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !sent.is_some_and(|t| same(t.as_bytes(), key.as_bytes())) {
            let api = Api::of_path(req.uri().path());
            let e = ApiError::new(ErrorKind::Unauthorized, "missing or wrong bearer token");
            return e.api(api).into_response();
        }
    }
    next.run(req).await
}

/// Compares in time that depends on the length only, not on where the bytes first differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One log line a request: method, path, status and milliseconds.
async fn log(req: Request, next: Next) -> Response {
    let (method, path, t0) = (req.method().clone(), req.uri().path().to_string(), Instant::now());
    let response = next.run(req).await;
    tracing::info!(
        method = %method,
        path = %path,
        status = response.status().as_u16(),
        ms = %format_args!("{:.3}", t0.elapsed().as_secs_f64() * 1e3),
        "request"
    );
    response
}

/// Every route; `POST /search` only with an index.
pub fn router(state: Arc<AppState>, with_search: bool) -> axum::Router {
    let routes = axum::Router::new();
    let routes = if with_search { routes.route("/search", post(search)) } else { routes };
    routes
        .route("/", post(embed))
        .route("/embed", post(embed))
        .route("/v1/embeddings", post(openai))
        .route("/tokenize", post(tokenize))
        .route("/info", get(info))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi_json))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::new(ErrorKind::Backend, "the request panicked; the server goes on")
                .into_response()
        }))
        .layer(middleware::from_fn(log))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_whole() {
        let cases: [(&[u8], &[u8], bool); 4] =
            [(b"k", b"k", true), (b"k", b"K", false), (b"k", b"kk", false), (b"", b"", true)];
        for (a, b, want) in cases {
            assert_eq!(same(a, b), want, "{a:?} {b:?}");
        }
    }

    #[test]
    fn the_description_has_every_route() {
        let doc = openapi();
        for path in [
            "/",
            "/embed",
            "/v1/embeddings",
            "/search",
            "/tokenize",
            "/info",
            "/health",
            "/metrics",
        ] {
            assert!(doc.paths.paths.contains_key(path), "{path}");
        }
        let json = serde_json::to_value(&doc).unwrap();
        assert!(json["openapi"].as_str().unwrap().starts_with("3."));
        assert!(json["components"]["schemas"]["EmbedRequest"].is_object());
    }
}
