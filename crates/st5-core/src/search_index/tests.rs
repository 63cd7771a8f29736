//! The index's tests: top-k against brute force across shards, ties and query groups, quantized
//! scores against the host's decode, rescoring, and the errors.

use burn::tensor::Device;

use super::{Hit, VectorIndex, brute_force, rank, rescore};
use crate::error::{Error, Result};
use crate::vector_codes::{Codes, Quantize};

#[test]
fn top_k_matches_brute_force_across_shards_ties_and_large_k() {
    let device = Device::flex();
    let dim = 4;
    // Rows 1, 4 and 6 are equal (a three-way tie); row 7 is the negated query.
    let vectors: Vec<f32> = [
        [0.5, 0.5, 0.5, 0.5],
        [1.0, 0.0, 0.0, 0.0],
        [0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],
        [1.0, 0.0, 0.0, 0.0],
        [0.6, 0.8, 0.0, 0.0],
        [1.0, 0.0, 0.0, 0.0],
        [-1.0, 0.0, 0.0, 0.0],
    ]
    .concat();
    let query = [1.0, 0.0, 0.0, 0.0];
    // (shard rows, k)
    let cases = [(8, 3), (3, 3), (2, 5), (1, 8), (3, 20), (8, 0), (5, 1)];
    for (rows, k) in cases {
        let mut index = VectorIndex::new(dim, &device, None).unwrap().with_shard_rows(rows);
        index.add(&vectors[..12]).unwrap(); // added in two parts, filling a partial shard
        index.add(&vectors[12..]).unwrap();
        assert_eq!((index.len(), index.shards()), (8, 8usize.div_ceil(rows)), "rows {rows}");
        let got = index.search(&query, k).unwrap();
        let want = brute_force(&vectors, dim, &query, k);
        assert_eq!(
            got[0].iter().map(|h| h.id).collect::<Vec<_>>(),
            want.iter().map(|h| h.id).collect::<Vec<_>>(),
            "rows {rows} k {k}"
        );
        for (g, w) in got[0].iter().zip(&want) {
            assert!((g.score - w.score).abs() <= 1e-6, "rows {rows} k {k}: {g:?} vs {w:?}");
        }
    }
}

