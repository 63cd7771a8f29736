//! Length-bucketed batching: texts are grouped by token count so that padding stays small, and
//! results are put back in input order.

/// Splits indices `0..lengths.len()` into batches of at most `batch_size`, grouping similar
/// lengths (sorted by length, longest first, ties in input order).
pub fn plan_batches(lengths: &[usize], batch_size: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
    order.chunks(batch_size.max(1)).map(<[usize]>::to_vec).collect()
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
        let cases: [(&[usize], usize, &[&[usize]]); 5] = [
            (&[], 4, &[]),
            (&[3], 4, &[&[0]]),
            (&[1, 5, 3, 5, 2], 2, &[&[1, 3], &[2, 4], &[0]]),
            (&[2, 2, 2], 1, &[&[0], &[1], &[2]]),
            (&[4, 1, 9], 0, &[&[2], &[0], &[1]]),
        ];
        for (lengths, bs, want) in cases {
            let got = plan_batches(lengths, bs);
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
