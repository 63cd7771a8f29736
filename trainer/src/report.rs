//! What a run records about itself: the metrics CSV (one row per step, kept whole across
//! resumes), the curves drawn from it, and the model card written beside the trained model.

use std::fmt::Write as _;

use crate::config::TrainConfig;
use crate::error::{Error, Result};

/// The metrics CSV's header; [`Metric::csv_row`] writes its rows.
pub const CSV_HEADER: &str = "stage,step,loss,lr,pairs_per_s,dev_spearman";

/// One step of a stage: one line of the metrics CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub stage: String,
    /// 1-based step within the stage.
    pub step: usize,
    pub loss: f32,
    pub lr: f64,
    pub pairs_per_s: f64,
    /// STS-B dev Spearman × 100, on the steps that evaluate.
    pub dev_spearman: Option<f64>,
}

impl Metric {
    /// The CSV line, without its newline.
    pub fn csv_row(&self) -> String {
        let dev = self.dev_spearman.map(|s| format!("{s:.4}")).unwrap_or_default();
        format!(
            "{},{},{},{},{:.3},{dev}",
            self.stage, self.step, self.loss, self.lr, self.pairs_per_s
        )
    }

    /// Parses a line [`csv_row`](Self::csv_row) wrote; `None` for the header or a torn line
    /// (a run killed mid-write).
    pub fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.split(',').collect();
        let [stage, step, loss, lr, pairs, dev] = f[..] else { return None };
        Some(Self {
            stage: stage.to_string(),
            step: step.parse().ok()?,
            loss: loss.parse().ok()?,
            lr: lr.parse().ok()?,
            pairs_per_s: pairs.parse().ok()?,
            dev_spearman: if dev.is_empty() { None } else { Some(dev.parse().ok()?) },
        })
    }
}

/// The rows of an earlier CSV that a run resumed at step `step` of stage `stage` (an index into
/// `stages`, the stage names in order) keeps: those at or before the checkpoint. The steps after
/// it run again and write their rows anew.
pub fn rows_kept_on_resume(csv: &str, stages: &[&str], stage: usize, step: usize) -> Vec<Metric> {
    csv.lines()
        .filter_map(Metric::parse)
        .filter(|m| match stages.iter().position(|s| *s == m.stage) {
            Some(i) => i < stage || (i == stage && m.step <= step),
            None => false,
        })
        .collect()
}

/// Loss and dev points by global step (steps counted across stages), and the global steps
/// where a stage begins: what the PNG plot draws.
#[derive(Debug, Default, PartialEq)]
pub struct Curves {
    pub loss: Vec<(f64, f64)>,
    pub dev: Vec<(f64, f64)>,
    pub breaks: Vec<f64>,
}

pub fn curves(rows: &[Metric]) -> Curves {
    let mut c = Curves::default();
    let (mut stage, mut offset, mut last) = ("", 0.0, 0.0);
    for m in rows {
        if m.stage != stage {
            if !stage.is_empty() {
                offset = last;
                c.breaks.push(offset);
            }
            stage = &m.stage;
        }
        last = offset + m.step as f64;
        c.loss.push((last, m.loss as f64));
        if let Some(d) = m.dev_spearman {
            c.dev.push((last, d));
        }
    }
    c
}

