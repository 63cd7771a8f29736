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

/// The signal prompt training follows: the contrastive loss on prompted embeddings, and its
/// gradient with respect to the prompt alone (the model frozen), equal PyTorch's
/// (make_prompt_fixture.py) within 1e-5 relative to the gradient's largest value.
#[test]
fn prompt_gradient_matches_pytorch() {
    use burn::module::Module;
    use st5_trainer::loss::ContrastiveLoss;
    let exp: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("prompt/expected.json")).unwrap())
            .unwrap();
    let t = &exp["training"];
    let prompt: Vec<Vec<f32>> = serde_json::from_value(exp["prompt"].clone()).unwrap();
    let (p, d) = (prompt.len(), prompt[0].len());
    let ids: Vec<Vec<u32>> = serde_json::from_value(exp["input_ids"].clone()).unwrap();
    let seqs: Vec<&[u32]> = ids[..8].iter().map(Vec::as_slice).collect();
    let device = Device::flex().autodiff();
    let options = LoadOptions { variant: Some(Variant::EncMean), ..LoadOptions::default() };
    let e = Embedder::load(&fixture("st-enc-mean-relu"), &options, &device).unwrap();
    let model = e.model().clone().no_grad();
    let prompt_t =
        Tensor::<2>::from_data(TensorData::new(prompt.concat(), [p, d]), &device).require_grad();
    let (ids_t, mask) = e.batch_tensors(&seqs);
    let emb = model.forward_with_prompt(ids_t, mask, Some(prompt_t.clone()));
    let loss = ContrastiveLoss {
        temperature: t["temperature"].as_f64().unwrap() as f32,
        symmetric: false,
    }
    .forward(emb.clone().slice([0..4]), emb.slice([4..8]), None);
    let value: f32 = loss.clone().into_data().try_to_vec::<f32>().unwrap()[0];
    let want_loss = t["loss"].as_f64().unwrap() as f32;
    assert!(
        (value - want_loss).abs() <= 1e-5 * want_loss.abs().max(1.0),
        "loss {value} vs {want_loss}"
    );
    let grads = loss.backward();
    let got: Vec<f32> = prompt_t.grad(&grads).unwrap().into_data().try_to_vec().unwrap();
    let want: Vec<Vec<f32>> = serde_json::from_value(t["prompt_grad"].clone()).unwrap();
    let want = want.concat();
    let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
    let err = max_abs_diff(&got, &want);
    assert!(err <= 1e-5 * scale, "prompt gradient: max abs error {err:e} (largest value {scale})");
}

