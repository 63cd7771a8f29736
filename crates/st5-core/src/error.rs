//! The error type of `st5-core`: what building and running the model on a device can fail with
//! (the device, a read-back, a buffer limit, weights that do not fit the model, an invalid
//! argument), and every error of the model's files ([`st5_format::Error`]) passed through
//! unchanged.

use std::path::PathBuf;

/// Errors from loading, embedding and searching.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A model file could not be read or parsed, or a name is unknown: st5-format's error, with
    /// its message and source unchanged.
    #[error(transparent)]
    Format(#[from] st5_format::Error),
    /// Tensors the model needs are missing or have the wrong shape.
    #[error("weights in {} do not match the model config:\n{report}", path.display())]
    Weights { path: PathBuf, report: String },
    /// The wgpu device could not be initialised (no adapter, no Vulkan driver, ...).
    #[error("cannot initialise the {device} device: {message}")]
    Device { device: String, message: String },
    /// Reading a result back from the device failed.
    #[error("reading results from the device failed: {0}")]
    Readback(String),
    /// One tensor would need a larger device buffer than the device allows.
    #[error(
        "{what} needs {bytes} bytes in one device buffer, but this device allows at most {limit}{hint}"
    )]
    Limit { what: String, bytes: u64, limit: u64, hint: &'static str },
    /// An argument is invalid (a zero batch size, an unknown device, index vectors of the wrong
    /// width, ...).
    #[error("{0}")]
    Invalid(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
