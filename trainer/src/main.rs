//! The `trainer` binary: Sentence-T5's contrastive fine-tuning from a TOML config.
//!
//!   trainer train --config trainer/configs/tiny.toml [--resume]

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use st5_trainer::config::TrainConfig;
use st5_trainer::dist::{Workers, fnv1a};
use st5_trainer::report::{CSV_HEADER, curves, model_card, rows_kept_on_resume};
use st5_trainer::run::{Event, Run};

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

fn main() -> Result<()> {
    keep_activations_in_the_heap();
    let Command::Train { config, resume } = Cli::parse().command;
    let text = std::fs::read_to_string(&config)
        .with_context(|| format!("reading {}", config.display()))?;
    let cfg = TrainConfig::from_file(&config)?;
    // Under `mpirun`, every worker must run the same config (its text, byte for byte) and the
    // same flags; rank 0 alone writes the log, checkpoints and the output.
    let workers = Workers::from_env()?;
    workers.check_same(fnv1a(text.bytes().chain([resume as u8])), "config (or --resume)")?;
    if !workers.is_root() {
        let (mut run, state) = Run::new(cfg, resume)?;
        run.workers = workers;
        run.train(state, |_| {})?;
        return Ok(());
    }
    let log_dir = cfg.checkpoint_dir.clone().unwrap_or_else(|| cfg.output.with_extension("log"));
    std::fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let csv_path = log_dir.join("metrics.csv");
    let (mut run, state) = Run::new(cfg, resume)?;
    if workers.size() > 1 {
        eprintln!("trainer: {} data-parallel workers (MPI); rank 0 writes", workers.size());
    }
    run.workers = workers;
    // A resumed run repeats the steps after its checkpoint: drop their rows from the log first.
    let mut rows = match (&state, std::fs::read_to_string(&csv_path)) {
        (Some((s, _)), Ok(text)) => {
            let names: Vec<&str> = run.cfg.stages.iter().map(|st| st.name.as_str()).collect();
            rows_kept_on_resume(&text, &names, s.stage, s.step)
        }
        _ => Vec::new(),
    };
    let mut csv = std::fs::File::create(&csv_path)
        .with_context(|| format!("opening {}", csv_path.display()))?;
    writeln!(csv, "{CSV_HEADER}")?;
    for m in &rows {
        writeln!(csv, "{}", m.csv_row())?;
    }
    let mut data_notes = Vec::new();
    let mut bar: Option<ProgressBar> = None;
    let started = std::time::Instant::now();
    run.train(state, |event| match event {
        Event::StageStart { stage, datasets } => {
            for d in datasets {
                let line = format!(
                    "stage {}: {} — {} examples ({} dropped: a text is in an evaluation test split), weight {}",
                    stage.name,
                    d.name,
                    d.examples.len(),
                    d.dropped_eval_overlap,
                    d.weight
                );
                eprintln!("{line}");
                data_notes.push(line);
            }
            let b = ProgressBar::new(stage.steps as u64);
            let style = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}");
            b.set_style(style.expect("template").progress_chars("=> "));
            b.set_prefix(stage.name.clone());
            bar = Some(b);
        }
        Event::Step(m) => {
            if let Some(b) = &bar {
                b.set_position(m.step as u64);
                let dev = m.dev_spearman.map(|s| format!(" dev {s:.2}")).unwrap_or_default();
                let msg = format!("loss {:.4} lr {:.2e} {:.1} pairs/s{dev}", m.loss, m.lr, m.pairs_per_s);
                b.set_message(msg);
            }
            let _ = writeln!(csv, "{}", m.csv_row());
            rows.push(m.clone());
        }
        Event::Skipped { stage, step, loss } => eprintln!(
            "warning: stage {stage} step {}: non-finite loss or gradient ({loss}); step skipped",
            step + 1
        ),
        Event::Checkpoint(p) => {
            if let Some(b) = &bar {
                b.println(format!("checkpoint: {}", p.display()));
            }
        }
    })?;
    if let Some(b) = bar {
        b.finish();
    }
    run.export(model_card(&run.cfg, &text, &data_notes, &rows)?)?;
    let plot_path = log_dir.join("metrics.png");
    let c = curves(&rows);
    std::fs::write(&plot_path, st5_trainer::plot::png(&c.loss, &c.dev, &c.breaks))
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
