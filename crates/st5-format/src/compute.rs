//! How a model computes its matrix products, by name: one closed set, parsed once at the edge
//! (`st5 --compute`, the browser package's `compute` option). Acting on it is st5-core's
//! (`LoadOptions::compute`): int8 weights kept int8 (st5-int8's kernels on the CPU, st5-core's
//! GPU kernels), or every weight in f32.

use crate::by_name::by_name;

/// The arithmetic of the Linear layers and the embedding lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compute {
    /// An int8 model (`st5 quantize --dtype int8`) keeps its weights int8: on the CPU it
    /// multiplies in int8 × int8 → i32, activations quantized per row; on a GPU its kernels
    /// dequantize the codes in registers and multiply in f32. f32 and f16 models compute in f32.
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

by_name!(Compute, "compute", "auto or f32", serde);

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
