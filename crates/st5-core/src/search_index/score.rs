//! Device scoring: a shard's scores `[q, rows]` for a group of queries, by one matrix product
//! for f32 vectors, or for packed codes by unpacking slices of rows (int8 or binary) and
//! decoding the scores, not the vectors.

use burn::tensor::{Int, Tensor, TensorData};

use super::VectorIndex;
use super::shard::Shard;
use crate::vector_codes::Packing;

/// The queries on the device, in the forms the shards need.
pub(super) struct Queries {
    /// `[q, dim]`.
    dense: Tensor<2>,
    /// For packed shards: the queries zero-padded to `planes·W` `[q, planes·W]`, their sums
    /// `[q, 1]`, and the shift of each plane `[1, planes, 1]`.
    packed: Option<(Packing, Tensor<2>, Tensor<2>, Tensor<3, Int>)>,
}

/// Unpacked values per slice of a quantized shard (×4 bytes, transient): 32 MB.
const UNPACK_VALUES: usize = 1 << 23;

impl VectorIndex {
    /// The queries on the device, padded for packed shards.
    pub(super) fn upload_queries(&self, queries: &[f32], q: usize) -> Queries {
        let dense =
            Tensor::<2>::from_data(TensorData::new(queries.to_vec(), [q, self.dim]), &self.device);
        let packed = self.quantize.packing().map(|p| {
            let width = p.planes() * p.words(self.dim);
            let mut padded = vec![0f32; q * width];
            for (row, query) in padded.chunks_mut(width).zip(queries.chunks(self.dim)) {
                row[..self.dim].copy_from_slice(query);
            }
            let padded = Tensor::<2>::from_data(TensorData::new(padded, [q, width]), &self.device);
            let sums = padded.clone().sum_dim(1); // [q, 1]
            let shifts: Vec<i32> = (0..p.planes() as i32).map(|j| j * p.bits() as i32).collect();
            let shifts = Tensor::<3, Int>::from_data(
                TensorData::new(shifts, [1, p.planes(), 1]),
                &self.device,
            );
            (p, padded, sums, shifts)
        });
        Queries { dense, packed }
    }

    /// A shard's scores `[q, rows]`: exact for f32, approximate for codes.
    pub(super) fn shard_scores(&self, shard: &Shard, queries: &Queries, q: usize) -> Tensor<2> {
        match shard {
            // One query on a GPU is a matrix-vector product: as a broadcast multiply and a row
            // sum it streams the shard once, where the matmul kernel pads the single row to a
            // whole tile (2.1× faster on WebGPU for 100k × 768). The CPU's gemm is faster as is.
            Shard::Dense(vectors) if q == 1 && self.gpu => {
                let rows = vectors.dims()[0];
                vectors
                    .clone()
                    .mul(queries.dense.clone().expand([rows, self.dim]))
                    .sum_dim(1)
                    .reshape([1, rows])
            }
            Shard::Dense(vectors) => queries.dense.clone().matmul(vectors.clone().transpose()),
            Shard::Host { .. } => unreachable!("host shards are scored on the host"),
            Shard::Packed { words, scales } => {
                let (p, padded, sums, shifts) = queries.packed.as_ref().expect("packed queries");
                let [rows, w] = words.dims();
                let (a, c) = p.affine();
                let width = p.planes() * w;
                let step = (UNPACK_VALUES / width).max(1);
                let parts = (0..rows)
                    .step_by(step)
                    .map(|start| {
                        let end = (start + step).min(rows);
                        let n = end - start;
                        // [n, W] → [n, planes, W] (one shift a plane) → values in dim order.
                        let values = words
                            .clone()
                            .slice([start..end, 0..w])
                            .reshape([n, 1, w])
                            .bitwise_right_shift(shifts.clone())
                            .bitwise_and_scalar(p.mask())
                            .float()
                            .reshape([n, width]);
                        let raw = padded.clone().matmul(values.transpose()); // [q, n]
                        raw.mul_scalar(a)
                            .add(sums.clone().mul_scalar(c))
                            .mul(scales.clone().slice([0..1, start..end]))
                    })
                    .collect::<Vec<_>>();
                Tensor::cat(parts, 1)
            }
        }
    }
}
