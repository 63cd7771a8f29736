//! What a checkpoint records besides weights and optimiser state (`trainer_state.json`), and the
//! checks it must pass before a run resumes from it: the file may be damaged or edited.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::data::SamplerState;
use crate::error::{Error, Result};

/// What a checkpoint records besides weights and optimiser state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainState {
    /// The stage in progress and the next step in it.
    pub stage: usize,
    pub step: usize,
    pub sampler: Option<SamplerState>,
    pub bad_steps: usize,
    /// Module path → parameter id, so that the optimiser state finds its parameters again.
    pub param_ids: BTreeMap<String, u64>,
}

impl TrainState {
    /// Parses `trainer_state.json`; `path` (the checkpoint directory) names it in errors.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| Error::Checkpoint {
            path: path.into(),
            message: format!("trainer_state.json: {e}"),
        })
    }
}
