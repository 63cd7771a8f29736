//! Length-bucketed batching: texts are grouped by token count so that padding stays small (or,
//! on the CPU, absent), and results are put back in input order.

/// Which texts may share a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// Texts of nearby lengths, padded to the longest: a GPU's way, fewer and larger dispatches.
    /// Padding changes the reductions' lengths, so a text's vector agrees with its vector alone to
    /// rounding only.
    Padded,
    /// Only texts of one token count: no padding token is computed, and every step of the CPU's
    /// forward pass works on rows of the text's own length, so a text's vector is the same bits
    /// whatever it is batched with (the CPU's way).
    SameLength,
}

/// Splits indices `0..lengths.len()` into batches of at most `batch_size`, grouping similar
/// lengths (sorted by length, longest first, ties in input order), or equal lengths only under
/// [`Grouping::SameLength`]. A batch whose longest text has `n` tokens holds at most
/// `max_rows(n)` texts (at least one), so that no device buffer outgrows the device's limits.
pub fn plan_batches(
    lengths: &[usize],
    batch_size: usize,
    max_rows: impl Fn(usize) -> usize,
    grouping: Grouping,
) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
    let mut batches = Vec::new();
    let mut rest = order.as_slice();
    while let Some(&first) = rest.first() {
        let n = lengths[first];
        // Sorted longest first: the first text's length bounds the whole batch.
        let same = match grouping {
            Grouping::Padded => rest.len(),
            Grouping::SameLength => rest.iter().take_while(|&&i| lengths[i] == n).count(),
        };
        let take = batch_size.min(max_rows(n)).min(same).clamp(1, rest.len());
        batches.push(rest[..take].to_vec());
        rest = &rest[take..];
    }
    batches
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
            let got = plan_batches(lengths, bs, max_rows, Grouping::Padded);
            let want: Vec<Vec<usize>> = want.iter().map(|b| b.to_vec()).collect();
            assert_eq!(got, want, "lengths {lengths:?} batch {bs}");
        }
    }

    #[test]
    fn same_length_batches_never_mix_lengths() {
        // (lengths, batch size, rows allowed per batch, want)
        let unlimited = |_: usize| usize::MAX;
        let budget = |n: usize| 12 / n;
        let cases: [(&[usize], usize, &dyn Fn(usize) -> usize, &[&[usize]]); 6] = [
            (&[], 4, &unlimited, &[]),
            (&[3], 4, &unlimited, &[&[0]]),
            (&[1, 5, 3, 5, 2], 8, &unlimited, &[&[1, 3], &[2], &[4], &[0]]),
            (&[2, 2, 2, 2, 2], 2, &unlimited, &[&[0, 1], &[2, 3], &[4]]),
            (
                &[6, 6, 6, 2, 2, 2, 2, 2, 2, 2],
                8,
                &budget,
                &[&[0, 1], &[2], &[3, 4, 5, 6, 7, 8], &[9]],
            ),
            (&[3, 3, 3], 8, &|_| 0, &[&[0], &[1], &[2]]),
        ];
        for (lengths, bs, max_rows, want) in cases {
            let got = plan_batches(lengths, bs, max_rows, Grouping::SameLength);
            let want: Vec<Vec<usize>> = want.iter().map(|b| b.to_vec()).collect();
            assert_eq!(got, want, "lengths {lengths:?} batch {bs}");
        }
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
