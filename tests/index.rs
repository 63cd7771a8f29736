//! The vector index on wgpu (lavapipe) against the same index on the CPU (flex) and a plain
//! sort: identical ids, scores within 1e-5, across shards, with many exact ties and k > n.
//! Components are small multiples of 1/4, so every dot product is exact in f32 on both
//! devices: any id difference is a selection bug, not rounding.

use st5_core::index::brute_force;
use st5_core::rng::Rng;
use st5_core::{Backend, Device, Hit, VectorIndex};
use st5_tests::wgpu_device;

/// One of -2/4 … 2/4.
fn quarter(rng: &mut Rng) -> f32 {
    (rng.next_u64() % 5) as f32 / 4.0 - 0.5
}

fn search(
    device: &Device,
    vectors: &[f32],
    dim: usize,
    shard_rows: usize,
    queries: &[f32],
    k: usize,
) -> Vec<Vec<Hit>> {
    let mut index = VectorIndex::new(dim, device, None).unwrap().with_shard_rows(shard_rows);
    // Added in uneven parts, so that shards are filled across calls.
    let (a, b) = vectors.split_at((vectors.len() / dim / 3) * dim);
    index.add(a).unwrap();
    index.add(b).unwrap();
    assert_eq!(index.shards(), (vectors.len() / dim).div_ceil(shard_rows));
    index.search(queries, k).unwrap()
}

#[test]
fn gpu_and_cpu_top_k_agree_with_a_sort() {
    let dim = 24;
    let n = 1500;
    let mut rng = Rng(7);
    let mut vectors: Vec<f32> = (0..n * dim).map(|_| quarter(&mut rng)).collect();
    // Exact duplicates: rows 10..20 repeat rows 0..10, so every query meets ties.
    let (head, tail) = vectors.split_at_mut(10 * dim);
    tail[..10 * dim].copy_from_slice(head);
    let queries: Vec<f32> =
        (0..3 * dim).map(|_| quarter(&mut rng)).chain(vectors[..dim].iter().copied()).collect();
    let cpu = Backend::Cpu.device().unwrap();
    let gpu = wgpu_device();
    // (rows per shard, k): one shard, several, a partial last shard, k = 1, k > n; shards of
    // more than k blocks (256 rows) take the block-max path, smaller ones are read whole.
    for (shard_rows, k) in
        [(n, 1), (n, 3), (1000, 2), (n, 10), (400, 10), (256, 1), (700, n + 50), (1000, 64)]
    {
        let on_cpu = search(&cpu, &vectors, dim, shard_rows, &queries, k);
        for (qi, query) in queries.chunks(dim).enumerate() {
            let want = brute_force(&vectors, dim, query, k);
            let got = &on_cpu[qi];
            assert_eq!(got.len(), k.min(n), "cpu, shard {shard_rows}, k {k}, query {qi}");
            assert_eq!(got, &want, "cpu, shard {shard_rows}, k {k}, query {qi}");
        }
        if let Some(gpu) = &gpu {
            let on_gpu = search(gpu, &vectors, dim, shard_rows, &queries, k);
            // One query at a time takes the GPU's matrix-vector path.
            let alone: Vec<Vec<Hit>> = queries
                .chunks(dim)
                .map(|q| search(gpu, &vectors, dim, shard_rows, q, k).remove(0))
                .collect();
            for (qi, hits) in alone.iter().enumerate() {
                assert_eq!(
                    hits, &on_cpu[qi],
                    "gpu single query vs cpu, shard {shard_rows}, k {k}, query {qi}"
                );
            }
            for qi in 0..queries.len() / dim {
                let ids = |h: &[Hit]| h.iter().map(|h| h.id).collect::<Vec<_>>();
                assert_eq!(
                    ids(&on_gpu[qi]),
                    ids(&on_cpu[qi]),
                    "gpu vs cpu ids, shard {shard_rows}, k {k}, query {qi}"
                );
                let err = on_gpu[qi]
                    .iter()
                    .zip(&on_cpu[qi])
                    .map(|(a, b)| (a.score - b.score).abs())
                    .fold(0.0, f32::max);
                assert!(err <= 1e-5, "gpu vs cpu scores differ by {err:e}");
            }
        }
    }
    // The query equal to row 0 finds rows 0 and 10 (its duplicate) first, in id order.
    let top = &search(&cpu, &vectors, dim, n, &vectors[..dim], 2)[0];
    assert_eq!(top.iter().map(|h| h.id).collect::<Vec<_>>(), [0, 10]);
}
