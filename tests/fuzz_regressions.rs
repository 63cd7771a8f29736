//! Every input a fuzz target crashed on (fuzz/regressions/<target>/), run through that target
//! (st5_format::fuzzing, st5_trainer::fuzzing) again: each must now return, an error or a
//! result, never panic.

use std::path::Path;

#[test]
fn saved_crash_inputs_no_longer_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    let mut ran = 0;
    let targets = st5_format::fuzzing::TARGETS.into_iter().chain(st5_trainer::fuzzing::TARGETS);
    for (target, run) in targets {
        let Ok(dir) = std::fs::read_dir(root.join(target)) else { continue };
        for entry in dir {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "{target}: {} panics again", path.display());
            ran += 1;
        }
    }
    // The directory holds the crashes found so far; an empty run would test nothing.
    assert!(ran >= 2, "only {ran} saved inputs under {}", root.display());
}
