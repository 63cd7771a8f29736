//! Golden parity against the Python reference (`tests/reference/make_fixtures.py`): token ids,
//! embeddings for every fixture and variant, and for the shipped `models/st5-small` and
//! `models/st5-mini` (`<name>-expected.json`), on flex and wgpu (max abs error ≤ 1e-5), batch
//! invariance, and the typed errors for broken model directories.

use st5_core::tokenizer::T5Tokenizer;
use st5_core::{
    Compute, Device, DeviceChoice, Embedder, Error, LoadOptions, OpenDevice, Variant, WeightDtype,
};
use st5_format::Error as FormatError;
use st5_tests::*;

fn options(model: &str, variant: Option<Variant>, batch_size: usize) -> LoadOptions {
    dir_options(&fixture(model), variant, batch_size)
}

fn dir_options(dir: &std::path::Path, variant: Option<Variant>, batch_size: usize) -> LoadOptions {
    LoadOptions {
        variant,
        tokenizer: (!dir.join("tokenizer.json").exists()).then(tokenizer_json),
        max_seq_length: None,
        batch_size,
        max_buffer_bytes: None,
        // The shipped models are int8: parity with the reference (computed in f32 on their
        // dequantized weights) is the f32 computation's; their int8 computation is checked
        // against it in tests/quant.rs. The fixtures are f32, f16 and bf16, which compute in f32
        // either way.
        compute: Compute::F32,
    }
}

#[test]
fn tokenizer_ids_equal_transformers() {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("tokenizer_ids.json")).unwrap()).unwrap();
    let sentences: Vec<&str> =
        v["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let cases = v["ids"].as_object().unwrap();
    assert_eq!(cases.len(), 3);
    for (max_len, ids) in cases {
        let tok = T5Tokenizer::from_file(&tokenizer_json(), max_len.parse().unwrap()).unwrap();
        let got = tok.encode_batch(&sentences).unwrap();
        for (i, (g, want)) in got.iter().zip(ids.as_array().unwrap()).enumerate() {
            let want: Vec<u32> =
                want.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
            assert_eq!(g, &want, "max_len {max_len}, sentence {i}: {:?}", sentences[i]);
        }
    }
}

/// Every fixture and variant, and the shipped models, against the reference on one device;
/// returns the worst error.
fn check_parity(device: &Device, label: &str) -> f32 {
    let mut cases: Vec<_> =
        MODELS.iter().map(|m| (m.to_string(), fixture(m), expected(m))).collect();
    cases.extend(SHIPPED.iter().map(|m| {
        let exp = expected_file(&fixture(&format!("{m}-expected.json")));
        (format!("models/{m}"), root().join("models").join(m), exp)
    }));
    let mut worst = 0.0f32;
    for (model, dir, exp) in cases {
        for (variant, want) in &exp.embeddings {
            let variant: Variant = variant.parse().unwrap();
            let e = Embedder::load(&dir, &dir_options(&dir, Some(variant), 4), device).unwrap();
            assert_eq!(e.tokenizer().max_len(), exp.max_seq_length, "{model}: max_seq_length");
            let ids = e
                .tokenizer()
                .encode_batch(&exp.sentences.iter().map(String::as_str).collect::<Vec<_>>())
                .unwrap();
            assert_eq!(ids, exp.input_ids, "{model}: token ids");
            let got = e.embed(&exp.sentences).unwrap();
            assert_eq!(
                (got.len(), got.dim),
                (want.len(), want[0].len()),
                "{model} {variant}: shape"
            );
            let err = want
                .iter()
                .enumerate()
                .map(|(i, w)| max_abs_diff(got.row(i), w))
                .fold(0.0, f32::max);
            println!("parity {label} {model} {variant}: max abs error {err:.2e}");
            assert!(err <= TOL, "{model} {variant} on {label}: max abs error {err:e} > {TOL:e}");
            worst = worst.max(err);
        }
    }
    worst
}

