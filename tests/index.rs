//! The vector index on wgpu (lavapipe) against the same index on the CPU (flex) and a plain
//! sort: identical ids, scores within 1e-5, across shards, with many exact ties and k > n.
//! Components are small multiples of 1/4, so every dot product is exact in f32 on both
//! devices: any id difference is a selection bug, not rounding.
//!
//! Quantized indexes: the GPU's unpack against the CPU's scan of the same codes, and recall@10
//! against exact f32 search on 100k real sentences embedded by the shipped model, with the
//! rescoring rows read from a saved index file.

use std::path::Path;

use st5_core::index_file::{self, IndexFile};
use st5_core::model::l2_normalize_rows;
use st5_core::rng::Rng;
use st5_core::search_index::brute_force;
use st5_core::{
    Device, DeviceChoice, Embedder, Hit, LoadOptions, OpenDevice, Quantize, VectorIndex,
};
use st5_tests::{root, scratch_dir, shared_data, st5_mini, wgpu_device};

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
    let cpu = DeviceChoice::Cpu.device().unwrap();
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

/// The quantized index on wgpu (packed words unpacked on the device) and on the CPU (the host
/// scan): the same approximate scores within 1e-4, and the same rescored top 10.
#[test]
fn quantized_gpu_and_cpu_agree() {
    let Some(gpu) = wgpu_device() else { return };
    let cpu = DeviceChoice::Cpu.device().unwrap();
    let mut rng = Rng(11);
    let (n, k, oversample) = (3000, 10, 4);
    for (quantize, dim) in [
        (Quantize::Int8, 384),
        (Quantize::Int8, 37),
        (Quantize::Binary, 384),
        (Quantize::Binary, 45),
    ] {
        let mut vectors: Vec<f32> = (0..n * dim).map(|_| rng.unit() as f32 - 0.5).collect();
        l2_normalize_rows(&mut vectors, dim);
        let queries: Vec<f32> = vectors[..5 * dim].iter().map(|x| x + 0.01).collect();
        let rows = |ids: &[u32]| -> st5_core::Result<Vec<f32>> {
            Ok(ids.iter().flat_map(|&i| vectors[i as usize * dim..][..dim].to_vec()).collect())
        };
        let mut results = Vec::new();
        for device in [&cpu, &gpu] {
            let mut index = VectorIndex::with_quantize(dim, device, None, quantize)
                .unwrap()
                .with_shard_rows(1100);
            index.add(&vectors).unwrap();
            let found = index.search(&queries, k * oversample).unwrap();
            let p = quantize.packing().unwrap();
            let codes = p.encode(dim, &vectors);
            let w = p.words(dim);
            for (query, hits) in queries.chunks(dim).zip(&found) {
                assert_eq!(hits.len(), k * oversample);
                for h in hits {
                    let i = h.id as usize;
                    let want = p.score(&codes.words[i * w..(i + 1) * w], codes.scales[i], query);
                    assert!((h.score - want).abs() <= 1e-4, "{quantize} {dim}: {h:?} vs {want}");
                }
            }
            results.push(index.search_rescored(&queries, k, oversample, rows).unwrap());
        }
        assert_eq!(results[0], results[1], "{quantize} {dim}: cpu vs gpu rescored");
    }
}

/// Recall@10 of each quantized mode (default oversampling, rescored from the saved file)
/// against exact f32 search: 100,000 real sentences (scripts/index-corpus.sh) embedded by the
/// shipped st5-mini (the fast model: the embedding is not what is measured here), 200 held-out
/// sentences as queries.
#[test]
fn recall_at_10_on_100k_real_sentences() {
    let (docs, queries, k) = (100_000, 200, 10);
    let dir = scratch_dir("index-recall");
    std::fs::create_dir_all(&dir).unwrap();
    let corpus = dir.join("corpus.txt");
    let status = std::process::Command::new("bash")
        .arg(root().join("scripts/index-corpus.sh"))
        .args([(docs + queries).to_string().as_str(), corpus.to_str().unwrap()])
        .arg(shared_data())
        .status()
        .unwrap();
    assert!(status.success(), "scripts/index-corpus.sh failed");
    let texts: Vec<String> =
        std::fs::read_to_string(&corpus).unwrap().lines().map(String::from).collect();
    let cpu = DeviceChoice::Cpu.device().unwrap();
    let embedder = Embedder::load(&st5_mini(), &LoadOptions::default(), &cpu).unwrap();
    let mut e = embedder.embed(&texts).unwrap();
    l2_normalize_rows(&mut e.data, e.dim);
    let dim = e.dim;
    let (vectors, held_out) = e.data.split_at(docs * dim);
    let mut exact = VectorIndex::new(dim, &cpu, None).unwrap();
    exact.add(vectors).unwrap();
    let truth = exact.search(held_out, k).unwrap();
    // The f32 index is exact: spot-check it against the host loop (scores to summation order).
    let want = brute_force(vectors, dim, &held_out[..dim], k);
    assert_eq!(
        truth[0].iter().map(|h| h.id).collect::<Vec<_>>(),
        want.iter().map(|h| h.id).collect::<Vec<_>>()
    );
    assert!(truth[0].iter().zip(&want).all(|(a, b)| (a.score - b.score).abs() <= 1e-6));
    for (quantize, floor) in [(Quantize::Int8, 0.99), (Quantize::Binary, 0.95)] {
        let path = dir.join(format!("{quantize}.st5index"));
        index_file::write(&path, quantize, "test", dim, &texts[..docs], vectors).unwrap();
        let file = IndexFile::open(&path).unwrap();
        let mut index = VectorIndex::with_quantize(dim, &cpu, None, quantize).unwrap();
        index.add_codes(&file.codes().unwrap()).unwrap();
        let over = quantize.default_oversample();
        let got = index.search_rescored(held_out, k, over, |ids| Ok(file.rows(ids)?)).unwrap();
        let mut found = 0;
        for ((hits, want), query) in got.iter().zip(&truth).zip(held_out.chunks(dim)) {
            found += hits.iter().filter(|h| want.iter().any(|w| w.id == h.id)).count();
            // Rescoring is exact: the hits' scores are their f32 dot products (the same
            // summation order), best first.
            let dot = |id: u32| -> f32 {
                vectors[id as usize * dim..][..dim].iter().zip(query).map(|(a, b)| a * b).sum()
            };
            assert!(hits.iter().all(|h| h.score == dot(h.id)), "{quantize}: {hits:?}");
            assert!(hits.windows(2).all(|w| w[0].score >= w[1].score), "{quantize}: {hits:?}");
        }
        let recall = found as f64 / (k * queries) as f64;
        eprintln!("{quantize} (oversample {over}): recall@{k} = {recall:.4} on {docs} sentences");
        assert!(recall >= floor, "{quantize}: recall@{k} {recall:.4} < {floor}");
        std::fs::remove_file(&path).unwrap();
    }
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}
