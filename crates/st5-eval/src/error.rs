//! The one error type of `st5-eval`.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}, line {line}: {message}", path.display())]
    Parse { path: PathBuf, line: usize, message: String },
    /// The caller's embedding function failed (st5-eval runs no model itself).
    #[error("embedding failed: {0}")]
    Embed(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("{0}")]
    Invalid(String),
}

impl EvalError {
    /// The embedding function's error, kept as the source.
    pub fn embed(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Embed(e.into())
    }
}

pub type Result<T, E = EvalError> = std::result::Result<T, E>;
