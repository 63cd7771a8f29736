//! Soft prompts (Lester et al. 2021) in the forward pass: the fixture model with P prompt vectors
//! before each text equals transformers' T5EncoderModel on `inputs_embeds`
//! (tests/reference/make_prompt_fixture.py) within [`TOL`], for enc-mean (the prompt attended to
//! but not pooled) and enc-first (the text's first token), on flex and on wgpu.

use burn::tensor::{Tensor, TensorData};
use serde_json::Value;
use st5_core::{Device, Embedder, LoadOptions, Variant};
use st5_tests::*;

#[test]
fn prompted_embeddings_match_the_reference() {
    let exp: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("prompt/expected.json")).unwrap())
            .unwrap();
    let prompt: Vec<Vec<f32>> = serde_json::from_value(exp["prompt"].clone()).unwrap();
    let (p, d) = (prompt.len(), prompt[0].len());
    let ids: Vec<Vec<u32>> = serde_json::from_value(exp["input_ids"].clone()).unwrap();
    let seqs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
    let mut devices = vec![Device::flex()];
    devices.extend(wgpu_device());
    for device in &devices {
        for variant in [Variant::EncMean, Variant::EncFirst] {
            let options = LoadOptions { variant: Some(variant), ..LoadOptions::default() };
            let e =
                Embedder::load(&fixture(exp["model"].as_str().unwrap()), &options, device).unwrap();
            let (ids_t, mask) = e.batch_tensors(&seqs);
            let prompt_t = Tensor::<2>::from_data(TensorData::new(prompt.concat(), [p, d]), device);
            let got: Vec<f32> = e
                .model()
                .forward_with_prompt(ids_t, mask, Some(prompt_t))
                .into_data()
                .try_to_vec()
                .unwrap();
            let want: Vec<Vec<f32>> =
                serde_json::from_value(exp["embeddings"][variant.name()].clone()).unwrap();
            let err = max_abs_diff(&got, &want.concat());
            assert!(err <= TOL, "{variant} on {device:?}: max abs error {err:e}");
            // Without the prompt the same texts embed differently: the prompt takes part.
            let (ids_t, mask) = e.batch_tensors(&seqs);
            let plain: Vec<f32> = e.model().forward(ids_t, mask).into_data().try_to_vec().unwrap();
            assert!(max_abs_diff(&plain, &got) > 1e-3, "{variant}: the prompt changed nothing");
        }
    }
}