#[test]
fn parity_cpu() {
    println!("worst cpu error {:.2e}", check_parity(&DeviceChoice::Cpu.device().unwrap(), "cpu"));
}

#[test]
fn parity_wgpu() {
    if let Some(device) = wgpu_device() {
        println!("worst wgpu error {:.2e}", check_parity(&device, "wgpu"));
    }
}

/// Each sentence alone must equal the same sentence padded in a batch beside longer ones.
fn check_batch_invariance(device: &Device, label: &str) {
    for model in MODELS {
        let exp = expected(model);
        for (variant, _) in &exp.embeddings {
            let variant: Variant = variant.parse().unwrap();
            let mut e = Embedder::load(&fixture(model), &options(model, Some(variant), 64), device)
                .unwrap();
            let batched = e.embed(&exp.sentences).unwrap();
            e.set_batch_size(1);
            for (i, s) in exp.sentences.iter().enumerate() {
                let alone = e.embed(&[s]).unwrap();
                let err = max_abs_diff(alone.row(0), batched.row(i));
                assert!(
                    err <= TOL,
                    "{model} {variant} on {label}, sentence {i}: alone vs batched differ by {err:e}"
                );
            }
        }
    }
}

#[test]
fn batch_invariance_cpu() {
    check_batch_invariance(&DeviceChoice::Cpu.device().unwrap(), "cpu");
}

#[test]
fn batch_invariance_wgpu() {
    if let Some(device) = wgpu_device() {
        check_batch_invariance(&device, "wgpu");
    }
}

/// A device buffer limit splits batches so that no activation outgrows it, without changing a
/// single embedding; a weight or a text that cannot fit is a typed error naming it.
#[test]
fn buffer_limit_splits_batches_and_names_what_cannot_fit() {
    let device = DeviceChoice::Cpu.device().unwrap();
    let model = "st-enc-mean-relu";
    // Long texts (max length raised to 512) so that activations, not weights, hit the limit.
    let mut texts: Vec<String> =
        [300, 260, 200, 150, 90, 40].iter().map(|&n| "word ".repeat(n)).collect();
    texts.extend(expected(model).sentences);
    let opts = |limit| LoadOptions {
        max_seq_length: Some(512),
        max_buffer_bytes: limit,
        ..options(model, None, 64)
    };
    let free = Embedder::load(&fixture(model), &opts(None), &device).unwrap();
    let want = free.embed(&texts).unwrap();
    let cfg = free.layout().config.clone();
    let lens: Vec<usize> = free
        .tokenizer()
        .encode_batch(&texts.iter().map(String::as_str).collect::<Vec<_>>())
        .unwrap()
        .iter()
        .map(Vec::len)
        .collect();
    // Room for exactly two texts of the longest length per buffer.
    let limit = 2 * cfg.activation_bytes_per_text(lens[0]);
    assert!(limit >= cfg.largest_weight().1, "the weights must fit for this test");
    let capped = Embedder::load(&fixture(model), &opts(Some(limit)), &device).unwrap();
    let plan = capped.plan(&texts).unwrap();
    assert!(plan.len() > 2, "the limit should split the batch: {plan:?}");
    for batch in &plan {
        let seq = batch.iter().map(|&i| lens[i]).max().unwrap();
        let need = batch.len() as u64 * cfg.activation_bytes_per_text(seq);
        assert!(need <= limit, "batch {batch:?} needs {need} bytes > {limit}");
    }
    let got = capped.embed(&texts).unwrap();
    let err = (0..texts.len()).map(|i| max_abs_diff(got.row(i), want.row(i))).fold(0.0, f32::max);
    assert!(err <= TOL, "split batches changed embeddings by {err:e}");

    let msg = Embedder::load(&fixture(model), &opts(Some(1024)), &device)
        .err()
        .expect("weights over the limit")
        .to_string();
    assert!(msg.contains("shared.weight") && msg.contains("1024"), "{msg}");
    let e = Embedder::load(&fixture(model), &opts(Some(cfg.largest_weight().1)), &device).unwrap();
    match e.embed(&["short", texts[0].as_str()]) {
        Err(Error::Limit { what, .. }) => assert!(what.starts_with("text 1"), "{what}"),
        other => panic!("expected a limit error for text 1, got {other:?}"),
    }
}

