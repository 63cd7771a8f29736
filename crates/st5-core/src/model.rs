//! `SentenceModel`: the sentence-transformers head written once for every family: an encoder
//! (`models/`), a pooling (Sentence-T5's three variants, Ni et al. 2021, §3.1, Fig. 2, of which
//! mean and first are sentence-transformers' mean and CLS; and max, mean-sqrt-len), the Dense
//! projections and L2 normalisation, all on the device.

use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::batch::Packing;
use crate::batching::Batching;
use crate::config::ModelConfig;
use crate::layout::{DenseActivation, DenseSpec};
use crate::models::Encoder;
use crate::models::layers::Linear;
use crate::ops::{l2_normalize, max_pool, mean_pool, mean_sqrt_len_pool, unpack};
use crate::weights::VarBuilder;
use st5_format::variant::Variant;

/// Head settings beyond the encoder's config: the pooling, the Dense projections
/// (sentence-transformers `2_Dense`, possibly several) and whether to L2-normalise.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadConfig {
    pub variant: Variant,
    /// `(in_features, out_features, bias, activation)` for each Dense, in order.
    pub dense: Vec<DenseSpec>,
    pub normalize: bool,
}

/// Encoder (and for T5 the decoder), pooling, Dense and L2 norm. `forward` maps token ids to
/// sentence embeddings entirely on the device.
#[derive(Module, Debug)]
pub struct SentenceModel {
    pub encoder: Encoder,
    /// `linear` of each Dense module.
    pub dense: Vec<Linear>,
    /// Each Dense's activation (Identity where absent: a Dense the trainer appends).
    #[module(skip)]
    pub dense_activation: Vec<DenseActivation>,
    #[module(skip)]
    pub variant: Variant,
    pub normalize: bool,
    /// A soft prompt `[p, d_model]` (Lester et al. 2021) that [`forward`](Self::forward) puts
    /// before every text; `None` for a plain model. It is saved on its own (`st5_format::prompt`),
    /// never inside the model's checkpoint.
    pub prompt: Option<Param<Tensor<2>>>,
}

impl SentenceModel {
    /// Builds the encoder from `encoder_vb` (checkpoint root) and each Dense from `dense_vbs[i]`
    /// (`linear.weight`, `linear.bias`).
    pub fn new(
        encoder_vb: &VarBuilder,
        dense_vbs: &[VarBuilder],
        cfg: &ModelConfig,
        head: &HeadConfig,
    ) -> Self {
        Self {
            encoder: Encoder::new(encoder_vb, cfg, head.variant.needs_decoder()),
            dense: head
                .dense
                .iter()
                .zip(dense_vbs)
                .map(|(&(i, o, bias, _), vb)| Linear::new(&vb.pp("linear"), i, o, bias))
                .collect(),
            dense_activation: head.dense.iter().map(|d| d.3).collect(),
            variant: head.variant,
            normalize: head.normalize,
            prompt: None,
        }
    }

    /// A randomly initialised model (for training from scratch and tests).
    pub fn init(cfg: &ModelConfig, head: &HeadConfig, device: &burn::tensor::Device) -> Self {
        let vb = VarBuilder::init(device);
        let dense: Vec<VarBuilder> =
            (0..head.dense.len()).map(|i| vb.pp(format!("dense{i}"))).collect();
        Self::new(&vb, &dense, cfg, head)
    }

    /// The output width: the last Dense's `out_features`, else `d_model`.
    pub fn dim(&self) -> usize {
        match self.dense.last() {
            Some(l) => l.out_features(),
            None => self.encoder.hidden(),
        }
    }

    /// Every matrix kept int8 ([`crate::Compute::Auto`] on the CPU): the encoder's (both T5
    /// stacks') and the Dense layers'. A tied table shared by both stacks appears twice.
    pub fn int8_matrices(&self) -> impl Iterator<Item = &crate::int8::Int8Matrix> {
        let dense = self.dense.iter().filter_map(|l| l.int8.as_ref());
        self.encoder.int8_matrices().chain(dense)
    }

    /// Whether this model multiplies in int8 (an int8 model on the CPU keeps its weights as codes,
    /// `Compute::Auto`): st5-int8's [`kernel`](crate::int8::kernel) runs its Linear layers.
    pub fn computes_in_int8(&self) -> bool {
        self.int8_matrices().any(|m| m.is_host())
    }

    /// The bytes the weights hold: 4 per f32 parameter, and the int8 matrices' codes, scales and
    /// row sums. What a worker holding this model costs beyond its activations (the browser
    /// package's pool sizes itself by it). A table tied between the stacks counts once when it is
    /// int8, twice when f32 (both stacks name it as a parameter).
    pub fn weight_bytes(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        let int8: usize =
            self.int8_matrices().filter(|m| seen.insert(m.id())).map(|m| m.bytes()).sum();
        4 * self.num_params() + int8
    }

