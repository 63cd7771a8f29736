//! Training examples: `(anchor, positive[, negative])` from JSON Lines or TSV; evaluation test
//! sentences dropped; and the batch sampler: each batch from one dataset (chosen by weight),
//! without a repeated text, in a seeded order whose position is part of a checkpoint.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::config::{DataFormat, DatasetConfig};
use crate::error::{Error, Result};

/// One training example. A distillation example has only an anchor (the text); its positive is
/// empty and its target is the dataset's row [`Dataset::rows`]`[i]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    pub anchor: String,
    pub positive: String,
    pub negative: Option<String>,
    /// The dataset's `group` column: examples of one group never share a batch.
    pub group: Option<String>,
}

/// A dataset after filtering, with how many examples were dropped and why.
#[derive(Debug)]
pub struct Dataset {
    pub name: String,
    pub examples: Vec<Example>,
    pub dropped_eval_overlap: usize,
    pub weight: f64,
    /// Teacher embeddings (distillation): `[examples, dim]` row-major, row i for example i.
    pub targets: Option<(Vec<f32>, usize)>,
}

/// Lower-cased, punctuation and extra spaces removed: the form in which training texts are
/// compared with evaluation sentences.
pub fn normalize(s: &str) -> String {
    s.chars()
        .filter(|c| {
            !c.is_ascii_punctuation() && !matches!(c, '“' | '”' | '‘' | '’' | '–' | '—' | '…')
        })
        .collect::<String>()
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every sentence of the evaluation test splits (STS12–16, STS-B test, SICK test, SST-2 test,
/// TREC test, MRPC test) under `data`, normalised.
pub fn eval_sentences(data: &std::path::Path) -> Result<HashSet<String>> {
    use st5_eval::data as d;
    let mut out = HashSet::new();
    let mut pairs = Vec::new();
    for year in ["sts12", "sts13", "sts14", "sts15", "sts16"] {
        for (_, set) in d::sts_year(&data.join(year))?.0 {
            pairs.extend(set);
        }
    }
    pairs.extend(d::sts_benchmark(&data.join("stsbenchmark/sts-test.csv"))?);
    pairs.extend(d::sick(&data.join("sick/SICK_test_annotated.txt"))?);
    for p in pairs {
        out.insert(normalize(&p.a));
        out.insert(normalize(&p.b));
    }
    for l in d::sst2(&data.join("sst2/sentiment-test"))?
        .into_iter()
        .chain(d::trec(&data.join("trec/TREC_10.label"))?)
    {
        out.insert(normalize(&l.text));
    }
    for p in d::mrpc(&data.join("mrpc/msr_paraphrase_test.txt"))? {
        out.insert(normalize(&p.a));
        out.insert(normalize(&p.b));
    }
    out.remove("");
    Ok(out)
}

/// The examples of a dataset file's text (JSON Lines, or TSV with a header), `cfg.columns` in
/// order; errors name `cfg.path` and the line.
pub fn parse_examples(text: &str, cfg: &DatasetConfig) -> Result<Vec<Example>> {
    let path = &cfg.path;
    let format = cfg.format.unwrap_or(if path.extension().is_some_and(|e| e == "tsv") {
        DataFormat::Tsv
    } else {
        DataFormat::Jsonl
    });
    let bad = |line: usize, message: String| Error::Data { path: path.clone(), line, message };
    let mut examples = Vec::new();
    let mut lines =
        text.lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim().is_empty());
    let tsv_columns: Option<Vec<usize>> = match format {
        DataFormat::Tsv => {
            let (n, header) = lines
                .next()
                .ok_or_else(|| bad(1, "empty file (a TSV needs a header line)".into()))?;
            let names: Vec<&str> = header.split('\t').collect();
            Some(
                cfg.columns
                    .iter()
                    .chain(&cfg.group)
                    .map(|c| {
                        names.iter().position(|h| h == c).ok_or_else(|| {
                            bad(n, format!("no column `{c}` in the header ({})", names.join(", ")))
                        })
                    })
                    .collect::<Result<_>>()?,
            )
        }
        DataFormat::Jsonl => None,
    };
    for (n, line) in lines {
        let fields: Vec<String> = match &tsv_columns {
            Some(cols) => {
                let cells: Vec<&str> = line.split('\t').collect();
                cols.iter()
                    .map(|&c| {
                        cells.get(c).map(|s| s.to_string()).ok_or_else(|| {
                            bad(n, format!("{} cells, column {c} wanted", cells.len()))
                        })
                    })
                    .collect::<Result<_>>()?
            }
            None => {
                let v: serde_json::Value =
                    serde_json::from_str(line).map_err(|e| bad(n, format!("invalid JSON: {e}")))?;
                cfg.columns
                    .iter()
                    .chain(&cfg.group)
                    .map(|c| {
                        v.get(c)
                            .and_then(|x| x.as_str())
                            .map(str::to_string)
                            .ok_or_else(|| bad(n, format!("no string field `{c}`")))
                    })
                    .collect::<Result<_>>()?
            }
        };
        let mut fields = fields;
        let group = if cfg.group.is_some() { fields.pop() } else { None };
        let mut f = fields.into_iter();
        let (anchor, positive, negative) =
            (f.next().unwrap_or_default(), f.next().unwrap_or_default(), f.next());
        examples.push(Example { anchor, positive, negative, group });
    }
    Ok(examples)
}

/// Reads a dataset and drops every example with a text in `exclude` (normalised).
pub fn load(cfg: &DatasetConfig, exclude: &HashSet<String>) -> Result<Dataset> {
    let path = &cfg.path;
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut examples = parse_examples(&text, cfg)?;
    let mut targets =
        match &cfg.targets {
            None => None,
            Some(t) => {
                let bytes = std::fs::read(t).map_err(|e| Error::io(t, e))?;
                let (v, rows, dim) = st5_format::npy::read_f32(&bytes)
                    .map_err(|m| Error::Data { path: t.clone(), line: 0, message: m })?;
                if rows != examples.len() {
                    return Err(Error::Data {
                        path: t.clone(),
                        line: 0,
                        message: format!(
                            "{rows} teacher vectors for the {} examples of {}",
                            examples.len(),
                            path.display()
                        ),
                    });
                }
                Some((v, dim))
            }
        };
    let before = examples.len();
    let keep: Vec<bool> = examples
        .iter()
        .map(|e| {
            ![Some(&e.anchor), Some(&e.positive), e.negative.as_ref()]
                .into_iter()
                .flatten()
                .any(|t| exclude.contains(&normalize(t)))
        })
        .collect();
    if let Some((v, dim)) = targets.as_mut() {
        let dim = *dim;
        *v = v
            .chunks(dim)
            .zip(&keep)
            .filter(|(_, k)| **k)
            .flat_map(|(r, _)| r.iter().copied())
            .collect();
    }
    let mut k = keep.iter();
    examples.retain(|_| *k.next().unwrap_or(&false));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Dataset {
        name,
        dropped_eval_overlap: before - examples.len(),
        examples,
        weight: cfg.weight,
        targets,
    })
}

