//! The trainer's loss and optimiser against PyTorch (fixtures from
//! tests/reference/make_trainer_fixtures.py): the contrastive loss and its gradient with respect
//! to every embedding, with and without hard negatives, symmetric or not; and three Adafactor
//! steps as `transformers.optimization.Adafactor` takes them. Tolerance: 1e-5 absolute, or
//! 1e-5 relative to the reference's magnitude where that is larger (f32 here, f64 there).
//! And GradCache against the plain step on a tiny random model.

use burn::optim::Optimizer;
use st5_core::SentenceT5;
use burn::tensor::{Device, Tensor, TensorData};
use serde_json::Value;
use st5_tests::fixture;
use st5_trainer::loss::ContrastiveLoss;

const TOL: f32 = 1e-5;

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("trainer").join(name)).unwrap()).unwrap()
}

fn matrix(v: &Value) -> (Vec<f32>, [usize; 2]) {
    let rows = v.as_array().unwrap();
    let data: Vec<f32> = rows.iter().flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32)).collect();
    let shape = [rows.len(), data.len() / rows.len()];
    (data, shape)
}

fn flat(v: &Value) -> Vec<f32> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        x => vec![x.as_f64().unwrap() as f32],
    }
}

fn tensor(v: &Value, device: &Device) -> Tensor<2> {
    let (data, shape) = matrix(v);
    Tensor::from_data(TensorData::new(data, shape), device)
}

fn values(t: Tensor<2>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

/// The worst error, each measured against max(1, |reference|) (absolute below 1, relative above).
fn worst(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(g, w)| (g - w).abs() / w.abs().max(1.0)).fold(0.0, f32::max)
}

#[test]
fn contrastive_loss_and_gradients_match_pytorch() {
    let fx = json("loss.json");
    let device = Device::flex().autodiff();
    let temperature = fx["temperature"].as_f64().unwrap() as f32;
    for case in fx["cases"].as_array().unwrap() {
        let (negatives, symmetric) = (case["negatives"].as_bool().unwrap(), case["symmetric"].as_bool().unwrap());
        let a = tensor(&fx["anchors"], &device).require_grad();
        let p = tensor(&fx["positives"], &device).require_grad();
        let n = tensor(&fx["negatives"], &device).require_grad();
        let loss = ContrastiveLoss { temperature, symmetric }.forward(a.clone(), p.clone(), negatives.then(|| n.clone()));
        let got: f32 = loss.clone().into_data().try_to_vec::<f32>().unwrap()[0];
        let want = case["loss"].as_f64().unwrap() as f32;
        let label = format!("negatives {negatives}, symmetric {symmetric}");
        assert!((got - want).abs() <= TOL * want.abs().max(1.0), "{label}: loss {got} vs {want}");
        let grads = loss.backward();
        let mut errs = vec![worst(&values(a.grad(&grads).unwrap()), &flat(&case["grad_anchors"])), worst(&values(p.grad(&grads).unwrap()), &flat(&case["grad_positives"]))];
        if negatives {
            errs.push(worst(&values(n.grad(&grads).unwrap()), &flat(&case["grad_negatives"])));
        }
        let err = errs.iter().copied().fold(0.0, f32::max);
        println!("{label}: loss {got:.6} (reference {want:.6}), worst gradient error {err:.2e}");
        assert!(err <= TOL, "{label}: gradient error {err:e}");
    }
}

#[test]
fn adafactor_steps_match_transformers() {
    let fx = json("adafactor.json");
    let device = Device::flex();
    let optim = st5_trainer::optim::adafactor().build();
    let lr = fx["lr"].as_f64().unwrap();
    let mut matrix_param = tensor(&fx["initial"]["matrix"], &device);
    let mut vector_param = Tensor::<1>::from_data(TensorData::new(flat(&fx["initial"]["vector"]), [5]), &device);
    let (mut ms, mut vs) = (None, None);
    for (i, step) in fx["steps"].as_array().unwrap().iter().enumerate() {
        let g = tensor(&step["grads"]["matrix"], &device);
        (matrix_param, ms) = optim.step(lr, matrix_param, g, ms);
        let g = Tensor::<1>::from_data(TensorData::new(flat(&step["grads"]["vector"]), [5]), &device);
        (vector_param, vs) = optim.step(lr, vector_param, g, vs);
        let em = worst(&values(matrix_param.clone()), &flat(&step["params"]["matrix"]));
        let ev = worst(&vector_param.clone().into_data().try_to_vec::<f32>().unwrap(), &flat(&step["params"]["vector"]));
        println!("adafactor step {}: matrix error {em:.2e}, vector error {ev:.2e}", i + 1);
        assert!(em <= TOL && ev <= TOL, "step {}: matrix {em:e}, vector {ev:e}", i + 1);
    }
}