/// A quantized index over random vectors: its scores equal the host's decode of the same
/// codes, each query's candidates are the true top of those scores, and rescoring orders
/// the candidates exactly as brute-force f32 over them does.
#[test]
fn quantized_scores_match_the_host_and_rescoring_is_exact() {
    let device = Device::flex();
    let mut rng = crate::rng::Rng::new(7);
    let (n, k) = (700, 5);
    // (quantize, dim, shard rows): dims that fill whole words and dims that pad them.
    let cases = [
        (Quantize::Int8, 32, 1000),
        (Quantize::Int8, 37, 300),
        (Quantize::Binary, 64, 1000),
        (Quantize::Binary, 45, 256),
    ];
    for (quantize, dim, shard_rows) in cases {
        let vectors: Vec<f32> = (0..n * dim).map(|_| rng.unit() as f32 - 0.5).collect();
        let queries: Vec<f32> = (0..3 * dim).map(|_| rng.unit() as f32 - 0.5).collect();
        let mut index = VectorIndex::with_quantize(dim, &device, None, quantize)
            .unwrap()
            .with_shard_rows(shard_rows);
        index.add(&vectors[..100 * dim]).unwrap();
        index.add(&vectors[100 * dim..]).unwrap();
        assert_eq!(index.shards(), n.div_ceil(shard_rows), "{quantize} {dim}");
        let p = quantize.packing().unwrap();
        let codes = p.encode(dim, &vectors);
        let w = p.words(dim);
        let host = |i: usize, query: &[f32]| {
            p.score(&codes.words[i * w..(i + 1) * w], codes.scales[i], query)
        };
        let oversample = 4;
        let found = index.search(&queries, k * oversample).unwrap();
        for (query, hits) in queries.chunks(dim).zip(&found) {
            // The device's candidates are the host scores' top (allowing float ties).
            let mut all: Vec<f32> = (0..n).map(|i| host(i, query)).collect();
            all.sort_by(|a, b| b.total_cmp(a));
            for (hit, want) in hits.iter().zip(&all) {
                let got = host(hit.id as usize, query);
                assert!((hit.score - got).abs() <= 1e-4, "{quantize} {dim}: {hit:?} vs {got}");
                assert!((hit.score - want).abs() <= 1e-4, "{quantize} {dim}: {hit:?} vs {want}");
            }
            let ids: Vec<u32> = hits.iter().map(|h| h.id).collect();
            let rows: Vec<f32> =
                ids.iter().flat_map(|&i| vectors[i as usize * dim..][..dim].to_vec()).collect();
            let got = rescore(query, &ids, &rows, k).unwrap();
            let mut want: Vec<Hit> = ids
                .iter()
                .map(|&i| Hit {
                    id: i,
                    score: vectors[i as usize * dim..][..dim]
                        .iter()
                        .zip(query)
                        .map(|(a, b)| a * b)
                        .sum(),
                })
                .collect();
            rank(&mut want, k);
            assert_eq!(got, want, "{quantize} {dim}");
        }
        // search_rescored reads the candidates' rows and gives the same answer.
        let rescored = index
            .search_rescored(&queries, k, oversample, |ids| {
                Ok(ids.iter().flat_map(|&i| vectors[i as usize * dim..][..dim].to_vec()).collect())
            })
            .unwrap();
        for ((query, hits), found) in queries.chunks(dim).zip(&rescored).zip(&found) {
            let ids: Vec<u32> = found.iter().map(|h| h.id).collect();
            let rows: Vec<f32> =
                ids.iter().flat_map(|&i| vectors[i as usize * dim..][..dim].to_vec()).collect();
            assert_eq!(hits, &rescore(query, &ids, &rows, k).unwrap(), "{quantize} {dim}");
        }
        // Codes come back as they went in, and a second index built from them agrees.
        let back = futures_lite_block(index.codes_async()).unwrap();
        assert_eq!(back, codes, "{quantize} {dim}");
        let mut restored = VectorIndex::with_quantize(dim, &device, None, quantize).unwrap();
        restored.add_codes(&back).unwrap();
        assert_eq!(restored.search(&queries, k).unwrap(), index.search(&queries, k).unwrap());
    }
}

/// Drives a future that completes without waiting (flex reads back synchronously).
fn futures_lite_block<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let waker = std::task::Waker::noop();
    match f.as_mut().poll(&mut std::task::Context::from_waker(waker)) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => panic!("flex read back asynchronously"),
    }
}

#[test]
fn codes_of_the_wrong_size_or_kind_are_errors() {
    let device = Device::flex();
    let mut int8 = VectorIndex::with_quantize(8, &device, None, Quantize::Int8).unwrap();
    let bad = [
        Codes { words: vec![0; 3], scales: vec![1.0] }, // 2 words a vector
        Codes { words: vec![0; 2], scales: vec![f32::NAN] },
        Codes { words: vec![0; 2], scales: vec![-1.0] },
    ];
    for codes in bad {
        assert!(int8.add_codes(&codes).is_err(), "{codes:?}");
    }
    assert_eq!(int8.len(), 0);
    let mut dense = VectorIndex::new(8, &device, None).unwrap();
    assert!(dense.add_codes(&Codes { words: vec![0; 2], scales: vec![1.0] }).is_err());
    // Refused by kind, empty or not.
    assert!(futures_lite_block(int8.vectors_async()).is_err());
    assert!(futures_lite_block(dense.codes_async()).is_err());
    int8.add(&[0.5; 8]).unwrap();
    dense.add(&[0.5; 8]).unwrap();
    assert!(futures_lite_block(int8.vectors_async()).is_err());
    assert!(futures_lite_block(dense.codes_async()).is_err());
    assert!(futures_lite_block(int8.codes_async()).is_ok());
    assert!(futures_lite_block(dense.vectors_async()).is_ok());
    // Oversampling by 0 would search nothing.
    let none = |_: &[u32]| -> Result<Vec<f32>> { Ok(vec![0.5; 8]) };
    assert!(int8.search_rescored(&[1.0; 8], 1, 0, none).is_err());
    assert_eq!(int8.search_rescored(&[1.0; 8], 1, 1, none).unwrap()[0].len(), 1);
}