pub use st5_format::rng::Rng;

/// Where the sampler stands: everything needed to continue exactly after a restart.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SamplerState {
    pub rng: Rng,
    /// Per dataset: its current shuffled order and the next position in it.
    pub orders: Vec<Vec<u32>>,
    pub positions: Vec<usize>,
    pub epochs: Vec<usize>,
}

/// Batches of examples, each from a single dataset, with no text twice in a batch and no two
/// examples of one group (a dataset's `group` column).
pub struct Sampler<'a> {
    datasets: &'a [Dataset],
    pub state: SamplerState,
}

impl<'a> Sampler<'a> {
    pub fn new(datasets: &'a [Dataset], seed: u64) -> Self {
        let mut rng = Rng(seed);
        let orders = datasets
            .iter()
            .map(|d| {
                let mut o: Vec<u32> = (0..d.examples.len() as u32).collect();
                rng.shuffle(&mut o);
                o
            })
            .collect();
        let n = datasets.len();
        Self {
            datasets,
            state: SamplerState { rng, orders, positions: vec![0; n], epochs: vec![0; n] },
        }
    }

    /// Continues from `state` (a checkpoint's), which must fit `datasets`: one order per
    /// dataset, each a permutation of its examples, and positions within them.
    pub fn resume(
        datasets: &'a [Dataset],
        state: SamplerState,
    ) -> std::result::Result<Self, String> {
        let n = datasets.len();
        let lens = [state.orders.len(), state.positions.len(), state.epochs.len()];
        if lens != [n; 3] {
            return Err(format!(
                "the sampler state has {lens:?} orders, positions and epochs for {n} datasets"
            ));
        }
        for (i, (d, order)) in datasets.iter().zip(&state.orders).enumerate() {
            let mut seen = vec![false; d.examples.len()];
            let permutation = order.len() == seen.len()
                && order.iter().all(|&j| {
                    seen.get_mut(j as usize).is_some_and(|s| !std::mem::replace(s, true))
                });
            if !permutation || state.positions[i] > order.len() {
                return Err(format!(
                    "the sampler state of dataset {i} does not fit its {} examples",
                    d.examples.len()
                ));
            }
        }
        Ok(Self { datasets, state })
    }

