//! The request and response bodies of every route, in the shapes their clients send and parse:
//! text-embeddings-inference's (`/embed`, `/`, `/tokenize`, `/info`) and OpenAI's
//! (`/v1/embeddings`). The OpenAPI description (`/openapi.json`) is generated from these types.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One text or several.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Inputs {
    Single(String),
    Batch(Vec<String>),
}

impl Inputs {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Inputs::Single(s) => vec![s],
            Inputs::Batch(v) => v,
        }
    }
}

/// Which end of a text too long for the model is cut when truncation is on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
pub enum TruncationDirection {
    #[default]
    #[serde(alias = "right")]
    Right,
    #[serde(alias = "left")]
    Left,
}

/// `POST /embed` (and `POST /`), as text-embeddings-inference takes it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EmbedRequest {
    pub inputs: Inputs,
    /// L2-normalise each vector (default true).
    #[serde(default = "yes")]
    pub normalize: bool,
    /// Cut texts longer than the model's input length instead of refusing them (default: the
    /// server's `--auto-truncate`).
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    pub truncation_direction: TruncationDirection,
    /// A soft prompt the server was started with (`--prompt-name NAME=FILE`), put before every
    /// text of this request.
    #[serde(default)]
    pub prompt_name: Option<String>,
    /// Output width: only the model's own is accepted (no model here is trained for shorter
    /// Matryoshka prefixes).
    #[serde(default)]
    pub dimensions: Option<usize>,
}

fn yes() -> bool {
    true
}

/// `POST /embed`'s answer: one vector per input, in input order.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmbedResponse(pub Vec<Vec<f32>>);

/// OpenAI's `input`: texts, or token ids as the model's tokenizer numbers them.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum OpenAiInput {
    Single(String),
    Batch(Vec<String>),
    Ids(Vec<u32>),
    BatchIds(Vec<Vec<u32>>),
}

/// How `/v1/embeddings` writes each vector.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EncodingFormat {
    /// An array of numbers.
    #[default]
    Float,
    /// The float32 values, little-endian, in base64 (what the `openai` client asks for).
    Base64,
}

/// `POST /v1/embeddings`, as OpenAI's API takes it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct OpenAiRequest {
    pub input: OpenAiInput,
    /// Echoed back; any name is accepted (the server runs one model).
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub encoding_format: EncodingFormat,
    #[serde(default)]
    pub dimensions: Option<usize>,
    /// Accepted and ignored, as OpenAI's API does.
    #[serde(default)]
    pub user: Option<String>,
}

/// A vector as floats or as base64 of its little-endian float32 bytes.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum OpenAiVector {
    Float(Vec<f32>),
    Base64(String),
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiEmbedding {
    /// Always `"embedding"`.
    pub object: &'static str,
    pub embedding: OpenAiVector,
    pub index: usize,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiUsage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

/// `POST /v1/embeddings`' answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiResponse {
    /// Always `"list"`.
    pub object: &'static str,
    pub data: Vec<OpenAiEmbedding>,
    pub model: String,
    pub usage: OpenAiUsage,
}

/// `POST /tokenize`, as text-embeddings-inference takes it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct TokenizeRequest {
    pub inputs: Inputs,
    /// Include the tokens the model's post-processor adds (`</s>`, `[CLS]`, `[SEP]`); default true.
    #[serde(default = "yes")]
    pub add_special_tokens: bool,
}

/// One token: its id, its piece, whether it was added, and the characters it covers.
#[derive(Debug, Serialize, ToSchema)]
pub struct SimpleToken {
    pub id: u32,
    pub text: String,
    pub special: bool,
    pub start: Option<usize>,
    pub stop: Option<usize>,
}

/// `POST /tokenize`'s answer: each input's tokens.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenizeResponse(pub Vec<Vec<SimpleToken>>);

/// `POST /search` (a server started with `--index FILE`): a query answered from the index. A
/// documents index (`st5 index build --docs`) takes every field; a lines index, `query`, `k` and
/// `truncate` (it ranks by vector).
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct SearchRequest {
    pub query: String,
    /// Results wanted, 1 to 1000 (default 10).
    #[serde(default = "ten")]
    pub k: usize,
    /// Cut a query longer than the model's input length (default: the server's
    /// `--auto-truncate`).
    #[serde(default)]
    pub truncate: Option<bool>,
    /// `vector`, `keyword` or `hybrid` (the default).
    #[serde(default)]
    pub mode: Option<String>,
    /// A filter on the stored fields: JSON (`{"year": {"gte": 2020}, "tags": {"in": ["a"]}}`) or
    /// its text form (`"year >= 2020 and tags in (a)"`).
    #[serde(default, rename = "where")]
    #[schema(value_type = Option<Object>)]
    pub filter: Option<serde_json::Value>,
    /// Stored fields whose values to count over the matching documents.
    #[serde(default)]
    pub facets: Vec<String>,
    /// How hybrid fuses: `zscore:ALPHA`, `convex:ALPHA`, `rrf`, `rrf:K` or `rrf:K:WEIGHT`.
    #[serde(default)]
    pub fusion: Option<String>,
    /// The query's last word also matches the words it begins (search as you type).
    #[serde(default)]
    pub prefix: bool,
}

fn ten() -> usize {
    10
}

/// A hit's id: a lines index's line number, or a document's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum HitId {
    Line(u32),
    Document(String),
}

/// A passage of a document hit: its field, its range there in characters, its text, its cosine
/// with the query, and the character ranges of the query's words in the field.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SearchPassage {
    pub field: String,
    pub start: usize,
    pub end: usize,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    pub highlights: Vec<[usize; 2]>,
}

/// One result: a line (its number, score and text) or a document (its id, score, the document,
/// each side's score and its best passages).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SearchHit {
    pub id: HitId,
    pub score: f32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub document: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_score: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyword_score: Option<f32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passages: Vec<SearchPassage>,
}

/// `POST /search`'s answer, best first; for a documents index, how many documents passed the
/// filter and the facet counts (`{"tags": [["a", 3], ["b", 1]]}`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SearchResponse {
    pub hits: Vec<SearchHit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub facets: Option<serde_json::Value>,
}

/// `GET /info`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Info {
    pub model_id: String,
    /// The encoder family (`t5`, `bert`, `mpnet`), from `config.json`'s `model_type`.
    pub model_type: String,
    /// The pooling the model uses.
    pub pooling: String,
    pub dimension: usize,
    /// `int8` (int8 weights; int8 products on the CPU) or `float32`.
    pub model_dtype: String,
    pub device: String,
    /// The longest input in tokens, special tokens included (`max_seq_length`).
    pub max_input_length: usize,
    /// Soft prompts by name (`prompt_name`).
    pub prompts: Vec<String>,
    /// Whether `POST /search` answers (`--index FILE`).
    pub search: bool,
    pub max_concurrent_requests: usize,
    pub max_batch_tokens: usize,
    pub max_client_batch_size: usize,
    pub payload_limit: usize,
    pub auto_truncate: bool,
    pub version: &'static str,
}

/// text-embeddings-inference's error body.
#[derive(Debug, Serialize, ToSchema)]
pub struct TeiError {
    pub error: String,
    pub error_type: String,
}

/// OpenAI's error body.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiError {
    pub error: OpenAiErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiErrorDetail {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub param: Option<String>,
    pub code: Option<String>,
}
