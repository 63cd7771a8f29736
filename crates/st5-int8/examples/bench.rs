//! The kernels against st5's f32 matrix kernel (gemm, as burn's flex backend calls it, with the
//! workspace's patch and AVX-512), one thread each, at sentence-t5-base's Linear shapes for 64
//! sentences of 16 tokens. Every method is timed once per round in turn, so that load on a shared
//! machine falls on all of them alike; printed: the best time and its GFLOP/s (2·m·n·k per
//! product), and the speed-up over f32 as the median of the rounds' own ratios, with their
//! range (the spread is the noise).
//!
//!   cargo run -p st5-int8 --release --example bench [rounds] [small]

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    use std::time::{Duration, Instant};

    use st5_int8::{ActBits, Kernel, Weights, matmul, quantize_rows, quantize_rows_asymmetric};

    let rounds: usize = std::env::args().nth(1).map_or(7, |r| r.parse().expect("rounds"));
    // (m, k, n): q/k/v/o and the feed-forward's wi and wo; `small` as the second argument: the
    // built-in default's (d_model 384, d_ff 1536) for 32 sentences of 20 tokens.
    let shapes = match std::env::args().nth(2).as_deref() {
        Some("small") => [(640, 384, 384), (640, 384, 1536), (640, 1536, 384)],
        _ => [(1024, 768, 768), (1024, 768, 3072), (1024, 3072, 768)],
    };
    let mut seed = 1u64;
    let mut uniform = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    println!("kernels here: {:?}", Kernel::available());
    for (m, k, n) in shapes {
        let x: Vec<f32> = (0..m * k).map(|_| uniform()).collect();
        // f32 weights as burn's Linear holds them, [k, n]; int8 ones as a checkpoint, [n, k].
        let wf: Vec<f32> = (0..k * n).map(|_| uniform()).collect();
        let codes: Vec<i8> = (0..n * k).map(|_| (uniform() * 254.0) as i8).collect();
        let w = Weights::new(&codes, &vec![0.01; n], n, k);
        let mut methods: Vec<(String, Option<(Kernel, ActBits)>)> = vec![("f32 gemm".into(), None)];
        for kernel in Kernel::available() {
            for bits in [ActBits::Seven, ActBits::Eight] {
                if kernel.accepts(bits) && (kernel != Kernel::Scalar || bits == ActBits::Eight) {
                    methods.push((format!("{kernel:?} {bits:?}"), Some((kernel, bits))));
                }
            }
        }
        let mut times = vec![Vec::new(); methods.len()];
        let mut quantize = Duration::MAX;
        let mut out = vec![0f32; m * n];
        for round in 0..rounds {
            for (t, (_, method)) in times.iter_mut().zip(&methods) {
                // The scalar kernel is ~50x slower: once is enough to place it.
                if round > 0 && matches!(method, Some((Kernel::Scalar, _))) {
                    continue;
                }
                let q = method.map(|(_, bits)| quantize_rows(&x, k, bits));
                let start = Instant::now();
                match (method, &q) {
                    (Some((kernel, _)), Some(q)) => matmul(*kernel, q, &w, &mut out),
                    _ => unsafe {
                        gemm::gemm(
                            m,
                            n,
                            k,
                            out.as_mut_ptr(),
                            1,
                            n as isize,
                            false,
                            x.as_ptr(),
                            1,
                            k as isize,
                            wf.as_ptr(),
                            1,
                            n as isize,
                            0.0,
                            1.0,
                            false,
                            false,
                            false,
                            gemm::Parallelism::None,
                        )
                    },
                }
                t.push(start.elapsed());
                std::hint::black_box(&out);
            }
            let start = Instant::now();
            // What st5 runs before each product: 7-bit codes with a zero point.
            std::hint::black_box(quantize_rows_asymmetric(&x, k));
            quantize = quantize.min(start.elapsed());
        }
        let flop = 2.0 * (m * n * k) as f64;
        println!(
            "\nm {m}, k {k}, n {n} (best of {rounds}; quantize_rows_asymmetric: {:.2} ms)",
            quantize.as_secs_f64() * 1e3
        );
        for ((name, _), t) in methods.iter().zip(&times) {
            let best = t.iter().min().expect("a round").as_secs_f64();
            // Each round's f32 time over this method's time in the same round.
            let mut ratios: Vec<f64> =
                times[0].iter().zip(t).map(|(f, q)| f.as_secs_f64() / q.as_secs_f64()).collect();
            ratios.sort_by(f64::total_cmp);
            println!(
                "  {name:<18} {:8.2} ms {:6.1} GFLOP/s   x{:.2} f32 (rounds {:.2}-{:.2})",
                best * 1e3,
                flop / best / 1e9,
                ratios[ratios.len() / 2],
                ratios[0],
                ratios[ratios.len() - 1],
            );
        }
    }
}
