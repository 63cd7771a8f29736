//! The trainer's loss and optimiser against PyTorch (fixtures from
//! tests/reference/make_trainer_fixtures.py): the contrastive loss and its gradient with respect
//! to every embedding, with and without hard negatives, symmetric or not; and three Adafactor
//! steps as `transformers.optimization.Adafactor` takes them. Tolerance: 1e-5 absolute, or
//! 1e-5 relative to the reference's magnitude where that is larger (f32 here, f64 there).

use burn::optim::Optimizer;
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
