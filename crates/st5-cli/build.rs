//! Prepares the built-in model for `include_bytes!`. Its weights are committed in parts, each
//! under the repository's per-file size limit (`scripts/model-parts.sh`); this joins them into
//! one `model.safetensors` in `OUT_DIR`, so that the binary holds the weights once and loading
//! borrows them in place. It also lists the model's other files (every file a load reads:
//! configs, tokenizer, each module's folder, whatever the layout) for `include_bytes!`, in
//! `OUT_DIR/default_model.rs`. `models/DEFAULT` names the model (a folder under `models/`), for
//! this build, the demo server (`www/serve.mjs`) and the tests alike.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let models = manifest.join("../../models");
    let named = models.join("DEFAULT");
    println!("cargo:rerun-if-changed={}", named.display());
    let name = std::fs::read_to_string(&named)
        .unwrap_or_else(|e| panic!("reading the built-in model's name {}: {e}", named.display()));
    let dir = models.join(name.trim());
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    println!("cargo:rustc-env=ST5_DEFAULT_MODEL_NAME={}", name_of(&dir));
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut parts: Vec<(u32, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading the built-in model {}: {e}", dir.display()))
        .filter_map(|e| {
            let path = e.ok()?.path();
            let n =
                path.file_name()?.to_str()?.strip_prefix("model.safetensors.part")?.parse().ok()?;
            Some((n, path))
        })
        .collect();
    parts.sort();
    let paths: Vec<PathBuf> = if parts.is_empty() {
        vec![dir.join("model.safetensors")]
    } else {
        parts.into_iter().map(|(_, p)| p).collect()
    };
    let mut joined = Vec::new();
    for p in &paths {
        println!("cargo:rerun-if-changed={}", p.display());
        joined.extend(std::fs::read(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display())));
    }
    write_file_list(&dir, &out);
    let target = out.join("model.safetensors");
    // Rewritten only when the bytes change, so that the binary is not relinked for nothing.
    if std::fs::read(&target).ok().as_deref() != Some(joined.as_slice()) {
        std::fs::write(&target, &joined)
            .unwrap_or_else(|e| panic!("writing {}: {e}", target.display()));
    }
}

/// Writes `default_model.rs`: a `&[(&str, &[u8])]` of every file under `dir` but the weights
/// (joined above), their parts and the model card, keyed by relative path with `/`.
fn write_file_list(dir: &Path, out: &Path) {
    fn walk(root: &Path, dir: &Path, files: &mut Vec<String>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, files);
                continue;
            }
            let rel = path.strip_prefix(root).expect("under root");
            let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>();
            let rel = rel.join("/");
            let skip = rel == "README.md"
                || rel == "model.safetensors"
                || rel.starts_with("model.safetensors.part")
                || rel.ends_with(".tmp");
            if !skip {
                files.push(rel);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    let mut code = String::from("&[\n");
    for rel in &files {
        let full = dir.join(rel);
        println!("cargo:rerun-if-changed={}", full.display());
        code +=
            &format!("    ({rel:?}, include_bytes!({:?}) as &[u8]),\n", full.display().to_string());
    }
    code += "]\n";
    let target = out.join("default_model.rs");
    if std::fs::read_to_string(&target).ok().as_deref() != Some(code.as_str()) {
        std::fs::write(&target, code)
            .unwrap_or_else(|e| panic!("writing {}: {e}", target.display()));
    }
}

fn name_of(dir: &Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}
