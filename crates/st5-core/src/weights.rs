//! Checkpoint reading (safetensors: single, sharded, f32/f16/bf16) and [`VarBuilder`], the one
//! construction path for every module: it either pulls named tensors from a checkpoint or
//! initialises them, and records missing, mis-shaped and unused tensors by name.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::rc::Rc;

use burn::module::Param;
use burn::tensor::{Device, Distribution, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::files::{ModelFiles, join};
use crate::names::{PREFIXES, stored_names, tied_spellings};
use crate::quant::{dequantize_rows, scale_name};

struct Entry {
    file: usize,
    dtype: Dtype,
    shape: Vec<usize>,
    range: std::ops::Range<usize>,
}

/// The tensors of one or more safetensors files, kept as raw bytes until asked for.
pub struct Checkpoint {
    files: Vec<(PathBuf, Vec<u8>)>,
    entries: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct ShardIndex {
    weight_map: HashMap<String, String>,
}

impl Checkpoint {
    /// The weight files of folder `dir` (relative paths): the shards listed by
    /// `model.safetensors.index.json`, else `model.safetensors`. A `pytorch_model.bin` alone is
    /// refused by name. Loading and the browser's file discovery both use this list.
    pub fn weight_files(files: &impl ModelFiles, dir: &str) -> Result<Vec<String>> {
        let index = join(dir, "model.safetensors.index.json");
        if let Some(idx) = files.json::<ShardIndex>(&index)? {
            let shards: BTreeSet<&String> = idx.weight_map.values().collect();
            return Ok(shards.into_iter().map(|s| join(dir, s)).collect());
        }
        let single = join(dir, "model.safetensors");
        if files.exists(&single) {
            return Ok(vec![single]);
        }
        let bin = join(dir, "pytorch_model.bin");
        if files.exists(&bin) {
            return Err(Error::layout(
                files.path(&bin),
                "PyTorch pickle weights are not supported; convert them to model.safetensors \
                 (e.g. `model.save_pretrained(dir, safe_serialization=True)`)",
            ));
        }
        Err(Error::layout(files.path(dir), "no model.safetensors or model.safetensors.index.json"))
    }

    /// Opens the weights in folder `dir` of a model (see [`Checkpoint::weight_files`]).
    pub fn open(files: &impl ModelFiles, dir: &str) -> Result<Self> {
        let index = join(dir, "model.safetensors.index.json");
        let mut buffers = Vec::new();
        for rel in Self::weight_files(files, dir)? {
            let bytes = files.read(&rel)?.ok_or_else(|| {
                Error::layout(
                    files.path(&rel),
                    "missing: a weight file of this model (listed by the shard index)",
                )
            })?;
            buffers.push((files.path(&rel), bytes));
        }
        let ckpt = Self::from_buffers(buffers)?;
        if let Some(idx) = files.json::<ShardIndex>(&index)?
            && let Some(name) = idx.weight_map.keys().find(|n| !ckpt.entries.contains_key(*n))
        {
            return Err(Error::layout(
                files.path(&index),
                format!("lists tensor `{name}`, which no shard holds"),
            ));
        }
        Ok(ckpt)
    }

    /// Parses and validates safetensors buffers, each named by the path shown in errors; a
    /// truncated file is named.
    pub fn from_buffers(buffers: Vec<(PathBuf, Vec<u8>)>) -> Result<Self> {
        let mut files = Vec::with_capacity(buffers.len());
        let mut entries = BTreeMap::new();
        for (i, (path, bytes)) in buffers.into_iter().enumerate() {
            let st = SafeTensors::deserialize(&bytes)
                .map_err(|source| Error::Safetensors { path: path.clone(), source })?;
            let base = bytes.as_ptr() as usize;
            for (name, view) in st.tensors() {
                let start = view.data().as_ptr() as usize - base;
                let range = start..start + view.data().len();
                entries.insert(
                    name,
                    Entry { file: i, dtype: view.dtype(), shape: view.shape().to_vec(), range },
                );
            }
            files.push((path, bytes));
        }
        Ok(Self { files, entries })
    }

    /// Every tensor name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// The stored shape of a tensor.
    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        self.entries.get(name).map(|e| e.shape.as_slice())
    }

    /// The scale stored beside `name` when `name` is int8 (quant.rs), which loading `name` uses.
    pub fn scale_of(&self, name: &str) -> Option<String> {
        let e = self.entries.get(name)?;
        (e.dtype == Dtype::I8).then(|| scale_name(name)).filter(|s| self.contains(s))
    }

    /// Decodes a tensor to f32: F16 and BF16 are widened exactly; I8 is dequantized with the
    /// per-row scale stored beside it (quant.rs).
    pub fn to_f32(&self, name: &str) -> Result<Vec<f32>> {
        let e =
            self.entries.get(name).ok_or_else(|| Error::Invalid(format!("no tensor `{name}`")))?;
        let (path, bytes) = &self.files[e.file];
        let raw = &bytes[e.range.clone()];
        if e.dtype == Dtype::I8 {
            return self.dequantize(name, e, raw);
        }
        // Safetensors data is little-endian and unaligned in the file: decode by chunks.
        Ok(match e.dtype {
            Dtype::F32 => {
                raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
            }
            Dtype::F16 => raw
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::BF16 => raw
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(Error::Dtype {
                    path: path.clone(),
                    name: name.into(),
                    dtype: format!("{other:?}"),
                });
            }
        })
    }

    /// `q[r, c] * scale[r]` for int8 tensor `name` (`e`, bytes `raw`): the scale must be a float
    /// tensor of `[rows, 1]` or `[rows]` (one per row) or a single value (one for the tensor).
    fn dequantize(&self, name: &str, e: &Entry, raw: &[u8]) -> Result<Vec<f32>> {
        let fail = |message: String| Error::Quantized {
            path: self.files[e.file].0.clone(),
            name: name.to_string(),
            message,
        };
        let [rows, cols] = e.shape[..] else {
            return Err(fail(format!("has shape {:?}; int8 tensors must be 2-D", e.shape)));
        };
        let key = scale_name(name);
        let se =
            self.entries.get(&key).ok_or_else(|| fail(format!("no scale `{key}` beside it")))?;
        if !matches!(se.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
            return Err(fail(format!(
                "scale `{key}` has dtype {:?}; expected F32, F16 or BF16",
                se.dtype
            )));
        }
        let per_row = se.shape == [rows, 1] || se.shape == [rows];
        let per_tensor = se.shape.iter().product::<usize>() == 1;
        if !per_row && !per_tensor {
            return Err(fail(format!(
                "scale `{key}` has shape {:?}; expected [{rows}, 1] (one per row)",
                se.shape
            )));
        }
        let scale = self.to_f32(&key)?;
        let scales = if per_row { scale } else { vec![scale[0]; rows] };
        let q: Vec<i8> = raw.iter().map(|&b| b as i8).collect();
        Ok(dequantize_rows(&q, &scales, cols))
    }

    /// The first of `name`'s stored spellings (names.rs) that this checkpoint holds.
    fn resolve(&self, name: &str) -> Option<String> {
        stored_names(name).find(|n| self.contains(n))
    }
}

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
    report: RefCell<LoadReport>,
}

/// Hands out named tensors under a dotted prefix, from a checkpoint or freshly initialised.
#[derive(Clone)]
pub struct VarBuilder {
    src: Rc<Source>,
    prefix: String,
}

impl VarBuilder {
    /// Builds from a checkpoint: every tensor must be present with the expected shape.
    pub fn from_checkpoint(checkpoint: Rc<Checkpoint>, device: &Device) -> Self {
        Self::new(Some(checkpoint), device)
    }

    /// Initialises every tensor (random normal, ones or zeros): for training from scratch and tests.
    pub fn init(device: &Device) -> Self {
        Self::new(None, device)
    }

    fn new(checkpoint: Option<Rc<Checkpoint>>, device: &Device) -> Self {
        let src = Source {
            device: device.clone(),
            checkpoint,
            used: RefCell::default(),
            cache: RefCell::default(),
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
        if let Some(scale) = ckpt.scale_of(&key) {
            self.src.used.borrow_mut().insert(scale);
        }
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
                .filter(|n| !used.contains(*n) && !tied.contains(*n))
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
