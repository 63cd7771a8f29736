//! Storage precision of saved weights, and int8 weights: symmetric, one scale per output row
//! ("channel"), for every Linear weight and the token embedding table. Norms and the position
//! bias stay in floating point.
//!
//! The layout follows compressed-tensors' `int-quantized` format
//! (<https://github.com/neuralmagic/compressed-tensors>): a quantized tensor `X.weight` is stored
//! as I8 `[rows, cols]` (PyTorch's `[out, in]` for a Linear) beside an F32 `X.weight_scale`
//! `[rows, 1]`, and `config.json` records the scheme under `quantization_config`. The value of
//! element `(r, c)` is `q[r, c] * scale[r]`, computed in f32: loaders dequantize once, at load,
//! and compute in f32 as for any other checkpoint.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::Error;

/// How `save` stores weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightDtype {
    /// Exact: what a run that must resume bit for bit keeps.
    #[default]
    F32,
    /// Half the size; every st5 loader and PyTorch read it.
    F16,
    /// About a quarter of f32: int8 Linear and embedding weights with per-row f32 scales, the
    /// rest in f16. st5 reads it; convert back to f16 for Python.
    Int8,
}

impl fmt::Display for WeightDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
            Self::Int8 => "int8",
        })
    }
}

impl FromStr for WeightDtype {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "f32" => Ok(Self::F32),
            "f16" => Ok(Self::F16),
            "int8" => Ok(Self::Int8),
            other => {
                Err(Error::Invalid(format!("unknown weight dtype `{other}` (f32, f16, int8)")))
            }
        }
    }
}

/// The name of the scale stored beside quantized tensor `name`.
pub fn scale_name(name: &str) -> String {
    format!("{name}_scale")
}

/// The name of the calibration statistic stored beside a quantized Linear weight `name`: F32
/// `[in]`, each input channel's largest magnitude over `st5 quantize`'s calibration sentences.
/// The CPU's int8 compute multiplies the few channels far above the others in f32 (st5-core's
/// `int8` module says why); every other loader ignores it.
pub fn input_absmax_name(name: &str) -> String {
    format!("{name}_input_absmax")
}

/// Whether [`WeightDtype::Int8`] stores checkpoint tensor `name` of rank `rank` as int8: Linear
/// weights and token tables, not 1-D tensors nor the small tables added to every token (the
/// relative-position bias; BERT's and MPNet's absolute position and token-type tables), which
/// int8 would round at every position for a few hundred kilobytes.
pub fn is_quantized(name: &str, rank: usize) -> bool {
    const KEPT: [&str; 3] = [
        "relative_attention_bias.weight",
        "position_embeddings.weight",
        "token_type_embeddings.weight",
    ];
    rank == 2 && name.ends_with(".weight") && !KEPT.iter().any(|k| name.ends_with(k))
}

/// The stored int8 weights: symmetric per-row int8 of row-major `[rows, cols]` values,
/// `scale = max|row| / 127` (1 for an all-zero row, so that every stored scale divides) and
/// `q = round(x / scale)` (halves away from zero), in `-127..=127`. Not st5-int8's
/// `quantize_rows`, which quantizes activations at run time to the kernels' 7 or 8 bits (ties to
/// even, which vectorises, and scale 0 for a zero row, whose outputs are then exactly 0): these
/// codes are written to files, and every int8 model st5 has written holds them, bit for bit.
pub fn quantize_weight_rows(values: &[f32], cols: usize) -> (Vec<i8>, Vec<f32>) {
    let mut q = Vec::with_capacity(values.len());
    let mut scales = Vec::with_capacity(values.len() / cols.max(1));
    for row in values.chunks(cols.max(1)) {
        let amax = row.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let scale = if amax > 0.0 { amax / 127.0 } else { 1.0 };
        scales.push(scale);
        q.extend(row.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8));
    }
    (q, scales)
}

/// `q[r, c] * scale[r]` for row-major `[scale.len(), cols]` int8 values.
pub fn dequantize_rows(q: &[i8], scales: &[f32], cols: usize) -> Vec<f32> {
    q.chunks(cols.max(1))
        .zip(scales)
        .flat_map(|(row, &s)| row.iter().map(move |&v| v as f32 * s))
        .collect()
}

/// `config.json`'s record of the scheme, as compressed-tensors writes it.
pub fn quantization_config() -> serde_json::Value {
    json!({
        "quant_method": "compressed-tensors",
        "format": "int-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear", "Embedding"],
                "weights": {
                    "num_bits": 8,
                    "type": "int",
                    "symmetric": true,
                    "strategy": "channel",
                    "dynamic": false
                },
                "input_activations": null,
                "output_activations": null
            }
        },
        "ignore": []
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_within_half_a_step() {
        let cols = 5;
        let values: Vec<f32> = vec![
            0.0, 0.0, 0.0, 0.0, 0.0, // all zero: scale 1, q 0
            1.0, -1.0, 0.5, -0.25, 0.125, // max 1
            -3.0, 2.9, 0.01, -0.01, 1.5, // max 3, negative extreme
            1e-8, -2e-8, 0.0, 3e-8, 5e-9, // tiny
        ];
        let (q, s) = quantize_weight_rows(&values, cols);
        assert_eq!(s.len(), 4);
        assert_eq!(s[0], 1.0);
        assert!(q.iter().all(|&v| v >= -127));
        let back = dequantize_rows(&q, &s, cols);
        for (i, (&x, &y)) in values.iter().zip(&back).enumerate() {
            let step = s[i / cols];
            assert!(
                (x - y).abs() <= step / 2.0 * (1.0 + 1e-6),
                "element {i}: {x} → {y}, step {step}"
            );
        }
        // Each row's extreme maps to ±127 exactly.
        assert_eq!((q[5], q[10]), (127, -127));
    }

    #[test]
    fn dtypes_parse_and_print() {
        for d in [WeightDtype::F32, WeightDtype::F16, WeightDtype::Int8] {
            assert_eq!(d.to_string().parse::<WeightDtype>().unwrap(), d);
        }
        assert!("bf16".parse::<WeightDtype>().is_err());
        let which = [
            ("encoder.block.0.layer.0.SelfAttention.q.weight", 2, true),
            ("shared.weight", 2, true),
            ("linear.weight", 2, true),
            ("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", 2, false),
            ("encoder.final_layer_norm.weight", 1, false),
            ("linear.bias", 1, false),
            ("embeddings.word_embeddings.weight", 2, true),
            ("encoder.layer.0.attention.self.query.weight", 2, true),
            ("embeddings.position_embeddings.weight", 2, false),
            ("embeddings.token_type_embeddings.weight", 2, false),
            ("encoder.relative_attention_bias.weight", 2, false),
        ];
        for (name, rank, want) in which {
            assert_eq!(is_quantized(name, rank), want, "{name}");
        }
    }
}
