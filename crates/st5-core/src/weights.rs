//! Module building: [`VarBuilder`], the one construction path for every module. It either pulls
//! named tensors from a [`Checkpoint`] (checkpoint.rs reads them) or initialises them, and
//! records missing, mis-shaped and unused tensors by name ([`LoadReport`]).

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use burn::module::Param;
use burn::tensor::{Device, Distribution, Tensor, TensorData};

use crate::checkpoint::Checkpoint;
use crate::int8::Int8Matrix;
use crate::names::{PREFIXES, is_ignored, tied_spellings};

/// How a tensor is initialised when no checkpoint provides it.
#[derive(Debug, Clone, Copy)]
pub enum Init {
    Ones,
    Zeros,
    /// Normal with mean 0 and this standard deviation.
    Normal(f64),
}

/// What loading found wrong or left over, by tensor name.
#[derive(Debug, Default, Clone)]
pub struct LoadReport {
    /// Tensors the model needs that the checkpoint lacks.
    pub missing: Vec<String>,
    /// `(name, expected shape, stored shape)`.
    pub mis_shaped: Vec<(String, Vec<usize>, Vec<usize>)>,
    /// Checkpoint tensors the model did not use (for example an LM head, or the decoder of an
    /// `enc-*` variant).
    pub unused: Vec<String>,
    /// Other per-tensor errors (unsupported dtype).
    pub errors: Vec<String>,
}

impl LoadReport {
    /// True when nothing the model needs is missing or mis-shaped.
    pub fn is_ok(&self) -> bool {
        self.missing.is_empty() && self.mis_shaped.is_empty() && self.errors.is_empty()
    }

    /// A readable list of the problems (missing, mis-shaped, other errors).
    pub fn problems(&self) -> String {
        let mut out = String::new();
        for m in &self.missing {
            out += &format!("  missing tensor `{m}`\n");
        }
        for (n, want, got) in &self.mis_shaped {
            out += &format!("  tensor `{n}` has shape {got:?}, expected {want:?}\n");
        }
        for e in &self.errors {
            out += &format!("  {e}\n");
        }
        out
    }
}

struct Source {
    device: Device,
    checkpoint: Option<Rc<Checkpoint>>,
    used: RefCell<BTreeSet<String>>,
    /// Tensors already built, by stored name: tied copies share one device buffer.
    cache: RefCell<HashMap<String, Tensor<2>>>,
    /// Whether int8 matrices stay int8 ([`VarBuilder::int8`]), and those already built, by
    /// stored name: tied tables share one copy.
    int8: Option<RefCell<HashMap<String, Int8Matrix>>>,
    report: RefCell<LoadReport>,
}

/// Hands out named tensors under a dotted prefix, from a checkpoint or freshly initialised.
#[derive(Clone)]
pub struct VarBuilder {
    src: Rc<Source>,
    prefix: String,
}

impl VarBuilder {
    /// Builds from a checkpoint: every tensor must be present with the expected shape. With
    /// `keep_int8`, int8 matrices are handed out as stored ([`int8`](Self::int8)) instead of
    /// dequantized (the CPU's int8 compute).
    pub fn from_checkpoint(checkpoint: Rc<Checkpoint>, device: &Device, keep_int8: bool) -> Self {
        Self::new(Some(checkpoint), device, keep_int8)
    }

    /// Initialises every tensor (random normal, ones or zeros): for training from scratch and tests.
    pub fn init(device: &Device) -> Self {
        Self::new(None, device, false)
    }

    fn new(checkpoint: Option<Rc<Checkpoint>>, device: &Device, keep_int8: bool) -> Self {
        let src = Source {
            device: device.clone(),
            checkpoint,
            used: RefCell::default(),
            cache: RefCell::default(),
            int8: keep_int8.then(RefCell::default),
            report: RefCell::default(),
        };
        Self { src: Rc::new(src), prefix: String::new() }
    }

    pub fn device(&self) -> &Device {
        &self.src.device
    }