/// The prompt file the reference script wrote (make_prompt_fixture.py: the prompt above, its
/// base named by a weights fingerprint computed in Python) is accepted for its model, so the
/// fingerprints agree; applied through the CLI's `--prompt` and the library's
/// `Embedder::set_prompt`, the fixture's texts embed as PyTorch's within [`TOL`]. Another
/// model, a damaged file and a different pooling are refused with the file's name.
#[test]
fn prompt_file_from_python_applies_in_the_library_and_the_cli() {
    use st5_core::fingerprint::weights_fingerprint;
    use st5_core::prompt::Prompt;
    let exp: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("prompt/expected.json")).unwrap())
            .unwrap();
    let texts: Vec<String> = serde_json::from_value(exp["texts"].clone()).unwrap();
    let want: Vec<Vec<f32>> =
        serde_json::from_value(exp["embeddings"]["enc-mean"].clone()).unwrap();
    let model = fixture("st-enc-mean-relu");
    let path = fixture("prompt/enc-mean.safetensors");
    let prompt = Prompt::from_bytes(&std::fs::read(&path).unwrap(), &path).unwrap();
    let fingerprint = weights_fingerprint(&st5_core::Dir(model.clone())).unwrap();
    assert_eq!(prompt.meta.base_fingerprint, fingerprint, "Python and st5 fingerprint apart");

    let mut e = Embedder::load(&model, &LoadOptions::default(), &Device::flex()).unwrap();
    e.set_prompt(Some((&prompt, &path)), &fingerprint).unwrap();
    let got = e.embed(&texts).unwrap();
    let err = max_abs_diff(&got.data, &want.concat());
    assert!(err <= TOL, "library: max abs error {err:e}");

    let scratch = scratch_dir("prompt-cli");
    std::fs::create_dir_all(&scratch).unwrap();
    let input = scratch.join("texts.txt");
    // The CLI reads a text a line: the fixture's texts that hold no newline.
    let one_line: Vec<usize> = (0..texts.len()).filter(|&i| !texts[i].contains('\n')).collect();
    let lines: Vec<&str> = one_line.iter().map(|&i| texts[i].as_str()).collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let st5 = |model: &std::path::Path, prompt: &std::path::Path, extra: &[&str]| {
        let out = std::process::Command::new(workspace_bin("st5"))
            .args(["embed", "--model"])
            .arg(model)
            .arg("--prompt")
            .arg(prompt)
            .arg("--input")
            .arg(&input)
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, stdout, stderr) = st5(&model, &path, &[]);
    assert!(ok, "{stderr}");
    let rows: Vec<f32> = stdout
        .lines()
        .flat_map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let row: Vec<f32> =
                serde_json::from_value(v.get("embedding").unwrap_or(&v).clone()).unwrap();
            row
        })
        .collect();
    let want_cli: Vec<f32> = one_line.iter().flat_map(|&i| want[i].clone()).collect();
    let err = max_abs_diff(&rows, &want_cli);
    assert!(err <= TOL, "st5 embed --prompt: max abs error {err:e}");

    // (model, prompt file, extra flags, words the error must hold)
    let mut damaged = std::fs::read(&path).unwrap();
    let n = damaged.len();
    damaged.truncate(n - 5);
    let cut = scratch.join("cut.safetensors");
    std::fs::write(&cut, damaged).unwrap();
    let tokenizer = fixture("st-enc-mean-relu/tokenizer.json").display().to_string();
    let cases: [(std::path::PathBuf, &std::path::PathBuf, Vec<&str>, &str); 3] = [
        (fixture("st-enc-first-gated-f16"), &path, vec!["--tokenizer", &tokenizer], "made for"),
        (model.clone(), &cut, vec![], "cut.safetensors"),
        (model.clone(), &path, vec!["--variant", "enc-first"], "trained with enc-mean pooling"),
    ];
    for (m, p, extra, words) in cases {
        let (ok, _, stderr) = st5(&m, p, &extra);
        assert!(!ok && stderr.contains(words), "{}: {stderr}", p.display());
    }
}

/// The shipped Banking77 prompt (models/prompts/) is made for st5-mini: the CLI applies it to
/// models/st5-mini and it changes the embeddings; the built-in default (a BERT model, other
/// weights) refuses it, naming the file, instead of embedding with a prompt it was not tuned for.
#[test]
fn the_shipped_prompt_fits_st5_mini_only() {
    let prompt = st5_tests::root().join("models/prompts/banking77-st5-mini.safetensors");
    let embed = |args: &[&std::ffi::OsStr]| {
        let mut child = std::process::Command::new(workspace_bin("st5"))
            .arg("embed")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"I am still waiting on my card?\n").unwrap();
        child.wait_with_output().unwrap()
    };
    let mini = st5_mini();
    let prompted =
        embed(&["--model".as_ref(), mini.as_os_str(), "--prompt".as_ref(), prompt.as_os_str()]);
    let plain = embed(&["--model".as_ref(), mini.as_os_str()]);
    for out in [&prompted, &plain] {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_ne!(prompted.stdout, plain.stdout, "the prompt changed nothing");
    let built_in = embed(&["--prompt".as_ref(), prompt.as_os_str()]);
    let stderr = String::from_utf8_lossy(&built_in.stderr);
    assert!(!built_in.status.success(), "the built-in model took st5-mini's prompt");
    // A Sentence-T5 default refuses it as made for another model; the BERT default (no soft
    // prompts at all) for its family. Either way the error names the prompt file.
    let why = stderr.contains("made for") || stderr.contains("soft prompts run on T5 models only");
    assert!(why && stderr.contains("banking77-st5-mini"), "{stderr}");
}
