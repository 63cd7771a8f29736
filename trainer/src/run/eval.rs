//! The dev metric: Spearman ×100 of cosine similarity on the STS-B dev pairs, every
//! `eval_every` steps and at the end of each stage.

use burn::module::Module;
use st5_core::DEFAULT_BATCH_SIZE;
use st5_core::tokenizer::T5Tokenizer;
use st5_core::transfer::to_host;

use super::Run;
use crate::config::TrainConfig;
use crate::error::Result;

/// STS-B dev: both texts of every pair, tokenized once per run (`[a0, b0, a1, b1, ...]`), and
/// the gold scores.
pub(super) struct DevSet {
    ids: Vec<Vec<u32>>,
    gold: Vec<f64>,
}

impl DevSet {
    /// The first `eval_pairs` pairs (all when 0) of the evaluation data's STS-B dev.
    pub(super) fn load(cfg: &TrainConfig, tokenizer: &T5Tokenizer) -> Result<Self> {
        let mut dev =
            st5_eval::data::sts_benchmark(&cfg.eval_data().join("stsbenchmark/sts-dev.csv"))?;
        if cfg.eval_pairs > 0 {
            dev.truncate(cfg.eval_pairs);
        }
        let texts: Vec<&str> = dev.iter().flat_map(|p| [p.a.as_str(), p.b.as_str()]).collect();
        let ids = tokenizer.encode_batch(&texts)?;
        let gold = dev.iter().map(|p| p.score).collect();
        Ok(Self { ids, gold })
    }
}

impl Run {
    /// Spearman ×100 of cosine similarity on the STS-B dev pairs.
    pub fn dev_spearman(&self) -> Result<f64> {
        let frozen = self.model.valid();
        let mut emb = Vec::new();
        for chunk in self.dev.ids.chunks(DEFAULT_BATCH_SIZE) {
            let seqs: Vec<&[u32]> = chunk.iter().map(Vec::as_slice).collect();
            emb.extend(to_host(frozen.embed_ids(&seqs, &self.base).try_into_data())?);
        }
        let dim = emb.len() / self.dev.ids.len().max(1);
        let rows: Vec<&[f32]> = emb.chunks(dim.max(1)).collect();
        let sims: Vec<f64> = rows.chunks(2).map(|p| st5_eval::tasks::cosine(p[0], p[1])).collect();
        Ok(100.0 * st5_eval::stats::spearman(&sims, &self.dev.gold))
    }

    /// The dev metric after step `step` (0-based) of a stage of `steps`, when due: every
    /// `eval_every` steps and at the stage's last. Rank 0 alone logs, so it alone evaluates.
    pub(super) fn dev_spearman_if_due(&self, step: usize, steps: usize) -> Result<Option<f64>> {
        let every = self.cfg.eval_every;
        let due = (every > 0 && (step + 1).is_multiple_of(every)) || step + 1 == steps;
        if due && self.workers.is_root() { Ok(Some(self.dev_spearman()?)) } else { Ok(None) }
    }
}
