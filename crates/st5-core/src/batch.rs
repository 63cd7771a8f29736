//! Batching on the host: length-bucketed batch plans, results put back in input order, and the
//! two layouts a batch takes on the device: padded to its longest text (a GPU's, [`pad`]), or
//! packed without padding (the CPU's, [`Packing`]).

/// Splits indices `0..lengths.len()` into batches of at most `batch_size`, grouping similar
/// lengths (sorted by length, longest first, ties in input order). A batch whose longest text
/// has `n` tokens holds at most `max_rows(n)` texts (at least one), so that no device buffer
/// outgrows the device's limits.
pub fn plan_batches(
    lengths: &[usize],
    batch_size: usize,
    max_rows: impl Fn(usize) -> usize,
) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
    let mut batches = Vec::new();
    let mut rest = order.as_slice();
    while let Some(&first) = rest.first() {
        // Sorted longest first: the first text's length bounds the whole batch.
        let take = batch_size.min(max_rows(lengths[first])).clamp(1, rest.len());
        batches.push(rest[..take].to_vec());
        rest = &rest[take..];
    }
    batches
}

/// `count` sequences of `len` rows each, one after another at rows `start..start + count * len`
/// of a packed batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub start: usize,
    pub len: usize,
    pub count: usize,
}

impl Run {
    /// The run's rows in the packed batch.
    pub fn rows(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.len * self.count
    }
}

/// A batch without padding: its sequences one after another as the rows of one `[1, total, d]`
/// matrix, longest first (ties in input order), so that every row-wise step (the embeddings,
/// each Linear, the norms, the activations, int8's row quantizer) runs once over all of them,
/// and attention and pooling run per [`Run`] of equal lengths, each sequence at its own length.
/// No padding token is computed, and a sequence's rows meet only its own rows, so its vector is
/// the same bits whatever it is batched with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packing {
    pub runs: Vec<Run>,
    /// `order[j]`: the input index of the `j`-th packed sequence.
    pub order: Vec<usize>,
}

