//! Dynamic batching: one thread owns the model and runs the texts of every request in flight
//! together, up to `--max-batch-tokens` a batch, taken in turn from each waiting request (one
//! text from each, then the next from each, ...), so that a short request never waits behind the
//! whole of a long one. The embedder sorts each batch by length (on the CPU it runs each length on
//! its own, unpadded, so a text's vector does not depend on the requests it was batched with).
//!
//! A request whose client has gone (its answer channel closed) is dropped before its next text
//! runs. A panic in the model fails the requests of that batch with a 500 and the thread goes on.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use st5_core::Embedder;
use st5_core::prompt::Prompt;
use tokio::sync::{mpsc, oneshot};

use crate::api::{SearchRequest, SearchResponse};
use crate::metrics::Metrics;
use crate::{SearchError, Searcher};

/// What the model thread is asked to do.
pub enum Work {
    Embed(Job),
    /// A search of the server's index, the query's unit vector beside it.
    Search {
        request: SearchRequest,
        vector: Vec<f32>,
        reply: oneshot::Sender<Result<Result<SearchResponse, String>, String>>,
    },
}

/// Texts of one request, tokenized, waiting for the model.
pub struct Job {
    pub seqs: Vec<Vec<u32>>,
    /// Index into the server's prompts, or `None` for no prompt.
    pub prompt: Option<usize>,
    /// Rows `[seqs.len(), dim]` in input order, or why the model failed.
    pub reply: oneshot::Sender<Result<Vec<f32>, String>>,
    pub enqueued: Instant,
}

/// A job being worked through: its next text and the rows done so far.
struct Pending {
    job: Job,
    next: usize,
    done: usize,
    rows: Vec<f32>,
    started: bool,
}

/// A soft prompt by name, with the file it came from (for its errors).
pub struct NamedPrompt {
    pub name: String,
    pub prompt: Prompt,
    pub path: std::path::PathBuf,
}

/// The model thread's own: the model, its prompts and the index it searches.
pub struct Worker {
    pub embedder: Embedder,
    pub prompts: Vec<NamedPrompt>,
    pub fingerprint: String,
    pub index: Option<Box<dyn Searcher>>,
}

/// Runs work from `rx` until every sender is gone and the queue is empty: searches at once (they
/// are short), embedding jobs in batches.
pub fn run(
    worker: Worker,
    max_batch_tokens: usize,
    mut rx: mpsc::UnboundedReceiver<Work>,
    metrics: Arc<Metrics>,
) {
    let Worker { mut embedder, prompts, fingerprint, index } = worker;
    let dim = embedder.dim();
    let take = |work: Work, pending: &mut VecDeque<Pending>| match work {
        Work::Embed(job) => pending.push_back(Pending::new(job, dim)),
        Work::Search { request, vector, reply } => {
            // Outer: the search failed (500); inner: the request was refused (422).
            let answer = match &index {
                Some(index) => match index.search(&request, &vector) {
                    Ok(r) => Ok(Ok(r)),
                    Err(SearchError::Refused(m)) => Ok(Err(m)),
                    Err(SearchError::Failed(m)) => Err(m),
                },
                None => Err("this server has no index (start it with --index FILE)".into()),
            };
            let _ = reply.send(answer);
        }
    };
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut current_prompt: Option<usize> = None;
    loop {
        if pending.is_empty() {
            match rx.blocking_recv() {
                Some(work) => take(work, &mut pending),
                None => return,
            }
        }
        while let Ok(work) = rx.try_recv() {
            take(work, &mut pending);
        }
        // A client that went away takes its remaining texts with it.
        pending.retain(|p| !p.job.reply.is_closed());
        metrics.queue_size.set(pending.len() as i64);
        let Some(prompt) = pending.front().map(|p| p.job.prompt) else { continue };
        let picks = pick(&pending, prompt, max_batch_tokens);
        if prompt != current_prompt {
            let named = prompt.map(|i| (&prompts[i].prompt, prompts[i].path.as_path()));
            if let Err(e) = embedder.set_prompt(named, &fingerprint) {
                fail(&mut pending, |p| p.job.prompt == prompt, &e.to_string());
                current_prompt = Some(usize::MAX);
                continue;
            }
            current_prompt = prompt;
        }
        for &(j, s) in &picks {
            pending[j].next = s + 1;
        }
        let seqs: Vec<Vec<u32>> =
            picks.iter().map(|&(j, s)| pending[j].job.seqs[s].clone()).collect();
        let now = Instant::now();
        for &(j, _) in &picks {
            let p = &mut pending[j];
            if !p.started {
                p.started = true;
                metrics.queue_duration.observe((now - p.job.enqueued).as_secs_f64());
            }
        }
        metrics.batch_size.observe(seqs.len() as f64);
        metrics.batch_tokens.observe(seqs.iter().map(Vec::len).sum::<usize>() as f64);
        let result = catch_unwind(AssertUnwindSafe(|| embedder.embed_tokens(&seqs)));
        metrics.inference_duration.observe(now.elapsed().as_secs_f64());
        match result {
            Ok(Ok(e)) => {
                for (row, &(j, s)) in e.rows().zip(&picks) {
                    let p = &mut pending[j];
                    p.rows[s * dim..(s + 1) * dim].copy_from_slice(row);
                    p.done += 1;
                }
            }
            Ok(Err(e)) => fail_picked(&mut pending, &picks, &e.to_string()),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("the model panicked");
                let message = format!("the model panicked: {message}");
                fail_picked(&mut pending, &picks, &message);
                // The prompt is set anew after a panic, whatever state it left.
                current_prompt = Some(usize::MAX);
            }
        }
        // Answer every finished job, in any position of the queue.
        let mut i = 0;
        while i < pending.len() {
            if pending[i].done == pending[i].job.seqs.len() {
                let p = pending.remove(i).expect("index in range");
                let _ = p.job.reply.send(Ok(p.rows));
            } else {
                i += 1;
            }
        }
    }
}

