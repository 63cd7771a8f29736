//! [`Embedder`]: loads a model directory and embeds lists of texts in length-bucketed batches,
//! returning `[n, dim]` in input order. Only `[batch, dim]` per batch leaves the device.

use std::path::Path;

use burn::module::Param;
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::batch::plan_batches;
use crate::batching::Batching;
use crate::error::{Error, Result};
use crate::files::ModelFiles;
use crate::layout::ModelLayout;
use crate::loader::LoadOptions;
use crate::loader::{Loaded, load, load_dir};
use crate::model::SentenceModel;
use crate::prompt::Prompt;
use crate::tokenizer::T5Tokenizer;
use crate::transfer::{to_host, upload_ids};
use crate::weights::LoadReport;
use st5_format::Error as FormatError;
use st5_format::variant::Variant;

/// Row-major `[n, dim]` sentence embeddings.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    pub data: Vec<f32>,
    pub dim: usize,
}

impl Embeddings {
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
    pub fn rows(&self) -> impl Iterator<Item = &[f32]> {
        self.data.chunks_exact(self.dim.max(1))
    }

    /// Writes `rows` (`[indices.len(), dim]`) to the rows `indices`.
    fn place(&mut self, indices: &[usize], rows: &[f32]) {
        let dim = self.dim;
        for (k, &i) in indices.iter().enumerate() {
            self.data[i * dim..(i + 1) * dim].copy_from_slice(&rows[k * dim..(k + 1) * dim]);
        }
    }
}

/// A loaded Sentence-T5 model with its tokenizer, on one device.
pub struct Embedder {
    model: SentenceModel,
    tokenizer: T5Tokenizer,
    device: Device,
    batch_size: usize,
    batching: Batching,
    max_buffer_bytes: Option<u64>,
    report: LoadReport,
    layout: ModelLayout,
}

impl Embedder {
    /// Loads a sentence-transformers or Hugging Face directory (T5, BERT or MPNet) onto `device`.
    pub fn load(dir: &Path, options: &LoadOptions, device: &Device) -> Result<Self> {
        Self::from_loaded(load_dir(dir, options, device)?, options, device)
    }

    /// Loads a model from any [`ModelFiles`] (a directory, or files held in memory).
    pub fn load_from(
        files: &impl ModelFiles,
        options: &LoadOptions,
        device: &Device,
    ) -> Result<Self> {
        Self::from_loaded(load(files, options, device)?, options, device)
    }

    fn from_loaded(loaded: Loaded, options: &LoadOptions, device: &Device) -> Result<Self> {
        let Loaded { model, tokenizer, report, layout, .. } = loaded;
        Ok(Self {
            model,
            tokenizer,
            device: device.clone(),
            batch_size: options.batch_size,
            batching: Batching::Auto,
            max_buffer_bytes: options.max_buffer_bytes,
            report,
            layout,
        })
    }

    pub fn dim(&self) -> usize {
        self.model.dim()
    }
    pub fn variant(&self) -> Variant {
        self.model.variant
    }
    pub fn model(&self) -> &SentenceModel {
        &self.model
    }
    pub fn tokenizer(&self) -> &T5Tokenizer {
        &self.tokenizer
    }
    pub fn layout(&self) -> &ModelLayout {
        &self.layout
    }
    pub fn device(&self) -> &Device {
        &self.device
    }
    /// Tensors the checkpoint holds that this variant did not use.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }
    /// The model, its tokenizer and layout, for callers that go on to train or save the model.
    pub fn into_parts(self) -> (SentenceModel, T5Tokenizer, ModelLayout) {
        (self.model, self.tokenizer, self.layout)
    }
    pub fn set_batch_size(&mut self, batch_size: usize) {
        self.batch_size = batch_size.max(1);
    }
    /// The batches' layout ([`Batching::Auto`] unless set: packed on the CPU, padded on a GPU).
    pub fn set_batching(&mut self, batching: Batching) {
        self.batching = batching;
    }

    /// Puts the soft prompt `prompt` (read from `path`) before every text from now on, after
    /// checking that it was made for this model: `fingerprint` is this model's weights
    /// fingerprint (`st5_format::fingerprint`), and width and pooling must match. `None` removes
    /// the prompt.
    pub fn set_prompt(
        &mut self,
        prompt: Option<(&Prompt, &Path)>,
        fingerprint: &str,
    ) -> Result<()> {
        let Some((prompt, path)) = prompt else {
            self.model.prompt = None;
            return Ok(());
        };
        let family = self.layout.config.family();
        if family != crate::config::Family::T5 {
            return Err(FormatError::Prompt {
                path: path.into(),
                message: format!(
                    "soft prompts run on T5 models only, and this is a {family} model"
                ),
            }
            .into());
        }
        prompt.check_base(fingerprint, self.layout.config.d_model(), path)?;
        if prompt.meta.variant != self.model.variant {
            return Err(FormatError::Prompt {
                path: path.into(),
                message: format!(
                    "trained with {} pooling, but this model pools {}",
                    prompt.meta.variant, self.model.variant
                ),
            }
            .into());
        }
        let shape = [prompt.meta.length, prompt.meta.d_model];
        let values = TensorData::new(prompt.values.clone(), shape);
        self.model.prompt = Some(Param::from_tensor(Tensor::from_data(values, &self.device)));
        Ok(())
    }

    /// Embeds `texts`, returning `[texts.len(), dim]` in input order.
    pub fn embed<S: AsRef<str>>(&self, texts: &[S]) -> Result<Embeddings> {
        self.embed_with_progress(texts, |_, _| {})
    }