/// The model card (`README.md`) of a finished run: `cfg.card`'s text (or a title from the
/// output directory's name), then the data each stage used (`data_notes`, one line each), the
/// dev curve of the whole run (`rows`, resumed parts included) and the config as run.
pub fn model_card(
    cfg: &TrainConfig,
    config_text: &str,
    data_notes: &[String],
    rows: &[Metric],
) -> Result<String> {
    let mut card = match &cfg.card {
        Some(p) => {
            std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?.trim_end().to_string()
                + "\n\n# The training run\n\n"
        }
        None => {
            let name = cfg
                .output
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let what = match cfg.prompt_length() {
                Some(p) => format!(
                    "A soft prompt ({p} vectors; Lester et al. 2021) for the frozen model {}, \
                     trained with st5's `trainer`; apply it with `st5 embed|search|eval --prompt` \
                     or the npm package's `load(url, {{ prompt }})`.",
                    cfg.model.init
                ),
                None => "A Sentence-T5 model trained with st5's `trainer` (Ni et al. 2021: \
                         in-batch softmax contrastive loss; distillation stages: MSE to stored \
                         teacher embeddings)."
                    .into(),
            };
            format!("# {name}\n\n{what}\n\n")
        }
    };
    let _ = writeln!(card, "## Data\n");
    for line in data_notes {
        let _ = writeln!(card, "- {line}");
    }
    let _ = writeln!(card, "\n## Dev curve (STS-B dev, Spearman × 100 of cosine similarity)\n");
    for m in rows {
        if let Some(d) = m.dev_spearman {
            let _ = writeln!(card, "- {} step {}: {d:.2}", m.stage, m.step);
        }
    }
    let _ = writeln!(card, "\n## Config\n\n```toml\n{}\n```", config_text.trim());
    Ok(card)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(stage: &str, step: usize, dev: Option<f64>) -> Metric {
        Metric {
            stage: stage.into(),
            step,
            loss: 0.5,
            lr: 1e-4,
            pairs_per_s: 12.0,
            dev_spearman: dev,
        }
    }

    #[test]
    fn rows_round_trip_and_torn_lines_are_skipped() {
        for m in [metric("qa", 3, None), metric("nli", 10, Some(81.2345))] {
            assert_eq!(Metric::parse(&m.csv_row()), Some(m.clone()), "{}", m.csv_row());
        }
        for bad in [CSV_HEADER, "", "qa,3,0.5", "qa,x,0.5,1e-4,12.000,", "qa,3,0.5,1e-4,12.000,8x"]
        {
            assert_eq!(Metric::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_resume_keeps_the_rows_up_to_its_checkpoint() {
        let rows = [metric("qa", 1, None), metric("qa", 2, None), metric("nli", 1, None)]
            .map(|m| m.csv_row())
            .join("\n");
        let csv = format!("{CSV_HEADER}\n{rows}\nqa,3,0.5,1e-4,12.0");
        let steps = |kept: Vec<Metric>| kept.iter().map(|m| (m.stage.clone(), m.step)).collect();
        // (resumed at stage, step) → the (stage, step) rows kept
        let cases: [(usize, usize, Vec<(String, usize)>); 4] = [
            (0, 0, vec![]),
            (0, 1, vec![("qa".into(), 1)]),
            (1, 0, vec![("qa".into(), 1), ("qa".into(), 2)]),
            (1, 5, vec![("qa".into(), 1), ("qa".into(), 2), ("nli".into(), 1)]),
        ];
        for (stage, step, want) in cases {
            let got: Vec<(String, usize)> =
                steps(rows_kept_on_resume(&csv, &["qa", "nli"], stage, step));
            assert_eq!(got, want, "resume at ({stage}, {step})");
        }
        assert!(rows_kept_on_resume(&csv, &["other"], 9, 9).is_empty(), "unknown stages dropped");
    }

    #[test]
    fn curves_count_steps_across_stages() {
        let rows =
            [metric("qa", 1, None), metric("qa", 2, Some(70.0)), metric("nli", 1, Some(75.0))];
        let c = curves(&rows);
        assert_eq!(c.loss.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1.0, 2.0, 3.0]);
        assert_eq!(c.dev, vec![(2.0, 70.0), (3.0, 75.0)]);
        assert_eq!(c.breaks, vec![2.0]);
    }

    #[test]
    fn the_card_holds_data_dev_curve_and_config() {
        let text = "output = \"out/my-model\"\n[model]\ninit = \"x\"\n";
        let cfg: TrainConfig =
            toml::from_str(&format!("{text}[[stage]]\nname = \"qa\"\nkind = \"contrastive\"\nbatch_size = 2\nsteps = 1\n[[stage.dataset]]\npath = \"d.jsonl\"\n")).unwrap();
        let notes = vec!["stage qa: d.jsonl — 10 examples".to_string()];
        let rows = [metric("qa", 1, None), metric("qa", 2, Some(70.126))];
        let card = model_card(&cfg, text, &notes, &rows).unwrap();
        for want in [
            "# my-model",
            "- stage qa: d.jsonl — 10 examples",
            "- qa step 2: 70.13",
            "init = \"x\"",
        ] {
            assert!(card.contains(want), "`{want}` not in:\n{card}");
        }
        assert!(!card.contains("step 1:"), "steps without a dev figure are not listed:\n{card}");
        let missing = TrainConfig { card: Some("no/such/card.md".into()), ..cfg };
        let err = model_card(&missing, text, &notes, &rows).unwrap_err().to_string();
        assert!(err.contains("no/such/card.md"), "{err}");
        // A prompt run's card says it is a prompt, for which model.
        let prompt_run: TrainConfig = toml::from_str(&format!("{text}[[stage]]\nname = \"qa\"\nbatch_size = 2\nsteps = 1\nprompt_length = 8\n[[stage.dataset]]\npath = \"d.jsonl\"\n")).unwrap();
        let card = model_card(&prompt_run, text, &notes, &rows).unwrap();
        assert!(card.contains("A soft prompt (8 vectors") && card.contains("model x,"), "{card}");
    }
}