impl Pending {
    fn new(job: Job, dim: usize) -> Self {
        let rows = vec![0.0; job.seqs.len() * dim];
        Self { job, next: 0, done: 0, rows, started: false }
    }
}

/// The next batch: `(job, text)` pairs taken in turn from each waiting job with `prompt`, until
/// the next text would pass `max_batch_tokens` (a batch always holds at least one text). Marks
/// the texts taken.
fn pick(
    pending: &VecDeque<Pending>,
    prompt: Option<usize>,
    max_batch_tokens: usize,
) -> Vec<(usize, usize)> {
    let mut next: Vec<usize> = pending.iter().map(|p| p.next).collect();
    let mut picks = Vec::new();
    let mut tokens = 0;
    loop {
        let mut took = false;
        for (j, p) in pending.iter().enumerate() {
            if p.job.prompt != prompt || next[j] >= p.job.seqs.len() {
                continue;
            }
            let len = p.job.seqs[next[j]].len();
            if !picks.is_empty() && tokens + len > max_batch_tokens {
                return picks;
            }
            tokens += len;
            picks.push((j, next[j]));
            next[j] += 1;
            took = true;
        }
        if !took {
            return picks;
        }
    }
}

/// Fails every job that has a text in `picks`.
fn fail_picked(pending: &mut VecDeque<Pending>, picks: &[(usize, usize)], message: &str) {
    let jobs: Vec<usize> = picks.iter().map(|&(j, _)| j).collect();
    let mut j = 0;
    pending.retain_mut(|p| {
        let keep = !jobs.contains(&j);
        j += 1;
        if !keep {
            reply_err(p, message);
        }
        keep
    });
}

/// Fails every job `which` selects.
fn fail(pending: &mut VecDeque<Pending>, which: impl Fn(&Pending) -> bool, message: &str) {
    pending.retain_mut(|p| {
        let keep = !which(p);
        if !keep {
            reply_err(p, message);
        }
        keep
    });
}

/// Sends `message` as the job's answer (the sender is taken, so this happens once).
fn reply_err(p: &mut Pending, message: &str) {
    let (dummy, _) = oneshot::channel();
    let reply = std::mem::replace(&mut p.job.reply, dummy);
    let _ = reply.send(Err(message.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(lens: &[usize], prompt: Option<usize>) -> Pending {
        let (reply, _) = oneshot::channel();
        let seqs = lens.iter().map(|&n| vec![1; n]).collect();
        Pending::new(Job { seqs, prompt, reply, enqueued: Instant::now() }, 4)
    }

    #[test]
    fn batches_take_texts_in_turn_within_the_token_budget() {
        // (jobs as (text lengths, prompt), budget, the batch taken as (job, text))
        let cases: Vec<(Vec<(Vec<usize>, Option<usize>)>, usize, Vec<(usize, usize)>)> = vec![
            // A short request is not left behind a long one.
            (vec![(vec![4, 4, 4], None), (vec![4], None)], 8, vec![(0, 0), (1, 0)]),
            (
                vec![(vec![4, 4, 4], None), (vec![4], None)],
                100,
                vec![(0, 0), (1, 0), (0, 1), (0, 2)],
            ),
            // A text over the budget still runs, alone.
            (vec![(vec![50], None), (vec![2], None)], 8, vec![(0, 0)]),
            // A batch holds one prompt: the first job's.
            (
                vec![(vec![3], Some(0)), (vec![3], None), (vec![3], Some(0))],
                100,
                vec![(0, 0), (2, 0)],
            ),
        ];
        for (jobs, budget, want) in cases {
            let queue: VecDeque<Pending> = jobs.iter().map(|(l, p)| pending(l, *p)).collect();
            let prompt = queue[0].job.prompt;
            assert_eq!(pick(&queue, prompt, budget), want, "{jobs:?} within {budget}");
        }
    }

    #[test]
    fn failures_answer_the_jobs_they_touch() {
        let mut queue = VecDeque::new();
        let mut answers = Vec::new();
        for _ in 0..3 {
            let (reply, rx) = oneshot::channel();
            queue.push_back(Pending::new(
                Job { seqs: vec![vec![1]], prompt: None, reply, enqueued: Instant::now() },
                4,
            ));
            answers.push(rx);
        }
        fail_picked(&mut queue, &[(0, 0), (2, 0)], "boom");
        assert_eq!(queue.len(), 1);
        let got: Vec<_> = answers.iter_mut().map(|rx| rx.try_recv().ok()).collect();
        assert_eq!(got, vec![Some(Err("boom".into())), None, Some(Err("boom".into()))]);
    }
}
