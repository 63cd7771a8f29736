//! The server's Prometheus metrics, under text-embeddings-inference's names (`te_request_count`,
//! `te_request_queue_duration`, `te_batch_next_size`, ...), so that its dashboards read them.

use prometheus::{
    Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
    exponential_buckets,
};

pub struct Metrics {
    registry: Registry,
    /// Requests by `method` (`embed`, `openai`, `tokenize`).
    pub request_count: IntCounterVec,
    pub request_success: IntCounterVec,
    /// Failures by `err` (the error type).
    pub request_failure: IntCounterVec,
    /// Seconds from a request's arrival to its answer.
    pub request_duration: Histogram,
    /// Seconds a request's first text waited before its batch ran.
    pub queue_duration: Histogram,
    /// Seconds of each batch's forward pass.
    pub inference_duration: Histogram,
    /// Texts per batch.
    pub batch_size: Histogram,
    /// Tokens per batch.
    pub batch_tokens: Histogram,
    /// Requests waiting for the model.
    pub queue_size: IntGauge,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, label: &str| {
            let c = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid counter");
            registry.register(Box::new(c.clone())).expect("unique metric");
            c
        };
        let seconds = exponential_buckets(1e-4, 2.0, 20).expect("valid buckets");
        let counts = exponential_buckets(1.0, 2.0, 16).expect("valid buckets");
        let histogram = |name: &str, help: &str, buckets: &[f64]| {
            let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))
                .expect("valid histogram");
            registry.register(Box::new(h.clone())).expect("unique metric");
            h
        };
        let queue_size =
            IntGauge::new("te_queue_size", "Requests waiting for the model").expect("valid gauge");
        registry.register(Box::new(queue_size.clone())).expect("unique metric");
        Self {
            request_count: counter("te_request_count", "Requests received", "method"),
            request_success: counter("te_request_success", "Requests answered", "method"),
            request_failure: counter("te_request_failure", "Requests failed", "err"),
            request_duration: histogram(
                "te_request_duration",
                "Seconds from arrival to answer",
                &seconds,
            ),
            queue_duration: histogram(
                "te_request_queue_duration",
                "Seconds waited before the first batch",
                &seconds,
            ),
            inference_duration: histogram(
                "te_request_inference_duration",
                "Seconds of each batch's forward pass",
                &seconds,
            ),
            batch_size: histogram("te_batch_next_size", "Texts per batch", &counts),
            batch_tokens: histogram("te_batch_next_tokens", "Tokens per batch", &counts),
            queue_size,
            registry,
        }
    }

    /// Every metric in Prometheus' text exposition format.
    pub fn render(&self) -> String {
        TextEncoder::new().encode_to_string(&self.registry.gather()).unwrap_or_default()
    }
}
