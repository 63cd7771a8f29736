//! `st5-core`: Sentence-T5 (Ni et al. 2021) on burn. One model code base for the browser
//! package, the native CLI and the trainer.
//!
//! Layers, each usable alone (those marked † are st5-format's, re-exported):
//! - [`config`] †: `T5Config` from `config.json`, validated;
//! - [`t5`]: the T5 encoder/decoder stacks, named like Hugging Face's modules;
//! - [`model`]: [`SentenceT5`] = T5 + pooling variant + Dense + L2 norm, `forward(ids, mask)`;
//! - [`checkpoint`], [`layout`] and [`files`]: safetensors checkpoints and model layouts, read from
//!   a directory or from files held in memory; [`weights`]: modules built from them;
//! - [`names`]: the one table between module paths and checkpoint tensor names;
//! - [`save`]: writing a model as a sentence-transformers directory, in f32, f16 or int8
//!   ([`quant`]);
//! - [`probe`]: which files a load reads, for loaders that fetch them one by one;
//! - [`tokenizer`] and [`batch`]: T5 tokenization and length-bucketed batching;
//! - [`host`]: the one path from token ids to embeddings on a device, and back to the host;
//! - [`loader`]: files to a model and tokenizer on a device, every tensor checked by name;
//! - [`embedder`]: [`Embedder`], texts in, `[n, dim]` out;
//! - [`index`]: [`VectorIndex`], top-k search over vectors kept on the device, f32 or int8 /
//!   binary codes ([`vector_codes`]) with exact rescoring; [`index_file`]: a saved index.

pub mod batch;
pub mod device;
pub mod embedder;
pub mod host;
pub mod index;
pub mod kernels;
pub mod loader;
pub mod model;
pub mod save;
pub mod t5;
pub mod weights;

// The model's files, parsed without burn in st5-format, under their old paths.
pub use st5_format::{
    charsmap, checkpoint, config, error, files, fingerprint, index_file, layout, names, npy, probe,
    prompt, quant, rng, tokenizer, vector_codes,
};

pub use burn::tensor::Device;
pub use config::T5Config;
pub use device::{DeviceChoice, OpenDevice};
pub use embedder::{DEFAULT_BATCH_SIZE, Embedder, Embeddings, LoadOptions};
pub use error::{Error, Result};
pub use files::{Dir, FileBytes, MemoryFiles, ModelFiles};
pub use index::{Hit, VectorIndex};
pub use model::{HeadConfig, SentenceT5, Variant};
pub use quant::WeightDtype;
pub use vector_codes::Quantize;
