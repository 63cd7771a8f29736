//! The encoder families, one file each (candle's `models/` and text-embeddings-inference's
//! backends), behind one [`Encoder`] chosen once from the config's family:
//! - [`t5`], T5 and mT5: the encoder (and the decoder, for ST5-EncDec);
//! - [`bert`], BERT;
//! - [`mpnet`], MPNet: BERT's embeddings and feed-forward with T5's bucketed bias;
//! - [`layers`], what they share: Linear, LayerNorm, the token-table lookup.
//!
//! Every family has the same contract: config → `new(vb, cfg)` (or random init) →
//! `forward(ids, mask)` → hidden states `[batch, seq, hidden]` over a padded batch, or
//! `forward_packed(packing, ids)` → `[1, total, hidden]` over a packed one (`batch::Packing`:
//! no padding, the CPU's layout). The sentence head (pooling, Dense, Normalize) is `model.rs`,
//! written once for all.

pub mod bert;
pub mod layers;
pub mod mpnet;
pub mod t5;

use burn::module::Module;
use burn::tensor::{Int, Tensor};

use crate::batch::Packing;
use crate::config::{Family, ModelConfig};
use crate::int8::Int8Matrix;
use crate::weights::VarBuilder;
use bert::BertModel;
use mpnet::MPNetModel;
use t5::T5Model;

/// The encoder of any family st5 runs.
#[derive(Module, Debug)]
pub enum Encoder {
    T5(T5Model),
    Bert(BertModel),
    Mpnet(MPNetModel),
}

impl Encoder {
    /// Builds the family `cfg` names from `vb` (the checkpoint root); `with_decoder`: T5's
    /// decoder too (ST5-EncDec), which only T5 has.
    pub fn new(vb: &VarBuilder, cfg: &ModelConfig, with_decoder: bool) -> Self {
        match cfg {
            ModelConfig::T5(cfg) => Encoder::T5(T5Model::new(vb, cfg, with_decoder)),
            ModelConfig::Bert(Family::Mpnet, cfg) => Encoder::Mpnet(MPNetModel::new(vb, cfg)),
            ModelConfig::Bert(_, cfg) => Encoder::Bert(BertModel::new(vb, cfg)),
        }
    }

    pub fn family(&self) -> Family {
        match self {
            Encoder::T5(_) => Family::T5,
            Encoder::Bert(_) => Family::Bert,
            Encoder::Mpnet(_) => Family::Mpnet,
        }
    }

    /// The T5 model, for what only T5 has (the decoder, soft prompts).
    pub fn t5(&self) -> Option<&T5Model> {
        match self {
            Encoder::T5(m) => Some(m),
            _ => None,
        }
    }

    /// `ids`, `mask`: `[batch, seq]` (mask 1 token, 0 padding) → `[batch, seq, hidden]`.
    pub fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2>) -> Tensor<3> {
        match self {
            Encoder::T5(m) => m.encode(ids, mask),
            Encoder::Bert(m) => m.forward(ids, mask),
            Encoder::Mpnet(m) => m.forward(ids, mask),
        }
    }

    /// Over a packed batch: each run's ids `[count, len]` ([`Packing`]), after the soft prompt
    /// `[p, d_model]` when given (T5 only) → `[1, total, hidden]` and the packing the output
    /// has (each sequence `p` rows longer).
    pub fn forward_packed(
        &self,
        packing: &Packing,
        ids: Vec<Tensor<2, Int>>,
        prompt: Option<Tensor<2>>,
    ) -> (Tensor<3>, Packing) {
        match self {
            Encoder::T5(m) => m.encode_packed(packing, ids, prompt),
            Encoder::Bert(m) => (m.forward_packed(packing, ids), packing.clone()),
            Encoder::Mpnet(m) => (m.forward_packed(packing, ids), packing.clone()),
        }
    }

    /// The hidden width.
    pub fn hidden(&self) -> usize {
        match self {
            Encoder::T5(m) => m.encoder.d_model(),
            Encoder::Bert(m) => m.embeddings.hidden(),
            Encoder::Mpnet(m) => m.embeddings.hidden(),
        }
    }

    /// Every matrix kept int8 ([`crate::Compute::Auto`] on the CPU). A T5 table tied between
    /// the stacks appears twice.
    pub fn int8_matrices(&self) -> Box<dyn Iterator<Item = &Int8Matrix> + '_> {
        match self {
            Encoder::T5(m) => Box::new(
                std::iter::once(&m.encoder)
                    .chain(m.decoder.as_ref())
                    .flat_map(|s| s.int8_matrices()),
            ),
            Encoder::Bert(m) => Box::new(m.int8_matrices()),
            Encoder::Mpnet(m) => Box::new(m.int8_matrices()),
        }
    }
}
