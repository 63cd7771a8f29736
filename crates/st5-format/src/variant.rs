//! The Sentence-T5 pooling variants (Ni et al. 2021, §3.1, Fig. 2), parsed once at the edge
//! (CLI flags, trainer configs, the package's `variant` option, `1_Pooling/config.json`).

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

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

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Variant::ALL.into_iter().find(|v| v.name() == s).ok_or_else(|| {
            Error::Invalid(format!(
                "unknown variant `{s}` (expected enc-mean, enc-first or encdec-first)"
            ))
        })
    }
}

/// As its name (`"enc-mean"`, ...), in files that record a variant (a prompt's metadata).
impl serde::Serialize for Variant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Variant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}
