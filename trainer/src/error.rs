//! The trainer library's error type: every failure names the file, line or step at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read or write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config {}: {message}", path.display())]
    Config { path: PathBuf, message: String },
    #[error("{}:{line}: {message}", path.display())]
    Data { path: PathBuf, line: usize, message: String },
    #[error(transparent)]
    Model(#[from] st5_format::Error),
    /// Running the model on a device (st5-core's error: the device, a read-back, a limit).
    #[cfg(feature = "model")]
    #[error(transparent)]
    Core(#[from] st5_core::Error),
    /// `[model] init` names a hub model that could not be fetched (the id and revision named).
    #[cfg(feature = "model")]
    #[error(transparent)]
    Hub(#[from] st5_hub::Error),
    #[error("evaluation data: {0}")]
    Eval(#[from] st5_eval::EvalError),
    #[error("checkpoint {}: {message}", path.display())]
    Checkpoint { path: PathBuf, message: String },
    #[error(
        "{count} non-finite losses or gradients in a row at step {step} of stage `{stage}`; the last good checkpoint is kept"
    )]
    Diverged { stage: String, step: usize, count: usize },
    /// Data-parallel workers disagree (config, batch split, replicas drifted apart).
    #[error("data-parallel workers: {message}")]
    Workers { message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