#[test]
fn empty_input_gives_empty_output() {
    let e = Embedder::load(
        &fixture("st-enc-mean-relu"),
        &LoadOptions::default(),
        &DeviceChoice::Cpu.device().unwrap(),
    )
    .unwrap();
    let out = e.embed::<&str>(&[]).unwrap();
    assert_eq!((out.len(), out.dim), (0, 12));
}

fn load_err(dir: &std::path::Path, opts: &LoadOptions) -> Error {
    match Embedder::load(dir, opts, &DeviceChoice::Cpu.device().unwrap()) {
        Ok(_) => panic!("{} loaded, expected an error", dir.display()),
        Err(e) => e,
    }
}

#[test]
fn broken_directories_give_errors_naming_the_culprit() {
    let tok = LoadOptions { tokenizer: Some(tokenizer_json()), ..LoadOptions::default() };

    let missing = fixture("no-such-model");
    let msg = load_err(&missing, &tok).to_string();
    assert!(msg.contains("no-such-model") && msg.contains("not found"), "{msg}");

    // Truncated safetensors: the file is named.
    let dir = scratch_copy("st-enc-mean-relu", "truncated");
    let st = dir.join("model.safetensors");
    let bytes = std::fs::read(&st).unwrap();
    std::fs::write(&st, &bytes[..bytes.len() / 2]).unwrap();
    let err = load_err(&dir, &tok);
    assert!(
        matches!(err, Error::Format(FormatError::Safetensors { .. }))
            && err.to_string().contains("model.safetensors"),
        "{err}"
    );

    // A config that disagrees with the weights: every mis-shaped tensor is named.
    let dir = scratch_copy("st-enc-mean-relu", "shape");
    let cfg = dir.join("config.json");
    let text = std::fs::read_to_string(&cfg).unwrap().replace("\"d_ff\": 40", "\"d_ff\": 41");
    std::fs::write(&cfg, text).unwrap();
    let msg = load_err(&dir, &tok).to_string();
    assert!(
        msg.contains("encoder.block.0.layer.1.DenseReluDense.wi.weight") && msg.contains("[41, 8]"),
        "{msg}"
    );
    assert!(msg.contains("encoder.block.1.layer.1.DenseReluDense.wo.weight"), "{msg}");

    // Missing tensors are named, all of them.
    let dir = scratch_copy("st-enc-mean-relu", "layers");
    let cfg = dir.join("config.json");
    let text =
        std::fs::read_to_string(&cfg).unwrap().replace("\"num_layers\": 2", "\"num_layers\": 3");
    std::fs::write(&cfg, text).unwrap();
    let msg = load_err(&dir, &tok).to_string();
    assert!(
        msg.contains("missing tensor `encoder.block.2.layer.0.SelfAttention.q.weight`"),
        "{msg}"
    );

    // An unsupported config value names the file and the key.
    let dir = scratch_copy("st-enc-mean-relu", "ffproj");
    let cfg = dir.join("config.json");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("\"feed_forward_proj\": \"relu\"", "\"feed_forward_proj\": \"gated-tanh\"");
    std::fs::write(&cfg, text).unwrap();
    let err = load_err(&dir, &tok);
    assert!(
        matches!(err, Error::Format(FormatError::Config { .. }))
            && err.to_string().contains("config.json")
            && err.to_string().contains("feed_forward_proj"),
        "{err}"
    );

    // No config.json at all.
    let dir = scratch_copy("st-enc-mean-relu", "noconfig");
    std::fs::remove_file(dir.join("config.json")).unwrap();
    assert!(load_err(&dir, &tok).to_string().contains("no config.json"));

    // A Dense stored only as a PyTorch pickle: refused by name.
    let dir = scratch_copy("st-enc-mean-relu", "densebin");
    std::fs::rename(dir.join("2_Dense/model.safetensors"), dir.join("2_Dense/pytorch_model.bin"))
        .unwrap();
    let msg = load_err(&dir, &tok).to_string();
    assert!(msg.contains("2_Dense/pytorch_model.bin") && msg.contains("safetensors"), "{msg}");

    // encdec-first on an encoder-only checkpoint says the decoder is missing.
    let opts = LoadOptions { variant: Some(Variant::EncDecFirst), ..tok.clone() };
    let msg = load_err(&fixture("st-enc-mean-relu"), &opts).to_string();
    assert!(msg.contains("encdec-first") && msg.contains("decoder"), "{msg}");

    // A model without a tokenizer and no override.
    let msg = load_err(&fixture("st-enc-first-gated-f16"), &LoadOptions::default()).to_string();
    assert!(msg.contains("tokenizer.json"), "{msg}");

    for tag in ["truncated", "shape", "layers", "ffproj", "noconfig", "densebin"] {
        let _ = std::fs::remove_dir_all(
            std::env::temp_dir().join(format!("st5-test-{tag}-{}", std::process::id())),
        );
    }
}

