//! `st5-format`: the files of a Sentence-T5 model, read without a tensor library, so that the
//! parsers that take outside bytes build fast and fuzz on their own (`fuzz/`). st5-core
//! re-exports every module here under the same name.
//!
//! - [`config`]: `config.json` validated, its family (T5, BERT, MPNet) chosen by `model_type`;
//! - [`device_choice`]: the devices a run can be asked for, by name (native and web);
//!   [`compute`]: int8 or f32 arithmetic for the matrix products, by name;
//! - [`files`]: model files from a directory (memory-mapped) or held in memory;
//! - [`layout`]: the sentence-transformers layout (`modules.json`, Pooling, Dense, Normalize) or
//!   a plain Hugging Face directory; [`variant`]: the pooling variants;
//! - [`checkpoint`]: safetensors checkpoints, sharded or not, f32/f16/bf16, and int8 ([`quant`]),
//!   dequantized or as stored;
//! - [`names`]: the one table between module paths and checkpoint tensor names;
//! - [`probe`]: which files a load reads, for loaders that fetch them one by one;
//! - [`source`]: a model as the user names it, a path or a hub id `org/name[@revision]`;
//! - [`tokenizer`]: `tokenizer.json`, with its charsmap checked first ([`charsmap`]);
//! - [`npy`]: `.npy` arrays (embeddings, teacher vectors); [`rng`]: the seeded generator that
//!   training, evaluation and tests share;
//! - [`vector_codes`]: an index's int8 and binary vector codes; [`index_file`]: a saved index
//!   (`st5 index build`), checked whole before use;
//! - [`search`]: documents under a schema, keyword ranking (BM25), filters, facets and fusion;
//! - [`atomic`]: every file written whole, through a temporary beside it and a rename;
//! - [`error`]: the one error type, naming the file, tensor or line.

pub mod atomic;
pub mod batching;
mod by_name;
pub mod charsmap;
pub mod checkpoint;
pub mod compute;
pub mod config;
pub mod device_choice;
pub mod error;
pub mod files;
pub mod fingerprint;
#[doc(hidden)]
pub mod fuzzing;
pub mod index_file;
pub mod layout;
pub mod names;
pub mod npy;
pub mod probe;
pub mod prompt;
pub mod quant;
pub mod rng;
pub mod search;
pub mod source;
pub mod tokenizer;
pub mod variant;
pub mod vector_codes;

pub use error::{Error, Result};
