//! The pooling variants, parsed once at the edge (CLI flags, trainer configs, the package's
//! `variant` option, `1_Pooling/config.json`): Sentence-T5's three (Ni et al. 2021, §3.1,
//! Fig. 2), of which `enc-mean` and `enc-first` are sentence-transformers' `mean` and `cls` for
//! every family, and sentence-transformers' `max` and `mean_sqrt_len_tokens`.

use crate::by_name::by_name;

/// The Sentence-T5 architectures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// ST5-Enc mean: mean of encoder outputs over non-padding tokens (`</s>` included).
    EncMean,
    /// ST5-Enc first: the first encoder output.
    EncFirst,
    /// ST5-EncDec first: the decoder's final-norm output at position 0, decoder input `[0]`.
    EncDecFirst,
    /// The element-wise maximum over non-padding tokens (sentence-transformers' `max`).
    Max,
    /// The sum over non-padding tokens divided by the square root of their count
    /// (sentence-transformers' `mean_sqrt_len_tokens`).
    MeanSqrtLen,
}

impl Variant {
    pub const ALL: [Variant; 5] = [
        Variant::EncMean,
        Variant::EncFirst,
        Variant::EncDecFirst,
        Variant::Max,
        Variant::MeanSqrtLen,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::EncMean => "enc-mean",
            Variant::EncFirst => "enc-first",
            Variant::EncDecFirst => "encdec-first",
            Variant::Max => "max",
            Variant::MeanSqrtLen => "mean-sqrt-len",
        }
    }

    pub fn needs_decoder(self) -> bool {
        self == Variant::EncDecFirst
    }
}

by_name!(Variant, "variant", "enc-mean, enc-first, encdec-first, max or mean-sqrt-len", serde);
