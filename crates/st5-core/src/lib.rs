//! `st5-core`: Sentence-T5 (Ni et al. 2021) on burn, and the BERT and MPNet sentence encoders
//! beside it. One model code base for the browser package, the native CLI and the trainer.
//!
//! Layers, each usable alone (those marked † are st5-format's, re-exported):
//! - [`config`] †: `config.json` validated, its family (T5, BERT, MPNet) chosen by `model_type`;
//! - [`kernels`]: fused GPU kernels (cubecl), the lowest layer, on plain tensors;
//! - [`int8`]: int8 weights kept int8 on the CPU, and their Linear product and embedding lookup
//!   over st5-int8's kernels; [`calibration`]: the Linear inputs' statistics `st5 quantize`
//!   stores for it;
//! - [`ops`]: each fused operation (Linear, RMS norm, attention, pooling, L2 norm): its kernel,
//!   or the tensor-operation reference beside it;
//! - [`models`]: the encoder families, one file each (`t5`, `bert`, `mpnet`), named like Hugging
//!   Face's modules, behind one `Encoder`;
//! - [`model`]: [`SentenceModel`] = encoder + pooling + Dense + L2 norm, `forward(ids, mask)`;
//! - [`checkpoint`], [`layout`] and [`files`]: safetensors checkpoints and model layouts, read from
//!   a directory or from files held in memory; [`weights`]: modules built from them;
//! - [`names`]: the one table between module paths and checkpoint tensor names;
//! - [`save`]: writing a model as a sentence-transformers directory, in f32, f16 or int8
//!   ([`quant`]);
//! - [`probe`]: which files a load reads, for loaders that fetch them one by one;
//! - [`tokenizer`] and [`batch`]: T5 tokenization and length-bucketed batching;
//! - [`transfer`]: the one path from token ids to embeddings on a device, and back to the host;
//! - [`loader`]: files to a model and tokenizer on a device, every tensor checked by name;
//! - [`embedder`]: [`Embedder`], texts in, `[n, dim]` out;
//! - [`search_index`]: [`VectorIndex`], top-k search over vectors kept on the device, f32 or
//!   int8 / binary codes ([`vector_codes`]) with exact rescoring; [`index_file`]: a saved index;
//! - [`error`]: st5-core's error (device, read-back, buffer limit, weights, arguments), wrapping
//!   st5-format's.

pub mod batch;
pub mod calibration;
pub mod device;
pub mod embedder;
pub mod error;
pub mod int8;
pub mod kernels;
pub mod loader;
pub mod model;
pub mod models;
pub mod ops;
pub mod save;
pub mod search_index;
pub mod transfer;
pub mod weights;

// The model's files, parsed without burn in st5-format, under their old paths.
pub use st5_format::{
    atomic, batching, charsmap, checkpoint, compute, config, files, fingerprint, index_file,
    layout, names, npy, probe, prompt, quant, rng, search, tokenizer, vector_codes,
};

pub use batching::Batching;
pub use burn::tensor::Device;
pub use compute::Compute;
pub use config::{BertConfig, Family, ModelConfig, T5Config};
pub use device::{DeviceChoice, OpenDevice};
pub use embedder::{Embedder, Embeddings};
pub use error::{Error, Result};
pub use files::{Dir, FileBytes, MemoryFiles, ModelFiles};
pub use loader::{DEFAULT_BATCH_SIZE, LoadOptions};
pub use model::{HeadConfig, SentenceModel};
pub use quant::WeightDtype;
pub use search_index::{Hit, VectorIndex};
pub use st5_format::variant::Variant;
pub use vector_codes::Quantize;