#[test]
fn unused_tensors_are_reported_by_name() {
    let device = DeviceChoice::Cpu.device().unwrap();
    let opts = |v| LoadOptions {
        variant: Some(v),
        tokenizer: Some(tokenizer_json()),
        ..LoadOptions::default()
    };
    // enc-mean on a full, untied T5: the decoder (its own embed_tokens included) and the LM head
    // are left over; the encoder's tensors and the `shared` alias are not.
    let e = Embedder::load(&fixture("hf-t5-gated-bf16-sharded"), &opts(Variant::EncMean), &device)
        .unwrap();
    let unused = &e.report().unused;
    assert!(unused.iter().any(|n| n == "lm_head.weight"), "{unused:?}");
    assert!(
        unused.iter().any(|n| n == "decoder.block.2.layer.2.DenseReluDense.wo.weight"),
        "{unused:?}"
    );
    assert!(unused.iter().any(|n| n == "decoder.embed_tokens.weight"), "{unused:?}");
    assert!(
        !unused.iter().any(|n| n == "shared.weight" || n.starts_with("encoder.")),
        "{unused:?}"
    );
    // encdec-first uses everything but the LM head.
    let e =
        Embedder::load(&fixture("hf-t5-gated-bf16-sharded"), &opts(Variant::EncDecFirst), &device)
            .unwrap();
    assert_eq!(e.report().unused, vec!["lm_head.weight".to_string()]);
}