    /// The next batch of up to `size` examples (fewer only if a dataset has fewer distinct
    /// texts or groups): a dataset drawn by weight, then its examples in order, skipping any that
    /// would repeat a text or a group already in the batch (they stay for a later batch): an
    /// in-batch negative is then never a text of the anchor's own kind.
    pub fn next_batch(&mut self, size: usize) -> (usize, Vec<usize>) {
        let total: f64 =
            self.datasets.iter().filter(|d| !d.examples.is_empty()).map(|d| d.weight).sum();
        let mut r = self.state.rng.unit() * total;
        let mut k = 0;
        for (i, d) in self.datasets.iter().enumerate() {
            if d.examples.is_empty() {
                continue;
            }
            k = i;
            if r < d.weight {
                break;
            }
            r -= d.weight;
        }
        let d = &self.datasets[k];
        let mut seen: HashSet<&str> = HashSet::new();
        let mut groups: HashSet<&str> = HashSet::new();
        let mut batch = Vec::with_capacity(size);
        let mut deferred = Vec::new();
        // At most one pass over the dataset per batch.
        for _ in 0..d.examples.len() {
            if batch.len() == size {
                break;
            }
            if self.state.positions[k] == self.state.orders[k].len() {
                self.state.positions[k] = 0;
                self.state.epochs[k] += 1;
                self.state.rng.shuffle(&mut self.state.orders[k]);
            }
            let idx = self.state.orders[k][self.state.positions[k]];
            self.state.positions[k] += 1;
            let e = &d.examples[idx as usize];
            // (A distillation example's empty positive is no text.)
            let texts: Vec<&str> =
                [Some(e.anchor.as_str()), Some(e.positive.as_str()), e.negative.as_deref()]
                    .into_iter()
                    .flatten()
                    .filter(|t| !t.is_empty())
                    .collect();
            if texts.iter().any(|t| seen.contains(t))
                || e.group.as_deref().is_some_and(|g| groups.contains(g))
            {
                deferred.push(idx);
                continue;
            }
            seen.extend(texts);
            groups.extend(e.group.as_deref());
            batch.push(idx as usize);
        }
        // Deferred examples go back just ahead of the current position, in order.
        let pos = self.state.positions[k];
        let order = &mut self.state.orders[k];
        let tail: Vec<u32> = order.drain(pos..).collect();
        let mut head: Vec<u32> = order.drain(..pos).filter(|i| !deferred.contains(i)).collect();
        self.state.positions[k] = head.len();
        head.extend(deferred);
        head.extend(tail);
        *order = head;
        (k, batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(pairs: &[(&str, &str)], weight: f64) -> Dataset {
        let examples = pairs
            .iter()
            .map(|(a, p)| Example {
                anchor: a.to_string(),
                positive: p.to_string(),
                negative: None,
                group: None,
            })
            .collect();
        Dataset { name: "d".into(), examples, dropped_eval_overlap: 0, weight, targets: None }
    }

    #[test]
    fn normalisation() {
        let cases = [
            ("A man, playing!", "a man playing"),
            ("  Two   dogs.  ", "two dogs"),
            ("“Quoted” — text…", "quoted text"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(input), want, "{input:?}");
        }
    }

    #[test]
    fn batches_hold_no_repeated_text_and_cover_the_data() {
        let data =
            [ds(&[("a", "b"), ("a", "c"), ("d", "e"), ("f", "g"), ("h", "b"), ("i", "j")], 1.0)];
        let mut s = Sampler::new(&data, 7);
        let mut seen = Vec::new();
        for _ in 0..6 {
            let (k, batch) = s.next_batch(3);
            let batch: Vec<&Example> = batch.iter().map(|&i| &data[k].examples[i]).collect();
            let texts: Vec<&str> =
                batch.iter().flat_map(|e| [e.anchor.as_str(), e.positive.as_str()]).collect();
            let unique: HashSet<&str> = texts.iter().copied().collect();
            assert_eq!(unique.len(), texts.len(), "repeated text in {texts:?}");
            seen.extend(batch.iter().map(|e| (e.anchor.clone(), e.positive.clone())));
        }
        let distinct: HashSet<_> = seen.iter().collect();
        assert_eq!(distinct.len(), 6, "every example is eventually used");
    }

    #[test]
    fn examples_of_one_group_never_share_a_batch() {
        // A JSONL file with a `group` column: 12 examples in 4 groups.
        let text: String = (0..12)
            .map(|i| format!("{{\"a\": \"q{i}\", \"p\": \"r{i}\", \"intent\": \"g{}\"}}\n", i % 4))
            .collect();
        let cfg: DatasetConfig =
            toml::from_str("path = 'x.jsonl'\ncolumns = ['a', 'p']\ngroup = 'intent'").unwrap();
        let examples = parse_examples(&text, &cfg).unwrap();
        assert_eq!(examples[5].group.as_deref(), Some("g1"));
        let missing = text.replace("\"intent\": \"g3\"", "\"other\": 1");
        let err = parse_examples(&missing, &cfg).unwrap_err().to_string();
        assert!(err.contains("x.jsonl:4") && err.contains("`intent`"), "{err}");
        let data = [Dataset {
            name: "x".into(),
            examples,
            dropped_eval_overlap: 0,
            weight: 1.0,
            targets: None,
        }];
        let mut s = Sampler::new(&data, 5);
        let mut used = HashSet::new();
        for _ in 0..9 {
            let (_, batch) = s.next_batch(3);
            let groups: HashSet<_> =
                batch.iter().map(|&i| data[0].examples[i].group.clone()).collect();
            assert_eq!((batch.len(), groups.len()), (3, 3), "{batch:?}");
            used.extend(batch);
        }
        assert_eq!(used.len(), 12, "every example is eventually used");
        // More groups asked for than exist: the batch stops at one per group.
        assert_eq!(s.next_batch(6).1.len(), 4);
    }

    #[test]
    fn resumed_sampler_continues_identically() {
        let data = [
            ds(&[("a", "b"), ("c", "d"), ("e", "f"), ("g", "h")], 1.0),
            ds(&[("1", "2"), ("3", "4"), ("5", "6")], 3.0),
        ];
        let mut a = Sampler::new(&data, 3);
        for _ in 0..5 {
            a.next_batch(2);
        }
        let saved = serde_json::to_string(&a.state).unwrap();
        let mut b = Sampler::resume(&data, serde_json::from_str(&saved).unwrap()).unwrap();
        for _ in 0..10 {
            let (ka, ba) = a.next_batch(2);
            let (kb, bb) = b.next_batch(2);
            assert_eq!((ka, ba), (kb, bb));
        }
    }

    #[test]
    fn a_state_that_does_not_fit_the_datasets_is_refused() {
        let data = [ds(&[("a", "b"), ("c", "d")], 1.0), ds(&[("1", "2")], 1.0)];
        let good = Sampler::new(&data, 1).state;
        let edit = |f: &dyn Fn(&mut SamplerState)| {
            let mut s = good.clone();
            f(&mut s);
            Sampler::resume(&data, s).err().unwrap_or_default()
        };
        let cases: [(&str, &dyn Fn(&mut SamplerState), &str); 5] = [
            ("an order too few", &|s| drop(s.orders.pop()), "for 2 datasets"),
            ("an index past the end", &|s| s.orders[1] = vec![7], "its 1 examples"),
            ("an index twice", &|s| s.orders[0] = vec![0, 0], "its 2 examples"),
            ("a position past the end", &|s| s.positions[0] = 3, "its 2 examples"),
            ("an epoch too many", &|s| s.epochs.push(0), "for 2 datasets"),
        ];
        for (name, f, want) in cases {
            let err = edit(f);
            assert!(err.contains(want), "{name}: {err:?}");
        }
        assert!(Sampler::resume(&data, good).is_ok());
    }

    #[test]
    fn weights_choose_datasets_in_proportion() {
        let data = [ds(&[("a", "b"), ("c", "d")], 1.0), ds(&[("1", "2"), ("3", "4")], 3.0)];
        let mut s = Sampler::new(&data, 11);
        let second = (0..4000).filter(|_| s.next_batch(2).0 == 1).count();
        assert!((2800..3200).contains(&second), "{second} of 4000 from the weight-3 dataset");
    }
}