    /// The input statistic of every f32 Linear layer over `texts`, tokenized by `tokenizer` and
    /// run on `device` in batches of 32 (`calibration::record`): what `st5 quantize` and the
    /// trainer's int8 save store beside each int8 weight.
    pub fn calibrate(
        &self,
        tokenizer: &crate::tokenizer::T5Tokenizer,
        texts: &[&str],
        device: &Device,
    ) -> crate::error::Result<crate::calibration::InputAbsmax> {
        let ids = tokenizer.encode_batch(texts)?;
        let (_, stats) = crate::calibration::record(|| {
            for batch in ids.chunks(32) {
                let seqs: Vec<&[u32]> = batch.iter().map(Vec::as_slice).collect();
                self.embed_ids(&seqs, device);
            }
        });
        Ok(stats)
    }

    /// Sentence embeddings `[seqs.len(), dim]` of token-id sequences, uploaded to `device` and
    /// left there (recording a graph when `device` is an autodiff device): the one path from
    /// token ids to embeddings. On a GPU the batch is padded to its longest sequence
    /// (`transfer::upload_ids`, [`forward`](Self::forward)); on the CPU it is packed without
    /// padding (`transfer::upload_packed`, [`forward_packed`](Self::forward_packed)), so that
    /// a sequence's vector is the same bits whatever it is batched with.
    pub fn embed_ids(&self, seqs: &[&[u32]], device: &Device) -> Tensor<2> {
        self.embed_ids_as(seqs, device, Batching::Auto)
    }

    /// As [`embed_ids`](Self::embed_ids) in the layout `batching` asks for.
    pub fn embed_ids_as(&self, seqs: &[&[u32]], device: &Device, batching: Batching) -> Tensor<2> {
        if batching == Batching::Padded || crate::device::is_gpu(device) {
            let (ids, mask) = crate::transfer::upload_ids(seqs, device);
            self.forward(ids, mask)
        } else {
            let (packing, ids) = crate::transfer::upload_packed(seqs, device);
            self.forward_packed(&packing, ids)
        }
    }

    /// `ids`: `[batch, seq]`; `mask`: `[batch, seq]`, 1.0 for tokens and 0.0 for padding.
    /// Returns `[batch, dim]`. With [`prompt`](Self::prompt) set, as
    /// [`forward_with_prompt`](Self::forward_with_prompt) with it.
    pub fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2>) -> Tensor<2> {
        self.forward_with_prompt(ids, mask, self.prompt.as_ref().map(Param::val))
    }

    /// Over a packed batch (`batch::Packing`): each run's ids `[count, len]` → `[batch, dim]`
    /// in the input order of `packing`, after [`prompt`](Self::prompt) when set. The encoder runs
    /// once over all tokens; pooling runs per run of equal lengths.
    pub fn forward_packed(&self, packing: &Packing, ids: Vec<Tensor<2, Int>>) -> Tensor<2> {
        let prompt = self.prompt.as_ref().map(Param::val);
        let p = self.prompt_length();
        let (encoded, packed) = self.encoder.forward_packed(packing, ids, prompt);
        let device = encoded.device();
        let pooled = packed
            .runs
            .iter()
            .map(|run| {
                let attended = Tensor::<2>::ones([run.count, run.len], &device);
                let mask = Tensor::<2>::ones([run.count, run.len - p], &device);
                self.pool(unpack(&encoded, run), mask, attended, p)
            })
            .collect();
        let pooled = Tensor::cat(pooled, 0);
        let pooled = match packing.inverse() {
            Some(inverse) => {
                let n = inverse.len();
                let inverse: Vec<i32> = inverse.into_iter().map(|i| i as i32).collect();
                pooled
                    .select(0, Tensor::<1, Int>::from_data(TensorData::new(inverse, [n]), &device))
            }
            None => pooled,
        };
        self.head(pooled)
    }

    /// Soft-prompt vectors `forward` puts before each text: 0 without a prompt.
    pub fn prompt_length(&self) -> usize {
        self.prompt.as_ref().map_or(0, |p| p.dims()[0])
    }

    /// As [`forward`](Self::forward), with soft-prompt vectors `[p, d_model]` before each text
    /// (Lester et al. 2021), T5 only (the embedder refuses a prompt for other families). The
    /// prompt is attended to but is not pooled: mean pooling averages the text's tokens only,
    /// `enc-first` takes the text's first token (position `p`), and the EncDec decoder attends to
    /// prompt and text alike.
    pub fn forward_with_prompt(
        &self,
        ids: Tensor<2, Int>,
        mask: Tensor<2>,
        prompt: Option<Tensor<2>>,
    ) -> Tensor<2> {
        let (encoded, attended, p) = match (prompt, self.encoder.t5()) {
            (Some(prompt), Some(t5)) => {
                let p = prompt.dims()[0];
                let (encoded, attended) = t5.encode_with_prompt(ids, mask.clone(), prompt);
                (encoded, attended, p)
            }
            _ => (self.encoder.forward(ids, mask.clone()), mask.clone(), 0),
        };
        self.head(self.pool(encoded, mask, attended, p))
    }

    /// The pooling: `encoded` `[b, p + seq, d]` (`p` soft-prompt rows first), `mask` `[b, seq]`
    /// over the text's tokens, `attended` `[b, p + seq]` over all rows (the EncDec decoder's
    /// source) → `[b, d]`.
    fn pool(
        &self,
        encoded: Tensor<3>,
        mask: Tensor<2>,
        attended: Tensor<2>,
        p: usize,
    ) -> Tensor<2> {
        let [b, len, d] = encoded.dims();
        match self.variant {
            Variant::EncMean => mean_pool(encoded.slice([0..b, p..len]), mask),
            Variant::EncFirst => encoded.slice([0..b, p..p + 1]).reshape([b, d]),
            Variant::Max => max_pool(encoded.slice([0..b, p..len]), mask),
            Variant::MeanSqrtLen => mean_sqrt_len_pool(encoded.slice([0..b, p..len]), mask),
            Variant::EncDecFirst => {
                let device = encoded.device();
                let start =
                    Tensor::<2, Int>::from_data(TensorData::new(vec![0i32; b], [b, 1]), &device);
                let decoded = self
                    .encoder
                    .t5()
                    .and_then(|t5| t5.decode(start, encoded, attended))
                    .expect("encdec-first models are built with a T5 decoder");
                decoded.reshape([b, d])
            }
        }
    }

    /// The Dense projections and the L2 norm: `[b, d]` → `[b, dim]`.
    fn head(&self, pooled: Tensor<2>) -> Tensor<2> {
        let projected = self.dense.iter().enumerate().fold(pooled, |x, (i, l)| {
            let y = l.forward(x);
            match self.dense_activation.get(i) {
                Some(DenseActivation::Tanh) => y.tanh(),
                Some(DenseActivation::Identity) | None => y,
            }
        });
        if self.normalize { l2_normalize(projected) } else { projected }
    }
}

