//! The `trainer` binary: Sentence-T5's contrastive fine-tuning from a TOML config.
//!
//!   trainer train --config trainer/configs/tiny.toml [--resume]

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use st5_trainer::config::TrainConfig;
use st5_trainer::train::{Event, Run};

#[derive(Parser)]
#[command(
    name = "trainer",
    about = "Sentence-T5 contrastive fine-tuning (Ni et al. 2021) on the st5 model code"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the config's stages and writes a sentence-transformers directory to `output`.
    Train {
        #[arg(long)]
        config: PathBuf,
        /// Continue from the newest checkpoint in `checkpoint_dir`.
        #[arg(long)]
        resume: bool,
    },
}

/// Every step allocates and frees the same large buffers (activations, and the embedding
/// table's gradient and update: 33 MB for a 32k × 256 table). glibc serves blocks over its mmap
/// threshold (at most 32 MiB) with a fresh mmap and returns them with munmap, so each step
/// page-faults them in again (14 % system time here). Serving everything from the heap and not
/// trimming it keeps them mapped; see the closing note for the measured gain.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_activations_in_the_heap() {
    // SAFETY: mallopt only changes allocator tuning; called before any threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_activations_in_the_heap() {}

/// Peak resident memory of this process (Linux `VmHWM`), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Loss and dev points by global step, and the steps where stages begin, from the metrics CSV
/// (the whole run's, resumed parts included).
fn plot_from_csv(csv: &str) -> Vec<u8> {
    let (mut loss, mut dev, mut breaks) = (Vec::new(), Vec::new(), Vec::new());
    let (mut stage, mut offset, mut last) = (String::new(), 0.0, 0.0);
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (Some(name), Some(step)) = (f.first(), f.get(1).and_then(|s| s.parse::<f64>().ok()))
        else {
            continue;
        };
        if *name != stage {
            if !stage.is_empty() {
                offset = last;
                breaks.push(offset);
            }
            stage = name.to_string();
        }
        last = offset + step;
        if let Some(l) = f.get(2).and_then(|s| s.parse::<f64>().ok()) {
            loss.push((last, l));
        }
        if let Some(d) = f.get(5).and_then(|s| s.parse::<f64>().ok()) {
            dev.push((last, d));
        }
    }
    st5_trainer::plot::png(&loss, &dev, &breaks)
}

fn main() -> Result<()> {
    keep_activations_in_the_heap();
    let Command::Train { config, resume } = Cli::parse().command;
    let text = std::fs::read_to_string(&config)
        .with_context(|| format!("reading {}", config.display()))?;
    let cfg = TrainConfig::from_file(&config)?;
    let log_dir = cfg.checkpoint_dir.clone().unwrap_or_else(|| cfg.output.with_extension("log"));
    std::fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let csv_path = log_dir.join("metrics.csv");
    let (mut run, state) = Run::new(cfg, resume)?;
    // A resumed run repeats the steps after its checkpoint: drop their rows from the log first.
    let kept = match (&state, std::fs::read_to_string(&csv_path)) {
        (Some((s, _)), Ok(text)) => {
            let stage_of = |name: &str| run.cfg.stages.iter().position(|st| st.name == name);
            let keep = |line: &str| {
                let mut f = line.split(',');
                match (f.next().and_then(stage_of), f.next().and_then(|x| x.parse::<usize>().ok()))
                {
                    (Some(i), Some(step)) => i < s.stage || (i == s.stage && step <= s.step),
                    _ => false,
                }
            };
            text.lines().skip(1).filter(|l| keep(l)).map(|l| format!("{l}\n")).collect::<String>()
        }
        _ => String::new(),
    };
    let mut csv = std::fs::File::create(&csv_path)
        .with_context(|| format!("opening {}", csv_path.display()))?;
    write!(csv, "stage,step,loss,lr,pairs_per_s,dev_spearman\n{kept}")?;
    let mut data_notes = String::new();
    let mut bar: Option<ProgressBar> = None;
    let started = std::time::Instant::now();
    run.train(state, |event| match event {
        Event::StageStart { stage, datasets } => {
            for d in datasets {
                let line = format!("stage {}: {} — {} examples ({} dropped: a text is in an evaluation test split), weight {}", stage.name, d.name, d.examples.len(), d.dropped_eval_overlap, d.weight);
                eprintln!("{line}");
                let _ = writeln!(data_notes, "- {line}");
            }
            let b = ProgressBar::new(stage.steps as u64);
            b.set_style(ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}").expect("template").progress_chars("=> "));
            b.set_prefix(stage.name.clone());
            bar = Some(b);
        }
        Event::Step(m) => {
            if let Some(b) = &bar {
                b.set_position(m.step as u64);
                b.set_message(format!("loss {:.4} lr {:.2e} {:.1} pairs/s{}", m.loss, m.lr, m.pairs_per_s, m.dev_spearman.map(|s| format!(" dev {s:.2}")).unwrap_or_default()));
            }
            let _ = writeln!(csv, "{},{},{},{},{:.3},{}", m.stage, m.step, m.loss, m.lr, m.pairs_per_s, m.dev_spearman.map(|s| format!("{s:.4}")).unwrap_or_default());
        }
        Event::Skipped { stage, step, loss } => eprintln!("warning: stage {stage} step {}: non-finite loss or gradient ({loss}); step skipped", step + 1),
        Event::Checkpoint(p) => {
            if let Some(b) = &bar {
                b.println(format!("checkpoint: {}", p.display()));
            }
        }
    })?;
    if let Some(b) = bar {
        b.finish();
    }
    let mut card = match &run.cfg.card {
        Some(p) => {
            std::fs::read_to_string(p)
                .with_context(|| format!("reading the model card {}", p.display()))?
                .trim_end()
                .to_string()
                + "\n\n# The training run\n\n"
        }
        None => format!(
            "# {}\n\nA Sentence-T5 model trained with st5's `trainer` (Ni et al. 2021: in-batch softmax contrastive loss; distillation stages: MSE to stored teacher embeddings).\n\n",
            run.cfg
                .output
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ),
    };
    let _ = writeln!(card, "## Data\n\n{data_notes}");
    let _ = writeln!(card, "## Dev curve (STS-B dev, Spearman × 100 of cosine similarity)\n");
    for m in run.metrics.iter().filter(|m| m.dev_spearman.is_some()) {
        let _ = writeln!(
            card,
            "- {} step {}: {:.2}",
            m.stage,
            m.step,
            m.dev_spearman.unwrap_or_default()
        );
    }
    let _ = writeln!(card, "\n## Config\n\n```toml\n{}\n```", text.trim());
    run.export(card)?;
    let plot_path = log_dir.join("metrics.png");
    std::fs::write(&plot_path, plot_from_csv(&std::fs::read_to_string(&csv_path)?))
        .with_context(|| format!("writing {}", plot_path.display()))?;
    eprintln!(
        "wrote {} in {:.1} s; metrics in {} and {}; peak memory {}",
        run.cfg.output.display(),
        started.elapsed().as_secs_f64(),
        csv_path.display(),
        plot_path.display(),
        peak_rss_mib().map(|m| format!("{m:.0} MiB")).unwrap_or_else(|| "unknown".into())
    );
    Ok(())
}
