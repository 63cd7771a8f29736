//! `SentenceT5`: a T5 stack, one of the paper's three pooling variants (Ni et al. 2021, §3.1,
//! Fig. 2), the Dense projection and L2 normalisation, all on the device.

use burn::module::{Module, Param};
use burn::tensor::{Int, Tensor, TensorData};

use crate::config::T5Config;
use crate::ops::{l2_normalize, mean_pool};
use crate::t5::{Linear, T5Model};
use crate::weights::VarBuilder;
use st5_format::variant::Variant;

/// Head settings beyond the T5 config: the Dense projections (sentence-transformers `2_Dense`,
/// possibly several) and whether to L2-normalise.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadConfig {
    pub variant: Variant,
    /// `(in_features, out_features, bias)` for each Dense, in order.
    pub dense: Vec<(usize, usize, bool)>,
    pub normalize: bool,
}

/// Encoder (and decoder), pooling, Dense and L2 norm. `forward` maps token ids to sentence
/// embeddings entirely on the device.
#[derive(Module, Debug)]
pub struct SentenceT5 {
    pub t5: T5Model,
    /// `linear` of each Dense module.
    pub dense: Vec<Linear>,
    #[module(skip)]
    pub variant: Variant,
    pub normalize: bool,
    /// A soft prompt `[p, d_model]` (Lester et al. 2021) that [`forward`](Self::forward) puts
    /// before every text; `None` for a plain model. It is saved on its own (`st5_format::prompt`),
    /// never inside the model's checkpoint.
    pub prompt: Option<Param<Tensor<2>>>,
}

impl SentenceT5 {
    /// Builds the T5 part from `t5_vb` (checkpoint root) and each Dense from `dense_vbs[i]`
    /// (`linear.weight`, `linear.bias`).
    pub fn new(
        t5_vb: &VarBuilder,
        dense_vbs: &[VarBuilder],
        cfg: &T5Config,
        head: &HeadConfig,
    ) -> Self {
        Self {
            t5: T5Model::new(t5_vb, cfg, head.variant.needs_decoder()),
            dense: head
                .dense
                .iter()
                .zip(dense_vbs)
                .map(|(&(i, o, bias), vb)| Linear::new(&vb.pp("linear"), i, o, bias))
                .collect(),
            variant: head.variant,
            normalize: head.normalize,
            prompt: None,
        }
    }

    /// A randomly initialised model (for training from scratch and tests).
    pub fn init(cfg: &T5Config, head: &HeadConfig, device: &burn::tensor::Device) -> Self {
        let vb = VarBuilder::init(device);
        let dense: Vec<VarBuilder> =
            (0..head.dense.len()).map(|i| vb.pp(format!("dense{i}"))).collect();
        Self::new(&vb, &dense, cfg, head)
    }

    /// The output width: the last Dense's `out_features`, else `d_model`.
    pub fn dim(&self) -> usize {
        match self.dense.last() {
            Some(l) => l.out_features(),
            None => self.t5.encoder.d_model(),
        }
    }

    /// Every matrix kept int8 ([`crate::Compute::Auto`] on the CPU): both stacks' and the Dense
    /// layers'. A tied table shared by both stacks appears twice.
    pub fn int8_matrices(&self) -> impl Iterator<Item = &crate::int8::Int8Matrix> {
        let stacks = std::iter::once(&self.t5.encoder).chain(self.t5.decoder.as_ref());
        let dense = self.dense.iter().filter_map(|l| l.int8.as_ref());
        stacks.flat_map(|s| s.int8_matrices()).chain(dense)
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

    /// `ids`: `[batch, seq]`; `mask`: `[batch, seq]`, 1.0 for tokens and 0.0 for padding.
    /// Returns `[batch, dim]`. With [`prompt`](Self::prompt) set, as
    /// [`forward_with_prompt`](Self::forward_with_prompt) with it.
    pub fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2>) -> Tensor<2> {
        self.forward_with_prompt(ids, mask, self.prompt.as_ref().map(Param::val))
    }

    /// Soft-prompt vectors `forward` puts before each text: 0 without a prompt.
    pub fn prompt_length(&self) -> usize {
        self.prompt.as_ref().map_or(0, |p| p.dims()[0])
    }

    /// As [`forward`](Self::forward), with soft-prompt vectors `[p, d_model]` before each text
    /// (Lester et al. 2021). The prompt is attended to but is not pooled: mean pooling averages
    /// the text's tokens only, `enc-first` takes the text's first token (position `p`), and the
    /// EncDec decoder attends to prompt and text alike.
    pub fn forward_with_prompt(
        &self,
        ids: Tensor<2, Int>,
        mask: Tensor<2>,
        prompt: Option<Tensor<2>>,
    ) -> Tensor<2> {
        let b = ids.dims()[0];
        let (encoded, attended, p) = match prompt {
            None => (self.t5.encode(ids, mask.clone()), mask.clone(), 0),
            Some(prompt) => {
                let p = prompt.dims()[0];
                let (encoded, attended) = self.t5.encode_with_prompt(ids, mask.clone(), prompt);
                (encoded, attended, p)
            }
        };
        let [_, len, d] = encoded.dims();
        let pooled: Tensor<2> = match self.variant {
            Variant::EncMean => mean_pool(encoded.slice([0..b, p..len]), mask),
            Variant::EncFirst => encoded.slice([0..b, p..p + 1]).reshape([b, d]),
            Variant::EncDecFirst => {
                let device = encoded.device();
                let start =
                    Tensor::<2, Int>::from_data(TensorData::new(vec![0i32; b], [b, 1]), &device);
                let decoded = self
                    .t5
                    .decode(start, encoded, attended)
                    .expect("encdec-first models are built with a decoder");
                decoded.reshape([b, d])
            }
        };
        let projected = self.dense.iter().fold(pooled, |x, l| l.forward(x));
        if self.normalize { l2_normalize(projected) } else { projected }
    }
}

/// [`l2_normalize`] on the host, in place, for row-major `[n, dim]` values already read back
/// (a model without a Normalize module, searched by cosine).
pub fn l2_normalize_rows(data: &mut [f32], dim: usize) {
    for row in data.chunks_mut(dim.max(1)) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        row.iter_mut().for_each(|x| *x /= norm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random model on flex: unit-norm rows of the right width, and padding that changes
    /// nothing (the mask reaches attention and pooling) for every variant.
    #[test]
    fn padding_does_not_change_any_variant() {
        use burn::tensor::Device;
        let cfg: T5Config = serde_json::from_str(
            r#"{"vocab_size": 50, "d_model": 8, "d_kv": 3, "d_ff": 12, "num_layers": 2, "num_heads": 2,
                "relative_attention_num_buckets": 8, "relative_attention_max_distance": 16,
                "feed_forward_proj": "gated-gelu"}"#,
        )
        .unwrap();
        let device = Device::flex();
        for variant in Variant::ALL {
            let head = HeadConfig { variant, dense: vec![(8, 5, true)], normalize: true };
            let model = SentenceT5::init(&cfg, &head, &device);
            assert_eq!(model.dim(), 5);
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
            assert!(diff <= 1e-6, "{variant}: padded row differs by {diff}");
            for row in b.chunks(5) {
                let norm: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                assert!((norm - 1.0).abs() < 1e-5, "{variant}: norm {norm}");
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
