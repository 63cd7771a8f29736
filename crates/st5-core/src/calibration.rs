//! Calibration for the CPU's int8 compute: each Linear layer's input, its largest magnitude per
//! channel, recorded while the f32 model embeds a few sentences ([`record`], which
//! `SentenceModel::calibrate` runs; the model calls [`observe`] in each Linear). `st5 quantize
//! --dtype int8` stores it beside each int8 weight (st5-format's `quant::input_absmax_name`),
//! and the int8 Linear multiplies the channels far above the others in f32 (the `int8` module
//! says why).
//!
//! [`SENTENCES`], the built-in calibration set: 128 sentences, 32 from each of four permissively
//! licensed corpora, so that captions, requests, encyclopaedic and medical text all shape the
//! statistic: COCO 2017 validation captions (CC BY 4.0, Lin et al. 2014), BANKING77 queries
//! (CC BY 4.0, Casanueva et al. 2020), CLINC150's Wikipedia sentences (CC BY 3.0, Larson et al.
//! 2019) and MedQuAD questions (CC BY 4.0, Ben Abacha and Demner-Fushman 2019).

use std::cell::RefCell;
use std::collections::HashMap;

use burn::module::ParamId;
use burn::tensor::Tensor;

use crate::transfer::to_host;

/// The built-in calibration sentences, one a line.
pub const SENTENCES: &str = include_str!("calibration.txt");

/// The built-in calibration sentences.
pub fn sentences() -> Vec<&'static str> {
    SENTENCES.lines().filter(|l| !l.trim().is_empty()).collect()
}

/// Each recorded Linear layer's input: the largest magnitude per input channel, by the
/// parameter id of the layer's f32 weight.
pub type InputAbsmax = HashMap<ParamId, Vec<f32>>;

thread_local! {
    static RECORDING: RefCell<Option<InputAbsmax>> = const { RefCell::new(None) };
}

/// Runs `f` and returns, beside its result, the input statistic of every f32 Linear layer that
/// ran on this thread meanwhile.
pub fn record<R>(f: impl FnOnce() -> R) -> (R, InputAbsmax) {
    /// Ends the recording however `f` returns, so that a panic leaves no later pass recording.
    struct Stop;
    impl Drop for Stop {
        fn drop(&mut self) {
            RECORDING.with(|r| r.borrow_mut().take());
        }
    }
    RECORDING.with(|r| *r.borrow_mut() = Some(HashMap::new()));
    let stop = Stop;
    let out = f();
    let stats = RECORDING.with(|r| r.borrow_mut().take()).unwrap_or_default();
    drop(stop);
    (out, stats)
}

/// Records `x` `[..., d_in]`, the input of the Linear layer whose weight is `weight`, when a
/// [`record`] is running on this thread; otherwise does nothing (one thread-local read).
pub(crate) fn observe<const D: usize>(weight: ParamId, x: &Tensor<D>) {
    RECORDING.with(|r| {
        let mut r = r.borrow_mut();
        let Some(stats) = r.as_mut() else { return };
        let k = x.dims()[D - 1];
        let Ok(values) = to_host(x.clone().try_into_data()) else { return };
        let channels = stats.entry(weight).or_insert_with(|| vec![0.0; k]);
        for row in values.chunks_exact(k) {
            for (m, v) in channels.iter_mut().zip(row) {
                *m = m.max(v.abs());
            }
        }
    });
}