/// [`l2_normalize`] on the host, for values already read back (st5-format's, which the search
/// library's document index uses too).
pub use crate::vector_codes::l2_normalize_rows;

#[cfg(test)]
mod tests {
    use super::*;

    /// A random model of each family on flex: unit-norm rows of the right width, and padding
    /// that changes nothing (the mask reaches attention and pooling) for every pooling it runs.
    #[test]
    fn padding_does_not_change_any_family_or_variant() {
        use burn::tensor::Device;
        let configs = [
            r#"{"vocab_size": 50, "d_model": 8, "d_kv": 3, "d_ff": 12, "num_layers": 2, "num_heads": 2,
                "relative_attention_num_buckets": 8, "relative_attention_max_distance": 16,
                "feed_forward_proj": "gated-gelu"}"#,
            r#"{"model_type": "bert", "vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 2,
                "num_attention_heads": 2, "intermediate_size": 12, "max_position_embeddings": 16}"#,
            r#"{"model_type": "mpnet", "vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 2,
                "num_attention_heads": 2, "intermediate_size": 12, "max_position_embeddings": 16}"#,
        ];
        let device = Device::flex();
        for json in configs {
            let cfg =
                ModelConfig::from_slice(json.as_bytes(), std::path::Path::new("cfg")).unwrap();
            let family = cfg.family();
            for variant in Variant::ALL {
                if variant.needs_decoder() && cfg.t5().is_none() {
                    continue;
                }
                let head = HeadConfig {
                    variant,
                    dense: vec![(8, 5, true, DenseActivation::Tanh)],
                    normalize: true,
                };
                let model = SentenceModel::init(&cfg, &head, &device);
                assert_eq!((model.dim(), model.encoder.family()), (5, family));
                let alone_ids =
                    Tensor::<2, Int>::from_data(TensorData::new(vec![7, 3, 1], [1, 3]), &device);
                let alone = model.forward(alone_ids, Tensor::ones([1, 3], &device));
                let padded_ids = Tensor::<2, Int>::from_data(
                    TensorData::new(vec![7, 3, 1, 0, 0, 9, 4, 8, 2, 1], [2, 5]),
                    &device,
                );
                let mask = Tensor::<2>::from_data(
                    TensorData::new(vec![1.0f32, 1., 1., 0., 0., 1., 1., 1., 1., 1.], [2, 5]),
                    &device,
                );
                let batched = model.forward(padded_ids, mask);
                let a: Vec<f32> = alone.into_data().try_to_vec().unwrap();
                let b: Vec<f32> = batched.into_data().try_to_vec().unwrap();
                let diff = a.iter().zip(&b[..5]).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
                assert!(diff <= 1e-6, "{family} {variant}: padded row differs by {diff}");
                for row in b.chunks(5) {
                    let norm: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                    assert!((norm - 1.0).abs() < 1e-5, "{family} {variant}: norm {norm}");
                }
            }
        }
    }

    #[test]
    fn variant_names_round_trip() {
        for v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>().unwrap(), v);
        }
        for bad in ["", "mean", "enc_mean", "ENC-MEAN"] {
            assert!(bad.parse::<Variant>().is_err(), "{bad:?} should be rejected");
        }
    }
}