/// The sentence-transformers 2.x layout of published checkpoints (sentence-t5-base):
/// `sentence_transformers.models.*` module types, the Transformer in `0_Transformer/`, boolean
/// pooling flags and `max_seq_length` in `sentence_bert_config.json`. Rewritten from a fixture,
/// it must give the same embeddings.
#[test]
fn legacy_sentence_transformers_layout_loads_the_same() {
    let dir = scratch_copy("st-enc-mean-relu", "legacy");
    let t = dir.join("0_Transformer");
    std::fs::create_dir_all(&t).unwrap();
    for f in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "sentence_bert_config.json",
    ] {
        std::fs::rename(dir.join(f), t.join(f)).unwrap();
    }
    std::fs::write(t.join("tokenizer_config.json"), r#"{"model_max_length": 512}"#).unwrap();
    std::fs::write(
        t.join("sentence_bert_config.json"),
        r#"{"max_seq_length": 16, "do_lower_case": false}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("modules.json"),
        r#"[{"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
            {"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"}]"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("1_Pooling/config.json"),
        r#"{"word_embedding_dimension": 8, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true,
            "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false}"#,
    )
    .unwrap();
    std::fs::write(dir.join("2_Dense/config.json"), r#"{"in_features": 8, "out_features": 12, "bias": false, "activation_function": "torch.nn.modules.linear.Identity"}"#).unwrap();
    let device = DeviceChoice::Cpu.device().unwrap();
    let e = Embedder::load(&dir, &LoadOptions::default(), &device).unwrap();
    assert_eq!((e.variant(), e.tokenizer().max_len()), (Variant::EncMean, 16));
    let exp = expected("st-enc-mean-relu");
    let got = e.embed(&exp.sentences).unwrap();
    let err = exp.embeddings[0]
        .1
        .iter()
        .enumerate()
        .map(|(i, w)| max_abs_diff(got.row(i), w))
        .fold(0.0, f32::max);
    assert!(err <= TOL, "legacy layout: max abs error {err:e}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Files held in memory (as a browser upload gives them) load exactly like the directory, and
/// a missing file is named by its in-memory path.
#[test]
fn in_memory_files_load_like_the_directory() {
    let device = DeviceChoice::Cpu.device().unwrap();
    for model in ["st-enc-mean-relu", "hf-t5-gated-bf16-sharded"] {
        let mut files = st5_core::MemoryFiles::from_dir(&fixture(model)).unwrap();
        if !files.files.contains_key("tokenizer.json") {
            files.insert("tokenizer.json", std::fs::read(tokenizer_json()).unwrap());
        }
        let opts = LoadOptions { batch_size: 4, ..LoadOptions::default() };
        let from_memory = Embedder::load_from(&files, &opts, &device).unwrap();
        let exp = expected(model);
        let got = from_memory.embed(&exp.sentences).unwrap();
        let want = &exp.embeddings.iter().find(|(v, _)| v == "enc-mean").unwrap().1;
        let err =
            want.iter().enumerate().map(|(i, w)| max_abs_diff(got.row(i), w)).fold(0.0, f32::max);
        assert!(err <= TOL, "{model} from memory: max abs error {err:e}");
    }
    let mut files = st5_core::MemoryFiles::from_dir(&fixture("hf-t5-gated-bf16-sharded")).unwrap();
    files.insert("tokenizer.json", std::fs::read(tokenizer_json()).unwrap());
    files.files.remove("model-00002-of-00005.safetensors");
    let msg = match Embedder::load_from(&files, &LoadOptions::default(), &device) {
        Ok(_) => panic!("loaded without a shard"),
        Err(e) => e.to_string(),
    };
    assert!(msg.contains("model-00002-of-00005.safetensors") && msg.contains("memory:"), "{msg}");
}

fn opts_clone<'a>(o: &st5_core::save::SaveOptions<'a>) -> st5_core::save::SaveOptions<'a> {
    st5_core::save::SaveOptions {
        config: o.config.clone(),
        tokenizer_json: o.tokenizer_json,
        max_seq_length: o.max_seq_length,
        readme: o.readme.clone(),
        extra: o.extra.clone(),
        dtype: o.dtype,
        input_absmax: o.input_absmax,
    }
}