    /// As [`embed`](Self::embed), calling `progress(done, total)` after each batch.
    pub fn embed_with_progress<S: AsRef<str>>(
        &self,
        texts: &[S],
        progress: impl FnMut(usize, usize),
    ) -> Result<Embeddings> {
        self.run_tokens(&self.tokenize(texts)?, progress)
    }

    /// Embeds texts already tokenized (each sequence as the model reads it: special tokens
    /// included, at most `max_seq_length` long, ids inside the vocabulary), returning
    /// `[ids.len(), dim]` in input order: the path of a server that tokenizes before it batches.
    pub fn embed_tokens(&self, ids: &[Vec<u32>]) -> Result<Embeddings> {
        self.check_vocab(ids)?;
        self.run_tokens(ids, |_, _| {})
    }

    /// Runs the model over `ids` (checked against the vocabulary) in planned batches.
    fn run_tokens(
        &self,
        ids: &[Vec<u32>],
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Embeddings> {
        let (plan, mut out) = self.prepare(ids)?;
        let mut done = 0;
        for batch in plan {
            out.place(&batch, &to_host(self.run(ids, &batch).try_into_data())?);
            done += batch.len();
            progress(done, ids.len());
        }
        Ok(out)
    }

    /// As [`embed`](Self::embed), reading each batch back asynchronously: the form a browser
    /// needs, where WebGPU results cannot be awaited synchronously.
    pub async fn embed_async<S: AsRef<str>>(&self, texts: &[S]) -> Result<Embeddings> {
        let ids = self.tokenize(texts)?;
        let (plan, mut out) = self.prepare(&ids)?;
        for batch in plan {
            out.place(&batch, &to_host(self.run(&ids, &batch).into_data_async().await)?);
        }
        Ok(out)
    }

    /// Plans length-bucketed batches of `ids` within the device's buffer limit and allocates
    /// the `[n, dim]` output.
    fn prepare(&self, ids: &[Vec<u32>]) -> Result<(Vec<Vec<usize>>, Embeddings)> {
        let cfg = &self.layout.config;
        // Every tokenized text holds at least its end token; ids a caller sent may not.
        if let Some(i) = ids.iter().position(Vec::is_empty) {
            return Err(Error::Invalid(format!(
                "text {i} has no tokens; a tokenized text holds at least the model's end or separator token"
            )));
        }
        // A soft prompt lengthens every sequence the encoder sees.
        let p = self.model.prompt_length();
        let limit = self.max_buffer_bytes.unwrap_or(u64::MAX);
        if let Some((i, t)) = ids.iter().enumerate().max_by_key(|(_, t)| t.len())
            && cfg.activation_bytes_per_text(t.len() + p) > limit
        {
            let (what, bytes) = (
                format!("text {i} ({} tokens)", t.len()),
                cfg.activation_bytes_per_text(t.len() + p),
            );
            return Err(Error::Limit {
                what,
                bytes,
                limit,
                hint: "; lower the maximum sequence length",
            });
        }
        let max_rows = |seq: usize| {
            usize::try_from(limit / cfg.activation_bytes_per_text(seq + p).max(1))
                .unwrap_or(usize::MAX)
        };
        // On the CPU a batch is packed, not padded (`SentenceModel::embed_ids`): a text's
        // vector is a function of the text alone, the same bits whatever it is batched with
        // (an index's vectors equal a query's); sorting by length keeps a GPU's padding small.
        let lengths: Vec<usize> = ids.iter().map(Vec::len).collect();
        let plan = plan_batches(&lengths, self.batch_size, max_rows);
        let out = Embeddings { data: vec![0.0; ids.len() * self.dim()], dim: self.dim() };
        Ok((plan, out))
    }

    /// The batches [`embed`](Self::embed) would run for `texts`, as indices (for tests and tuning).
    pub fn plan<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<usize>>> {
        self.prepare(&self.tokenize(texts)?).map(|(plan, _)| plan)
    }

    /// Forward pass over the texts `batch` (indices into `ids`): `[batch.len(), dim]` on the device.
    fn run(&self, ids: &[Vec<u32>], batch: &[usize]) -> Tensor<2> {
        let seqs: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
        self.model.embed_ids_as(&seqs, &self.device, self.batching)
    }

    /// Token ids of each text, checked against the model's vocabulary.
    fn tokenize<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<u32>>> {
        let refs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        let ids = self.tokenizer.encode_batch(&refs)?;
        self.check_vocab(&ids)?;
        Ok(ids)
    }

    /// Refuses an id past the embedding table, rather than gather out of bounds on the device: a
    /// tokenizer from another model, or ids a client sent, can hold one.
    pub fn check_vocab(&self, ids: &[Vec<u32>]) -> Result<()> {
        let vocab = self.layout.config.vocab_size();
        if let Some((i, id)) = crate::tokenizer::out_of_vocab(ids, vocab) {
            return Err(Error::Invalid(format!(
                "text {i}: token id {id} is outside the model's vocabulary ({vocab}); is the tokenizer the model's own?"
            )));
        }
        Ok(())
    }

    /// Pads `seqs` and uploads ids `[batch, seq]` and mask `[batch, seq]` to this model's device.
    pub fn batch_tensors(&self, seqs: &[&[u32]]) -> (Tensor<2, Int>, Tensor<2>) {
        upload_ids(seqs, &self.device)
    }
}