    /// A builder for the sub-module `name` (joined with a dot).
    pub fn pp(&self, name: impl std::fmt::Display) -> Self {
        let prefix = if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        };
        Self { src: self.src.clone(), prefix }
    }

    fn full(&self, name: &str) -> String {
        if self.prefix.is_empty() { name.to_string() } else { format!("{}.{name}", self.prefix) }
    }

    /// The tensor `name` with `shape` as host data. `transpose` flips a stored `[out, in]`
    /// matrix (PyTorch's `nn.Linear`) to the `[in, out]` layout used here.
    fn data(&self, name: &str, shape: &[usize], transpose: bool) -> Option<Vec<f32>> {
        let full = self.full(name);
        let Some(ckpt) = &self.src.checkpoint else { return None };
        let mut report = self.src.report.borrow_mut();
        let Some(key) = ckpt.resolve(&full) else {
            report.missing.push(full);
            return Some(vec![0.0; shape.iter().product()]);
        };
        self.src.used.borrow_mut().insert(key.clone());
        self.src.used.borrow_mut().extend(ckpt.companions_of(&key));
        let stored = ckpt.shape(&key).unwrap_or_default().to_vec();
        let want: Vec<usize> =
            if transpose { shape.iter().rev().copied().collect() } else { shape.to_vec() };
        if stored != want {
            report.mis_shaped.push((key, want, stored));
            return Some(vec![0.0; shape.iter().product()]);
        }
        match ckpt.to_f32(&key) {
            Ok(v) if transpose => Some(transpose2(&v, want[0], want[1])),
            Ok(v) => Some(v),
            Err(e) => {
                report.errors.push(e.to_string());
                Some(vec![0.0; shape.iter().product()])
            }
        }
    }

    /// The matrix `name` as stored int8 codes `[rows, cols]` with per-row scales, when this
    /// builder keeps int8 and the checkpoint stores `name` so, with that shape. `None` otherwise
    /// (also for a malformed one): the caller then asks for the f32 tensor, whose load records
    /// every problem by name.
    pub fn int8(&self, rows: usize, cols: usize, name: &str) -> Option<Int8Matrix> {
        let built = self.src.int8.as_ref()?;
        let ckpt = self.src.checkpoint.as_ref()?;
        let key = ckpt.resolve(&self.full(name))?;
        if let Some(m) = built.borrow().get(&key) {
            return (m.rows() == rows && m.cols() == cols).then(|| m.clone());
        }
        if ckpt.shape(&key)? != [rows, cols] {
            return None;
        }
        let stored = ckpt.int8_rows(&key).ok()??;
        let absmax = match ckpt.input_absmax(&key, cols) {
            Ok(absmax) => absmax,
            Err(e) => {
                self.src.report.borrow_mut().errors.push(e.to_string());
                None
            }
        };
        let m = Int8Matrix::new(stored.codes, &stored.scales, rows, cols, &self.src.device)?
            .with_input_absmax(absmax.as_deref());
        let mut used = self.src.used.borrow_mut();
        used.insert(key.clone());
        used.extend(ckpt.companions_of(&key));
        built.borrow_mut().insert(key, m.clone());
        Some(m)
    }

    /// A parameter of rank `D` named `name` under this prefix.
    pub fn get<const D: usize>(
        &self,
        shape: [usize; D],
        name: &str,
        init: Init,
    ) -> Param<Tensor<D>> {
        Param::from_tensor(self.tensor(shape, name, init, false))
    }

    /// An embedding table `[vocab, d_model]`. Tied tables (both stacks resolving to
    /// `shared.weight`) share one device tensor instead of being uploaded twice.
    pub fn get_embedding(
        &self,
        vocab: usize,
        d_model: usize,
        name: &str,
        init: Init,
    ) -> Param<Tensor<2>> {
        let key = self.src.checkpoint.as_ref().and_then(|c| c.resolve(&self.full(name)));
        if let Some(t) = key.as_ref().and_then(|k| self.src.cache.borrow().get(k).cloned())
            && t.dims() == [vocab, d_model]
        {
            return Param::from_tensor(t);
        }
        let t = self.tensor([vocab, d_model], name, init, false);
        if let Some(k) = key {
            self.src.cache.borrow_mut().insert(k, t.clone());
        }
        Param::from_tensor(t)
    }

    /// A `[in, out]` matrix stored as PyTorch's `[out, in]`.
    pub fn get_linear_weight(
        &self,
        d_in: usize,
        d_out: usize,
        name: &str,
        init: Init,
    ) -> Param<Tensor<2>> {
        Param::from_tensor(self.tensor([d_in, d_out], name, init, true))
    }

    fn tensor<const D: usize>(
        &self,
        shape: [usize; D],
        name: &str,
        init: Init,
        transpose: bool,
    ) -> Tensor<D> {
        let device = &self.src.device;
        match self.data(name, &shape, transpose) {
            Some(v) => Tensor::from_data(TensorData::new(v, shape), device),
            None => match init {
                Init::Ones => Tensor::ones(shape, device),
                Init::Zeros => Tensor::zeros(shape, device),
                Init::Normal(std) => Tensor::random(shape, Distribution::Normal(0.0, std), device),
            },
        }
    }

    /// Finishes loading: fills in the unused tensors and returns the report. Tensors stored under
    /// a spelling tied to a used one (names.rs) do not count as unused.
    pub fn report(&self) -> LoadReport {
        let mut report = self.src.report.borrow().clone();
        if let Some(ckpt) = &self.src.checkpoint {
            let used = self.src.used.borrow();
            let tied: BTreeSet<String> = used
                .iter()
                .flat_map(|u| PREFIXES.iter().filter_map(move |p| u.strip_prefix(p)))
                .flat_map(tied_spellings)
                .collect();
            report.unused = ckpt
                .names()
                .filter(|n| !used.contains(*n) && !tied.contains(*n) && !is_ignored(n))
                .map(String::from)
                .collect();
        }
        report
    }
}

/// `[rows, cols]` row-major → `[cols, rows]`.
pub(crate) fn transpose2(v: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = v[r * cols + c];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_is_exact() {
        let cases: [(usize, usize); 4] = [(1, 1), (1, 3), (3, 1), (2, 3)];
        for (r, c) in cases {
            let v: Vec<f32> = (0..r * c).map(|i| i as f32).collect();
            let t = transpose2(&v, r, c);
            for i in 0..r {
                for j in 0..c {
                    assert_eq!(t[j * r + i], v[i * c + j], "{r}x{c} at ({i},{j})");
                }
            }
            assert_eq!(transpose2(&t, c, r), v);
        }
    }
}
