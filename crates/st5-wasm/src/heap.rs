//! Reserving wasm memory for a model load in one step.
//!
//! The allocator (dlmalloc) grows wasm memory by what each allocation lacks, so a load that
//! builds a few hundred weight tensors grows it a few hundred times, and in Node each growth of a
//! large memory costs far more than its size: loading a sentence-t5-base-size int8 model (113 MB
//! of files, 239 MiB of wasm memory at its peak) took 814 ms in a fresh instance against 233 ms
//! in one that had loaded it before, on 2 cores, most of it in the garbage collector. Chromium
//! showed no such cost (2 base-size pool workers were ready in 0.77 s without the reservation,
//! 0.70-0.77 s with it); the reservation is kept there too, as it costs only address space.
//! One allocation of the load's peak, freed at once, grows memory once; dlmalloc keeps the freed
//! block (wasm memory never shrinks) and carves the load's allocations out of it. The same load
//! then took 374 ms. Reserving less than the peak gives back most of the gain (230 MB: 630 ms),
//! so the estimate errs high; pages that are reserved but never written cost address space, not
//! resident memory.

/// Slack above twice the files' bytes: the tokenizer's tables and the load's transient buffers.
const SLACK: usize = 32 << 20;

/// What a CPU load of `file_bytes` of model files holds at its peak, roughly: the files' own copy
/// in wasm memory, the weights built from them (int8 stays int8 and f32 stays f32; an f16 file
/// becomes twice its size in f32, which this leaves to ordinary growth), and [`SLACK`].
pub fn load_peak(file_bytes: usize) -> usize {
    file_bytes.saturating_mul(2).saturating_add(SLACK)
}

/// Makes the allocator hold at least `bytes` free, in one growth of wasm memory where it has
/// less. An allocation that cannot be had is skipped: the load then grows memory as it goes,
/// and fails there, with its own error, if memory runs out.
pub fn reserve(bytes: usize) {
    let mut block: Vec<u8> = Vec::new();
    if block.try_reserve_exact(bytes).is_ok() {
        // Kept opaque so that the optimiser does not elide the allocation.
        std::hint::black_box(&mut block);
    }
}