#[test]
fn rescore_refuses_rows_that_do_not_match_the_candidates() {
    let cases: [(&[f32], &[u32], &[f32]); 3] = [
        (&[], &[0], &[]),                           // an empty query
        (&[1.0, 0.0], &[0, 1], &[1.0, 0.0]),        // one row for two ids
        (&[1.0, 0.0], &[0], &[1.0, 0.0, 0.0, 1.0]), // two rows for one id
    ];
    for (query, ids, rows) in cases {
        assert!(rescore(query, ids, rows, 1).is_err(), "{query:?} {ids:?} {rows:?}");
    }
    let hits = rescore(&[1.0, 0.0], &[7, 3], &[0.5, 0.0, 0.5, 1.0], 2).unwrap();
    assert_eq!(hits, [Hit { id: 3, score: 0.5 }, Hit { id: 7, score: 0.5 }]);
}

#[test]
fn queries_are_searched_in_groups_whose_scores_fit_one_buffer() {
    // Under a 160-byte limit, a shard holds 10 f32 rows of width 4 (4 queries' scores fill a
    // buffer: 3 groups of the 9 queries) or 40 rows of codes (1 query's: 9 groups). The
    // answers are those of one unbounded search.
    let device = Device::flex();
    let mut rng = crate::rng::Rng::new(3);
    let dim = 4;
    let vectors: Vec<f32> = (0..80 * dim).map(|_| rng.unit() as f32 - 0.5).collect();
    let queries: Vec<f32> = (0..9 * dim).map(|_| rng.unit() as f32 - 0.5).collect();
    for quantize in Quantize::ALL {
        let mut bounded = VectorIndex::with_quantize(dim, &device, Some(160), quantize).unwrap();
        let mut free = VectorIndex::with_quantize(dim, &device, None, quantize).unwrap();
        bounded.add(&vectors).unwrap();
        free.add(&vectors).unwrap();
        let groups = if quantize == Quantize::None { 3 } else { 9 };
        assert_eq!(bounded.query_groups(&queries).unwrap().count(), groups, "{quantize}");
        assert_eq!(free.query_groups(&queries).unwrap().count(), 1, "{quantize}");
        // The same ids; f32 scores to the last bit of the matrix product's summation order,
        // which depends on how many queries share it.
        let (a, b) = (bounded.search(&queries, 5).unwrap(), free.search(&queries, 5).unwrap());
        for (a, b) in a.iter().flatten().zip(b.iter().flatten()) {
            assert!(a.id == b.id && (a.score - b.score).abs() <= 1e-6, "{quantize}: {a:?} {b:?}");
        }
        assert_eq!(a.iter().flatten().count(), 9 * 5);
    }
}

#[test]
fn bad_shapes_are_errors() {
    let device = Device::flex();
    let mut index = VectorIndex::new(3, &device, None).unwrap();
    assert!(index.add(&[1.0, 2.0]).is_err());
    assert!(index.add(&[1.0, f32::NAN, 0.0]).is_err());
    assert!(index.search(&[1.0], 1).is_err());
    assert!(index.search(&[1.0, f32::NAN, 0.0], 1).is_err());
    assert!(index.search(&[1.0, 0.0, 0.0], 3).unwrap()[0].is_empty());
    assert!(matches!(VectorIndex::new(3, &device, Some(8)), Err(Error::Limit { .. })));
    assert!(VectorIndex::new(0, &device, None).is_err());
}