/// A model saved as a sentence-transformers directory loads back (through the ordinary loader)
/// with identical embeddings, for every family and pooling, Dense activations included; a failed
/// save keeps the old directory.
#[test]
fn saved_model_loads_back_identically() {
    use st5_core::layout::DenseActivation::{Identity, Tanh};
    use st5_core::save::{SaveOptions, save_sentence_transformers};
    use st5_core::{HeadConfig, ModelConfig, SentenceModel};
    let device = DeviceChoice::Cpu.device().unwrap();
    let texts = [
        "A man is playing a guitar.",
        "",
        "Zwei Hunde spielen im Schnee, und ein dritter schaut zu.",
    ];
    // (fixture whose config and tokenizer the random model takes, pooling, Dense activation)
    let cases = [
        ("st-enc-mean-relu", Variant::EncMean, Identity),
        ("st-enc-mean-relu", Variant::EncFirst, Identity),
        ("st-bert-gelu", Variant::Max, Tanh),
        ("st-mpnet", Variant::MeanSqrtLen, Identity),
    ];
    for (fixture_name, variant, act) in cases {
        let src = fixture(fixture_name);
        let config_json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(src.join("config.json")).unwrap()).unwrap();
        let cfg_path = src.join("config.json");
        let cfg = ModelConfig::from_slice(&std::fs::read(&cfg_path).unwrap(), &cfg_path).unwrap();
        let tokenizer_json = std::fs::read(src.join("tokenizer.json")).unwrap();
        let head = HeadConfig {
            variant,
            dense: vec![(cfg.d_model(), 6, act == Tanh, act)],
            normalize: true,
        };
        let model = SentenceModel::init(&cfg, &head, &device);
        let dir = scratch_dir(&format!("saved-{fixture_name}-{variant}"));
        let opts = SaveOptions {
            config: config_json.clone(),
            tokenizer_json: &tokenizer_json,
            max_seq_length: 32,
            readme: Some("# test\n".into()),
            extra: vec![],
            dtype: WeightDtype::F32,
            input_absmax: None,
        };
        save_sentence_transformers(&model, &dir, &opts).unwrap();
        let loaded = Embedder::load(&dir, &LoadOptions::default(), &device).unwrap();
        assert_eq!(
            (loaded.variant(), loaded.dim(), loaded.tokenizer().max_len()),
            (variant, 6, 32)
        );
        assert!(loaded.report().unused.is_empty(), "unused: {:?}", loaded.report().unused);
        let got = loaded.embed(&texts).unwrap();
        let ids = loaded.tokenizer().encode_batch(&texts).unwrap();
        for (i, t) in ids.iter().enumerate() {
            let e = Embedder::load(&dir, &LoadOptions::default(), &device).unwrap();
            let (ids_t, mask) = e.batch_tensors(&[t.as_slice()]);
            let want: Vec<f32> = model.forward(ids_t, mask).into_data().try_to_vec().unwrap();
            let err = max_abs_diff(got.row(i), &want);
            assert!(err <= TOL, "{variant}, text {i}: saved model differs by {err:e}");
        }
        // Half precision: half the bytes, embeddings within f16 rounding of the f32 model's.
        let half = scratch_dir(&format!("saved-f16-{fixture_name}-{variant}"));
        save_sentence_transformers(
            &model,
            &half,
            &SaveOptions { dtype: WeightDtype::F16, ..opts_clone(&opts) },
        )
        .unwrap();
        let small =
            Embedder::load(&half, &LoadOptions::default(), &device).unwrap().embed(&texts).unwrap();
        let err =
            (0..texts.len()).map(|i| max_abs_diff(small.row(i), got.row(i))).fold(0.0, f32::max);
        let size =
            |d: &std::path::Path| std::fs::metadata(d.join("model.safetensors")).unwrap().len();
        assert!(
            err <= 5e-3 && size(&half) * 10 < size(&dir) * 6,
            "f16: error {err:e}, {} vs {} bytes",
            size(&half),
            size(&dir)
        );
        // A save that fails part-way (here: its staging folder cannot be made, because a file
        // sits at that path) leaves the model already there as it was.
        let staging = st5_core::atomic::temporary(&dir);
        std::fs::write(&staging, b"in the way").unwrap();
        let err = save_sentence_transformers(&model, &dir, &opts).unwrap_err().to_string();
        assert!(err.contains(".saving"), "{err}");
        std::fs::remove_file(&staging).unwrap();
        let again =
            Embedder::load(&dir, &LoadOptions::default(), &device).unwrap().embed(&texts).unwrap();
        assert_eq!(again.data, got.data);
    }
}
