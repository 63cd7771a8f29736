//! One text, one vector: on the CPU a text's embedding is a function of the text, the model and
//! the compute mode alone. Random texts (empty, duplicated, at the model's maximum length, of
//! mixed lengths) embedded in random batches (sizes 1-64, shuffled) and at 1, 2 and 4 threads
//! equal each text embedded alone, bit for bit, for T5, BERT and MPNet in f32 and int8 compute.

use std::path::{Path, PathBuf};

use st5_core::save::convert;
use st5_core::{
    Compute, Device, DeviceChoice, Dir, Embedder, LoadOptions, OpenDevice, WeightDtype,
};
use st5_format::rng::Rng;
use st5_tests::*;

/// `(label, model directory)`: each family in f32 (fixtures) and in int8 compute (the shipped
/// int8 models, and the MPNet fixture quantized here).
fn models() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> =
        ["st-enc-mean-relu", "hf-t5-gated-bf16-sharded", "st-bert-gelu", "st-mpnet"]
            .iter()
            .map(|m| (format!("{m} (f32)"), fixture(m)))
            .collect();
    for m in ["all-minilm-l6-v2", "st5-small"] {
        out.push((format!("models/{m} (int8)"), root().join("models").join(m)));
    }
    let mpnet_int8 = scratch_dir("invariance-mpnet-int8");
    let mpnet = fixture("st-mpnet");
    let tokenizer = (!mpnet.join("tokenizer.json").exists()).then(tokenizer_json);
    convert(&Dir(mpnet), tokenizer.as_deref(), WeightDtype::Int8, &mpnet_int8, None).unwrap();
    out.push(("st-mpnet (int8)".into(), mpnet_int8));
    out
}

fn load(dir: &Path, device: &Device, batch_size: usize) -> Embedder {
    let options = LoadOptions {
        tokenizer: (!dir.join("tokenizer.json").exists()).then(tokenizer_json),
        batch_size,
        compute: Compute::Auto,
        ..LoadOptions::default()
    };
    Embedder::load(dir, &options, device).unwrap()
}

/// Texts of mixed lengths from the fixtures' words: empty ones, duplicates and ones past any
/// model's window (truncated to its maximum length).
fn texts(rng: &mut Rng) -> Vec<String> {
    let words: Vec<String> = expected("st-bert-gelu")
        .sentences
        .iter()
        .flat_map(|s| s.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    let mut out = vec![String::new(), "word ".repeat(600)];
    for _ in 0..40 {
        let n = [1, 3, 8, 20, 60][rng.below(5)];
        let n = 1 + rng.below(n);
        out.push(
            (0..n).map(|_| words[rng.below(words.len())].as_str()).collect::<Vec<_>>().join(" "),
        );
    }
    for _ in 0..6 {
        let i = rng.below(out.len());
        out.push(out[i].clone());
    }
    out
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_texts_vector_is_the_same_bits_whatever_its_batch_and_threads() {
    let device = DeviceChoice::Cpu.device().unwrap();
    let mut rng = Rng::new(57);
    for (label, dir) in models() {
        let texts = texts(&mut rng);
        let mut e = load(&dir, &device, 1);
        let alone: Vec<Vec<u32>> =
            texts.iter().map(|t| bits(e.embed(&[t]).unwrap().row(0))).collect();
        for threads in [1, 2, 4] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            for _ in 0..3 {
                let batch_size = 1 + rng.below(64);
                let mut order: Vec<usize> = (0..texts.len()).collect();
                rng.shuffle(&mut order);
                let shuffled: Vec<&str> = order.iter().map(|&i| texts[i].as_str()).collect();
                e.set_batch_size(batch_size);
                let got = pool.install(|| e.embed(&shuffled).unwrap());
                for (k, &i) in order.iter().enumerate() {
                    let differ =
                        bits(got.row(k)).iter().zip(&alone[i]).filter(|(a, b)| a != b).count();
                    assert_eq!(
                        differ,
                        0,
                        "{label}, {threads} threads, batch size {batch_size}: text {i} ({:?}...) \
                         at position {k} differs from its vector alone in {differ} of {} values",
                        texts[i].chars().take(40).collect::<String>(),
                        alone[i].len()
                    );
                }
            }
        }
    }
}
