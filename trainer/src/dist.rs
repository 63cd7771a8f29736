//! Data-parallel workers over MPI (`mpirun -np N trainer train ...`, cargo feature `mpi`).
//! Every worker holds a replica of the model and draws the same seeded global batch; each embeds
//! its own contiguous slice, the embeddings are all-gathered so that every worker computes the
//! loss over the whole global batch (the paper's cross-replica in-batch negatives, Ni et al.
//! 2021 §3.3), and parameter gradients are summed across workers once per step. Without the
//! feature, or outside `mpirun`, there is one worker and every collective is the identity.
//!
//! burn 0.22.1 has no collective layer usable here (`burn::tensor::distributed::all_reduce` is
//! CUDA/NCCL within one process, with no all-gather), so the collectives run on host copies of
//! the embeddings and gradients through rsmpi.

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};
use st5_core::SentenceModel;
use st5_core::transfer::to_host;

use crate::error::{Error, Result};

/// This process's place among the workers, and the collectives between them.
pub struct Workers {
    rank: usize,
    size: usize,
    #[cfg(feature = "mpi")]
    mpi: Option<(mpi::environment::Universe, mpi::topology::SimpleCommunicator)>,
}

impl Default for Workers {
    fn default() -> Self {
        Self::single()
    }
}

impl Workers {
    /// One worker: every collective is the identity.
    pub fn single() -> Self {
        Self {
            rank: 0,
            size: 1,
            #[cfg(feature = "mpi")]
            mpi: None,
        }
    }

    /// The MPI world when this process was started by `mpirun` (and built with the `mpi`
    /// feature), else [`single`](Self::single).
    pub fn from_env() -> Result<Self> {
        #[cfg(feature = "mpi")]
        {
            use mpi::traits::Communicator;
            let launched = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
                .iter()
                .any(|v| std::env::var_os(v).is_some());
            if launched {
                let universe = mpi::initialize().ok_or_else(|| Error::Workers {
                    message: "MPI could not be initialised".into(),
                })?;
                let world = universe.world();
                let (rank, size) = (world.rank() as usize, world.size() as usize);
                return Ok(Self { rank, size, mpi: Some((universe, world)) });
            }
        }
        Ok(Self::single())
    }

    pub fn rank(&self) -> usize {
        self.rank
    }
    pub fn size(&self) -> usize {
        self.size
    }
    /// Rank 0, the worker that writes checkpoints, metrics and the output.
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    /// Every worker's `local` (each the same length), concatenated in rank order.
    pub fn all_gather(&self, local: &[f32]) -> Vec<f32> {
        #[cfg(feature = "mpi")]
        if let Some((_, world)) = &self.mpi {
            use mpi::traits::CommunicatorCollectives;
            let mut all = vec![0f32; local.len() * self.size];
            world.all_gather_into(local, &mut all[..]);
            return all;
        }
        local.to_vec()
    }

    /// Sums `values` element-wise across workers, in place.
    #[cfg_attr(not(feature = "mpi"), allow(unused_variables))]
    pub fn all_reduce_sum(&self, values: &mut [f32]) {
        #[cfg(feature = "mpi")]
        if let Some((_, world)) = &self.mpi {
            use mpi::collective::SystemOperation;
            use mpi::traits::CommunicatorCollectives;
            let local = values.to_vec();
            world.all_reduce_into(&local[..], values, SystemOperation::sum());
        }
    }

    /// Every worker's `value`, in rank order.
    pub fn gather_u64(&self, value: u64) -> Vec<u64> {
        #[cfg(feature = "mpi")]
        if let Some((_, world)) = &self.mpi {
            use mpi::traits::CommunicatorCollectives;
            let mut all = vec![0u64; self.size];
            world.all_gather_into(&value, &mut all[..]);
            return all;
        }
        vec![value]
    }

    /// Refuses to go on unless every worker holds the same `value` (of `what`).
    pub fn check_same(&self, value: u64, what: &str) -> Result<()> {
        let all = self.gather_u64(value);
        match all.iter().position(|v| *v != all[0]) {
            None => Ok(()),
            Some(r) => Err(Error::Workers {
                message: format!(
                    "rank {r}'s {what} differs from rank 0's; every worker must run the same"
                ),
            }),
        }
    }
}

/// This worker's rank among the workers on its machine, from the launcher's environment (Open
/// MPI, MPICH, Slurm); 0 outside a launcher. A CUDA worker uses the GPU of that index.
pub fn local_rank() -> usize {
    ["OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
        .unwrap_or(0)
}

/// FNV-1a over bytes: a checksum that is the same on every worker for the same bytes.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes
        .into_iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// A checksum of every float parameter of `model` (bit patterns, in module order): replicas
/// that stay in step have the same one.
pub fn params_checksum(model: &SentenceModel) -> Result<u64> {
    struct Sum(u64, Option<Error>);
    impl ModuleVisitor for Sum {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<D>>) {
            match to_host(p.val().try_into_data()) {
                Ok(v) => self.0 ^= fnv1a(v.iter().flat_map(|x| x.to_bits().to_le_bytes())),
                Err(e) => {
                    self.1.get_or_insert(e.into());
                }
            }
            self.0 = self.0.rotate_left(7);
        }
    }
    let mut s = Sum(0, None);
    model.visit(&mut s);
    s.1.map_or(Ok(s.0), Err)
}

/// Sums `grads` across workers (each parameter's gradient, flattened in module order, in one
/// all-reduce), then scales them by `scale`. The identity for one worker and scale 1.
pub fn all_reduce_gradients(
    workers: &Workers,
    model: &SentenceModel,
    grads: &mut GradientsParams,
    scale: f32,
    device: &Device,
) -> Result<()> {
    if workers.size() == 1 && scale == 1.0 {
        return Ok(());
    }
    struct Take<'a>(
        &'a mut GradientsParams,
        Vec<(burn::module::ParamId, Vec<usize>)>,
        Vec<f32>,
        Option<Error>,
    );
    impl ModuleVisitor for Take<'_> {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<D>>) {
            if let Some(g) = self.0.remove::<D>(p.id) {
                let shape = g.dims().to_vec();
                match to_host(g.try_into_data()) {
                    Ok(v) => {
                        self.2.extend(v);
                        self.1.push((p.id, shape));
                    }
                    Err(e) => {
                        self.3.get_or_insert(e.into());
                    }
                }
            }
        }
    }
    let mut take = Take(grads, Vec::new(), Vec::new(), None);
    model.visit(&mut take);
    let Take(grads, ids, mut flat, failed) = take;
    if let Some(e) = failed {
        return Err(e);
    }
    workers.all_reduce_sum(&mut flat);
    if scale != 1.0 {
        flat.iter_mut().for_each(|x| *x *= scale);
    }
    struct Put<'a>(
        &'a mut GradientsParams,
        std::collections::HashMap<burn::module::ParamId, Vec<f32>>,
        &'a Device,
    );
    impl ModuleVisitor for Put<'_> {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<D>>) {
            if let Some(v) = self.1.remove(&p.id) {
                let shape: [usize; D] = p.dims();
                self.0.register(p.id, Tensor::<D>::from_data(TensorData::new(v, shape), self.2));
            }
        }
    }
    let mut at = 0;
    let values = ids
        .into_iter()
        .map(|(id, shape)| {
            let n: usize = shape.iter().product();
            at += n;
            (id, flat[at - n..at].to_vec())
        })
        .collect();
    model.visit(&mut Put(grads, values, device));
    Ok(())
}