impl Packing {
    /// The packing of sequences of `lengths` tokens, in input order.
    pub fn new(lengths: &[usize]) -> Self {
        let mut order: Vec<usize> = (0..lengths.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
        let mut runs: Vec<Run> = Vec::new();
        let mut start = 0;
        for &i in &order {
            let len = lengths[i];
            match runs.last_mut() {
                Some(run) if run.len == len => run.count += 1,
                _ => runs.push(Run { start, len, count: 1 }),
            }
            start += len;
        }
        Self { runs, order }
    }

    /// Rows over all sequences.
    pub fn total(&self) -> usize {
        self.runs.iter().map(|r| r.len * r.count).sum()
    }

    /// The same sequences, each `p` rows longer (a soft prompt before every text).
    pub fn lengthened(&self, p: usize) -> Self {
        let mut start = 0;
        let runs = self
            .runs
            .iter()
            .map(|r| {
                let run = Run { start, len: r.len + p, count: r.count };
                start += run.len * run.count;
                run
            })
            .collect();
        Self { runs, order: self.order.clone() }
    }

    /// `inverse()[i]`: where input sequence `i` sits among the packed ones; `None` when the
    /// packing kept the input order.
    pub fn inverse(&self) -> Option<Vec<usize>> {
        if self.order.iter().enumerate().all(|(j, &i)| i == j) {
            return None;
        }
        let mut inverse = vec![0; self.order.len()];
        for (j, &i) in self.order.iter().enumerate() {
            inverse[i] = j;
        }
        Some(inverse)
    }
}

/// A padded batch in host memory: ids `[batch, seq]` and mask `[batch, seq]` (1.0 token, 0.0 pad).
#[derive(Debug, Clone, PartialEq)]
pub struct PaddedBatch {
    pub ids: Vec<i32>,
    pub mask: Vec<f32>,
    pub batch: usize,
    pub seq: usize,
}

/// Pads `seqs` on the right with `pad_id` to the longest one.
pub fn pad(seqs: &[&[u32]], pad_id: u32) -> PaddedBatch {
    let seq = seqs.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
    let mut ids = Vec::with_capacity(seqs.len() * seq);
    let mut mask = Vec::with_capacity(seqs.len() * seq);
    for s in seqs {
        ids.extend(s.iter().map(|&t| t as i32));
        ids.extend(std::iter::repeat_n(pad_id as i32, seq - s.len()));
        mask.extend(std::iter::repeat_n(1.0, s.len()));
        mask.extend(std::iter::repeat_n(0.0, seq - s.len()));
    }
    PaddedBatch { ids, mask, batch: seqs.len(), seq }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_cover_every_index_once_grouped_by_length() {
        // (lengths, batch size, rows allowed per batch as a function of its longest text, want)
        let unlimited = |_: usize| usize::MAX;
        let budget = |n: usize| 12 / n; // e.g. a 12-token buffer limit
        let cases: [(&[usize], usize, &dyn Fn(usize) -> usize, &[&[usize]]); 8] = [
            (&[], 4, &unlimited, &[]),
            (&[3], 4, &unlimited, &[&[0]]),
            (&[1, 5, 3, 5, 2], 2, &unlimited, &[&[1, 3], &[2, 4], &[0]]),
            (&[2, 2, 2], 1, &unlimited, &[&[0], &[1], &[2]]),
            (&[4, 1, 9], 0, &unlimited, &[&[2], &[0], &[1]]),
            (&[6, 6, 6, 2, 2, 2, 2, 2, 2, 2], 8, &budget, &[&[0, 1], &[2, 3], &[4, 5, 6, 7, 8, 9]]),
            (&[20, 1], 8, &budget, &[&[0], &[1]]),
            (&[3, 3, 3], 8, &|_| 0, &[&[0], &[1], &[2]]),
        ];
        for (lengths, bs, max_rows, want) in cases {
            let got = plan_batches(lengths, bs, max_rows);
            let want: Vec<Vec<usize>> = want.iter().map(|b| b.to_vec()).collect();
            assert_eq!(got, want, "lengths {lengths:?} batch {bs}");
        }
    }

    #[test]
    fn packing_sorts_longest_first_in_runs_of_equal_length() {
        // (lengths, runs as (start, len, count), order)
        let cases: [(&[usize], &[(usize, usize, usize)], &[usize]); 5] = [
            (&[], &[], &[]),
            (&[4], &[(0, 4, 1)], &[0]),
            (&[2, 5, 2, 5, 3], &[(0, 5, 2), (10, 3, 1), (13, 2, 2)], &[1, 3, 4, 0, 2]),
            (&[1, 1, 1], &[(0, 1, 3)], &[0, 1, 2]),
            (&[3, 7], &[(0, 7, 1), (7, 3, 1)], &[1, 0]),
        ];
        for (lengths, runs, order) in cases {
            let p = Packing::new(lengths);
            let got: Vec<_> = p.runs.iter().map(|r| (r.start, r.len, r.count)).collect();
            assert_eq!((got.as_slice(), p.order.as_slice()), (runs, order), "{lengths:?}");
            assert_eq!(p.total(), lengths.iter().sum::<usize>());
            // The inverse puts every packed sequence back where it came from.
            let inverse = p.inverse().unwrap_or_else(|| (0..lengths.len()).collect());
            for (i, &j) in inverse.iter().enumerate() {
                assert_eq!(p.order[j], i);
            }
        }
        let p = Packing::new(&[3, 3, 1]);
        assert_eq!(p.inverse(), None);
        let longer = p.lengthened(2);
        assert_eq!(
            longer.runs,
            vec![Run { start: 0, len: 5, count: 2 }, Run { start: 10, len: 3, count: 1 }]
        );
        assert_eq!((longer.total(), longer.runs[1].rows()), (13, 10..13));
    }

    #[test]
    fn padding_masks_the_tail() {
        let b = pad(&[&[5, 6, 1], &[1]], 0);
        assert_eq!((b.batch, b.seq), (2, 3));
        assert_eq!(b.ids, vec![5, 6, 1, 1, 0, 0]);
        assert_eq!(b.mask, vec![1.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
        let empty = pad(&[], 0);
        assert_eq!((empty.batch, empty.ids.len()), (0, 0));
    }
}
