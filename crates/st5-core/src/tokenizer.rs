//! The T5 tokenizer: Hugging Face `tokenizers` on `tokenizer.json`, with `</s>` appended by the
//! file's post-processor and truncation to `max_seq_length` (counting `</s>`), as
//! `T5TokenizerFast(..., truncation=True, max_length=N)` does. Padding is the batcher's job.

use std::path::{Path, PathBuf};

use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::error::{Error, Result};

/// Token id used for padding (`<pad>`), also T5's decoder start token.
pub const PAD_ID: u32 = 0;

pub struct T5Tokenizer {
    inner: Tokenizer,
    path: PathBuf,
    max_len: usize,
}

impl T5Tokenizer {
    /// Loads `tokenizer.json` with truncation at `max_len` tokens (`</s>` included).
    pub fn from_file(path: &Path, max_len: usize) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::from_bytes(&bytes, max_len, path.into())
    }

    /// Loads from the bytes of a `tokenizer.json` (in-memory files); `path` names it in errors.
    pub fn from_bytes(bytes: &[u8], max_len: usize, path: PathBuf) -> Result<Self> {
        let err = |source| Error::Tokenizer { path: path.clone(), source };
        // Checked first: the tokenizers crate panics on a damaged charsmap (charsmap.rs).
        crate::charsmap::check_normalizer(bytes).map_err(|m| err(m.into()))?;
        let mut inner = Tokenizer::from_bytes(bytes).map_err(err)?;
        Self::configure(&mut inner, max_len).map_err(err)?;
        Ok(Self { inner, path, max_len })
    }

    fn configure(inner: &mut Tokenizer, max_len: usize) -> tokenizers::Result<()> {
        if max_len == 0 {
            return Err("max_seq_length must be positive".into());
        }
        inner.with_padding(None);
        inner.with_truncation(Some(TruncationParams {
            max_length: max_len,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
            direction: TruncationDirection::Right,
        }))?;
        Ok(())
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Token ids of each text, `</s>` appended, truncated; never empty.
    pub fn encode_batch(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        let encodings = self
            .inner
            .encode_batch(texts.to_vec(), true)
            .map_err(|source| Error::Tokenizer { path: self.path.clone(), source })?;
        Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }
}
