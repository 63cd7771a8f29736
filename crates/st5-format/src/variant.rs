//! The Sentence-T5 pooling variants (Ni et al. 2021, §3.1, Fig. 2), parsed once at the edge
//! (CLI flags, trainer configs, the package's `variant` option, `1_Pooling/config.json`).

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
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::EncMean, Variant::EncFirst, Variant::EncDecFirst];

    pub fn name(self) -> &'static str {
        match self {
            Variant::EncMean => "enc-mean",
            Variant::EncFirst => "enc-first",
            Variant::EncDecFirst => "encdec-first",
        }
    }

    pub fn needs_decoder(self) -> bool {
        self == Variant::EncDecFirst
    }
}

by_name!(Variant, "variant", "enc-mean, enc-first or encdec-first", serde);
