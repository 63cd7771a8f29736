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
    #[error(transparent)]
    Model(#[from] st5_core::Error),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = EvalError> = std::result::Result<T, E>;
