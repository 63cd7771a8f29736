//! The README's library example, compiled by `cargo test` and run by tests/cli.rs, which also
//! checks that every line of the README's example is here:
//!   cargo run --release --example embed -- DIR
//! DIR: any model directory st5 loads (default `sentence-t5-base`).

use st5_core::{DeviceChoice, Embedder, LoadOptions, OpenDevice};

fn main() -> Result<(), st5_core::Error> {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "sentence-t5-base".into());
    let dir = std::path::Path::new(&arg);

    let device = DeviceChoice::Cpu.device()?; // or DeviceChoice::Wgpu
    let model = Embedder::load(dir, &LoadOptions::default(), &device)?;
    let e = model.embed(&["first text", "second text"])?; // [2, dim], L2-normalised, input order

    let cosine: f32 = e.row(0).iter().zip(e.row(1)).map(|(a, b)| a * b).sum();
    println!("{} x {}, cosine {cosine:.4}", e.len(), e.dim);
    Ok(())
}
