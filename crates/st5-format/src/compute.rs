//! How a model computes its matrix products, by name: one closed set, parsed once at the edge
//! (`st5 --compute`, the browser package's `compute` option). Acting on it is st5-core's
//! (`LoadOptions::compute`): int8 weights kept int8 on the CPU (st5-int8's kernels), or every
//! weight in f32.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// The arithmetic of the Linear layers and the embedding lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compute {
    /// An int8 model (`st5 quantize --dtype int8`) keeps its weights int8 on the CPU and
    /// multiplies in int8 × int8 → i32, activations quantized per row; f32 and f16 models, and
    /// every model on a GPU, compute in f32.
    #[default]
    Auto,
    /// Every weight is widened to f32 at load (int8 dequantized) and every product is f32: the
    /// exact path, equal to the Python reference for f32 weights, and what training uses.
    F32,
}

impl Compute {
    pub const ALL: [Compute; 2] = [Compute::Auto, Compute::F32];

    pub fn name(self) -> &'static str {
        match self {
            Compute::Auto => "auto",
            Compute::F32 => "f32",
        }
    }
}

impl fmt::Display for Compute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compute {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Compute::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| Error::Invalid(format!("unknown compute `{s}` (expected auto or f32)")))
    }
}

impl serde::Serialize for Compute {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Compute {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for c in Compute::ALL {
            assert_eq!(c.to_string().parse::<Compute>().unwrap(), c);
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<Compute>(&json).unwrap(), c);
        }
        for bad in ["int8", "F32", "", "auto "] {
            let err = bad.parse::<Compute>().unwrap_err().to_string();
            assert!(err.contains("expected auto or f32"), "{bad:?}: {err}");
        }
    }
}