/// Every parameter's gradient in `grads`, in module order.
fn all_grads(model: &SentenceT5, grads: &burn::optim::GradientsParams) -> Vec<Vec<f32>> {
    use burn::module::{Module, ModuleVisitor, Param};
    struct V<'a>(&'a burn::optim::GradientsParams, Vec<Vec<f32>>);
    impl ModuleVisitor for V<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let g = self.0.get::<D>(param.id).map(|g| g.into_data().try_to_vec::<f32>().unwrap()).unwrap_or_default();
            self.1.push(g);
        }
    }
    let mut v = V(grads, Vec::new());
    model.visit(&mut v);
    v.1
}

/// One GradCache step (chunks of 4 texts) gives the plain step's loss and gradients, and so the
/// same updated weights, on a tiny random model, with and without hard negatives.
#[test]
fn gradcache_step_equals_plain_step() {
    use st5_core::{HeadConfig, T5Config, Variant};
    use st5_trainer::step::{Batch, gradients};
    let cfg = T5Config::from_slice(br#"{"vocab_size": 64, "d_model": 8, "d_kv": 4, "d_ff": 16, "num_layers": 2, "num_heads": 2}"#, std::path::Path::new("tiny")).unwrap();
    let base = Device::flex();
    let head = HeadConfig { variant: Variant::EncMean, dense: vec![(8, 6, false)], normalize: true };
    let model = SentenceT5::init(&cfg, &head, &base.clone().autodiff());
    let seq = |seed: u32, len: usize| (0..len).map(|i| 2 + (seed * 31 + i as u32 * 17) % 60).chain([1]).collect::<Vec<u32>>();
    let mut batch = Batch {
        anchors: (0..5).map(|i| seq(i, 3 + i as usize)).collect(),
        positives: (0..5).map(|i| seq(i + 10, 7 - i as usize)).collect(),
        negatives: vec![],
    };
    let loss = ContrastiveLoss { temperature: 0.05, symmetric: true };
    for negatives in [false, true] {
        if negatives {
            batch.negatives = (0..5).map(|i| seq(i + 20, 2 + 2 * i as usize)).collect();
        }
        let (plain_loss, plain) = gradients(&model, &batch, &loss, None, &base);
        let (cached_loss, cached) = gradients(&model, &batch, &loss, Some(4), &base);
        assert!((plain_loss - cached_loss).abs() <= 1e-5, "loss {plain_loss} vs {cached_loss}");
        let (a, b) = (all_grads(&model, &plain), all_grads(&model, &cached));
        assert_eq!(a.len(), b.len());
        let mut worst = 0.0f32;
        let mut nonzero = 0;
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.len(), y.len(), "a parameter lacks a gradient on one side");
            nonzero += x.iter().any(|v| *v != 0.0) as usize;
            worst = worst.max(worst_abs(x, y));
        }
        let mut optim = st5_trainer::optim::adafactor().init();
        let p1 = optim.step(1e-3, model.clone(), plain);
        let mut optim = st5_trainer::optim::adafactor().init();
        let p2 = optim.step(1e-3, model.clone(), cached);
        let weights = |m: &SentenceT5| all_params(m);
        let wdiff = weights(&p1).iter().zip(&weights(&p2)).map(|(x, y)| worst_abs(x, y)).fold(0.0, f32::max);
        println!("negatives {negatives}: loss {plain_loss:.6}; worst gradient difference {worst:.2e} over {nonzero} parameters with gradients; updated weights differ by {wdiff:.2e}");
        assert!(nonzero > 10, "too few gradients: {nonzero}");
        assert!(worst <= 1e-5 && wdiff <= 1e-5, "gradients {worst:e}, weights {wdiff:e}");
    }
}

fn worst_abs(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn all_params(model: &SentenceT5) -> Vec<Vec<f32>> {
    use burn::module::{Module, ModuleVisitor, Param};
    struct V(Vec<Vec<f32>>);
    impl ModuleVisitor for V {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.val().into_data().try_to_vec::<f32>().unwrap());
        }
    }
    let mut v = V(Vec::new());
    model.visit(&mut v);
    v.0
}
