//! The error type of `st5-format`: what reading a model's files can fail with, each failure naming
//! the file, tensor or text at fault. st5-core wraps it in its own error, beside the failures of
//! running the model on a device.

use std::path::PathBuf;

/// Errors from reading and parsing model files, tokenizing, and invalid arguments.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written (the earlier file, if any, is left as it was).
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A JSON file is malformed or lacks a required field.
    #[error("invalid JSON in {}: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A configuration value is out of range or unsupported.
    #[error("invalid config {}: {message}", path.display())]
    Config { path: PathBuf, message: String },
    /// A directory holds neither a sentence-transformers nor a Hugging Face T5 layout.
    #[error("{}: {message}", path.display())]
    Layout { path: PathBuf, message: String },
    /// A safetensors file is truncated or corrupt.
    #[error("invalid safetensors file {}: {source}", path.display())]
    Safetensors {
        path: PathBuf,
        #[source]
        source: safetensors::SafeTensorError,
    },
    /// A tensor is stored in a dtype other than F32, F16, BF16 or I8 (int8 with its scale).
    #[error("{}: tensor `{name}` has dtype {dtype}; only F32, F16, BF16 and I8 (with a `{name}_scale`) are supported", path.display())]
    Dtype { path: PathBuf, name: String, dtype: String },
    /// An int8 tensor whose scale is missing, mis-shaped or not a float, or that is not 2-D.
    #[error("{}: int8 tensor `{name}`: {message}", path.display())]
    Quantized { path: PathBuf, name: String, message: String },
    /// A soft-prompt file is malformed, or was made for another model.
    #[error("soft prompt {}: {message}", path.display())]
    Prompt { path: PathBuf, message: String },
    /// A search index file (`st5 index build`) is truncated, corrupt or not an index.
    #[error("index file {}: {message}", path.display())]
    Index { path: PathBuf, message: String },
    /// The tokenizer could not be loaded or failed on a text.
    #[error("tokenizer {}: {source}", path.display())]
    Tokenizer {
        path: PathBuf,
        #[source]
        source: tokenizers::Error,
    },
    /// An argument is invalid (a zero batch size, an unknown variant name, ...).
    /// A search collection's schema is unusable.
    #[error("schema: {0}")]
    Schema(String),
    /// A document breaks its collection's schema (nothing of the call was added).
    #[error("document {id:?}: field `{field}`: {message}")]
    Document { id: String, field: String, message: String },
    /// A search query or filter is malformed or names what the schema lacks.
    #[error("query: {0}")]
    Query(String),
    #[error("{0}")]
    Invalid(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
    pub fn config(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Config { path: path.into(), message: message.into() }
    }
    pub fn layout(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Layout { path: path.into(), message: message.into() }
    }
}
