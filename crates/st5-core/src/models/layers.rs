//! The layers every family shares: [`Linear`] (f32, or int8 kept as stored), [`LayerNorm`] with
//! a bias (BERT, MPNet), and the token-table lookup (f32 or int8 codes). Named like PyTorch's
//! modules, so that their fields are the checkpoint's (`weight`, `bias`).

use burn::module::{Module, Param};
use burn::tensor::{Int, Tensor};

use crate::calibration;
use crate::int8::{self, Int8Matrix};
use crate::ops;
use crate::weights::{Init, VarBuilder};

/// `y = x W + b` with `W` stored `[d_in, d_out]` (PyTorch's `[out, in]`, transposed at load), or
/// kept int8 as stored (`[d_out, d_in]` codes, one scale per row) for the CPU's int8 compute.
#[derive(Module, Debug)]
pub struct Linear {
    /// `[d_in, d_out]`; `None` when the weight is kept int8 ([`int8`](Self::int8)).
    pub weight: Option<Param<Tensor<2>>>,
    /// `[d_out]`
    pub bias: Option<Param<Tensor<1>>>,
    /// The weight as int8 codes `[d_out, d_in]` when the loader keeps int8 models int8
    /// ([`crate::Compute::Auto`] on the CPU). Not a parameter: nothing trains or saves it.
    #[module(skip)]
    pub int8: Option<Int8Matrix>,
}

impl Linear {
    /// Loads `{name}.weight` (and `{name}.bias` when `bias`), int8 as stored when `vb` keeps int8.
    pub fn new(vb: &VarBuilder, d_in: usize, d_out: usize, bias: bool) -> Self {
        let std = (d_in as f64).powf(-0.5);
        let int8 = vb.int8(d_out, d_in, "weight");
        Self {
            weight: int8
                .is_none()
                .then(|| vb.get_linear_weight(d_in, d_out, "weight", Init::Normal(std))),
            bias: bias.then(|| vb.get([d_out], "bias", Init::Zeros)),
            int8,
        }
    }

    /// `d_out`.
    pub fn out_features(&self) -> usize {
        match (&self.weight, &self.int8) {
            (Some(w), _) => w.dims()[1],
            (None, Some(q)) => q.rows(),
            (None, None) => unreachable!("Linear::new sets a weight or int8"),
        }
    }

    /// `[..., d_in]` → `[..., d_out]`. One fused kernel on the GPU without a bias
    /// ([`ops::linear`]); int8 × int8 on the CPU for an int8 weight ([`int8::linear`]). An f32
    /// layer's input is recorded while a [`calibration::record`] runs.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let bias = self.bias.as_ref().map(Param::val);
        match (&self.weight, &self.int8) {
            (Some(w), _) => {
                calibration::observe(w.id, &x);
                ops::linear(x, w.val(), bias)
            }
            (None, Some(q)) => int8::linear(x, q, bias),
            (None, None) => unreachable!("Linear::new sets a weight or int8"),
        }
    }

    /// One input through several layers: `[..., d_in]` → each layer's `[..., d_out]`. Where all
    /// of them are int8, [`int8::linears`] reads and quantizes the input once; otherwise each
    /// layer's [`forward`](Self::forward).
    pub fn forward_shared<const D: usize, const N: usize>(
        layers: [&Linear; N],
        x: Tensor<D>,
    ) -> [Tensor<D>; N] {
        match layers.iter().map(|l| l.int8.as_ref()).collect::<Option<Vec<_>>>() {
            Some(ws) => int8::linears(
                x,
                ws.try_into().expect("one matrix per layer"),
                layers.map(|l| l.bias.as_ref().map(Param::val)),
            ),
            None => layers.map(|l| l.forward(x.clone())),
        }
    }
}

/// `torch.nn.LayerNorm`: `(x - mean) / sqrt(var + eps) * weight + bias` over the last axis.
#[derive(Module, Debug)]
pub struct LayerNorm {
    /// `[d]`
    pub weight: Param<Tensor<1>>,
    /// `[d]`
    pub bias: Param<Tensor<1>>,
    pub eps: f64,
}

impl LayerNorm {
    /// Loads `{name}.weight` and `{name}.bias`.
    pub fn new(vb: &VarBuilder, d: usize, eps: f64) -> Self {
        Self {
            weight: vb.get([d], "weight", Init::Ones),
            bias: vb.get([d], "bias", Init::Zeros),
            eps,
        }
    }

    /// `[batch, seq, d]` → same ([`ops::layer_norm`]).
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        ops::layer_norm(x, self.weight.val(), self.bias.val(), self.eps)
    }
}

/// A token table `name` `[vocab, d]` under `vb`: int8 codes as stored when `vb` keeps int8 (the
/// CPU's int8 compute), else the f32 table. Exactly one of the two is `Some`.
pub fn table(
    vb: &VarBuilder,
    vocab: usize,
    d: usize,
    name: &str,
    init: Init,
) -> (Option<Param<Tensor<2>>>, Option<Int8Matrix>) {
    let int8 = vb.int8(vocab, d, name);
    let f32 = int8.is_none().then(|| vb.get_embedding(vocab, d, name, init));
    (f32, int8)
}

/// Rows `ids` `[batch, seq]` of a table from [`table`] → `[batch, seq, d]`.
pub fn lookup(
    f32: &Option<Param<Tensor<2>>>,
    int8: &Option<Int8Matrix>,
    ids: Tensor<2, Int>,
) -> Tensor<3> {
    match (f32, int8) {
        (Some(table), _) => {
            let [b, s] = ids.dims();
            let d = table.dims()[1];
            table.val().select(0, ids.reshape([b * s])).reshape([b, s, d])
        }
        (None, Some(q)) => int8::embedding(ids, q),
        (None, None) => unreachable!("layers::table sets a table or its int8 codes"),
    }
}

/// The width `d` of a table from [`table`].
pub fn table_width(f32: &Option<Param<Tensor<2>>>, int8: &Option<Int8Matrix>) -> usize {
    match (f32, int8) {
        (Some(table), _) => table.dims()[1],
        (None, Some(q)) => q.cols(),
        (None, None) => unreachable!("layers::table sets a table or its int8 codes"),
    }
}
