//! ARCHITECTURE.md's import rules, checked where it is cheap: the crate edges from
//! `cargo metadata` (rules 1-6 of "What may import what"), and no module circles inside st5-core
//! and st5-int8 (rule 17), from the `crate::` paths each module's code names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Each workspace crate's dependencies (normal and build, not dev), by crate name, each with
/// whether it is optional (behind a feature).
fn crate_edges() -> BTreeMap<String, BTreeMap<String, bool>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(ROOT)
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut edges = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let deps = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].as_str() != Some("dev"))
            .map(|d| (d["name"].as_str().unwrap().to_string(), d["optional"] == true))
            .collect();
        edges.insert(p["name"].as_str().unwrap().to_string(), deps);
    }
    edges
}

#[test]
fn crates_import_only_what_the_map_allows() {
    let edges = crate_edges();
    let deps = |c: &str| edges.get(c).unwrap_or_else(|| panic!("no crate {c}"));
    let workspace: BTreeSet<&str> = edges.keys().map(String::as_str).collect();
    let tensor = ["burn", "cubecl"];
    // (crate, the workspace crates it may import, whether it may import a tensor library)
    let rules: [(&str, &[&str], bool); 7] = [
        ("st5-format", &[], false),
        ("st5-int8", &[], false),
        ("st5-eval", &["st5-format"], false),
        ("st5-hub", &["st5-format"], false),
        ("st5-core", &["st5-format", "st5-int8"], true),
        ("st5-serve", &["st5-core", "st5-format"], true),
        ("st5-wasm", &["st5-core", "st5-format"], true),
    ];
    for (name, allowed, burn) in rules {
        for d in deps(name).keys() {
            if workspace.contains(d.as_str()) {
                assert!(
                    allowed.contains(&d.as_str()),
                    "{name} imports {d}; the map allows {allowed:?}"
                );
            }
            assert!(
                burn || !tensor.contains(&d.as_str()),
                "{name} imports {d}: it must build without burn"
            );
        }
    }
    assert!(deps("st5-int8").is_empty(), "st5-int8 uses no crate: {:?}", deps("st5-int8"));
    // The front ends never import each other.
    let front = ["st5-cli", "st5-trainer", "st5-wasm"];
    for a in front {
        for b in front.iter().filter(|b| **b != a) {
            assert!(!deps(a).contains_key(*b), "{a} imports the front end {b}");
        }
    }
    // The trainer: st5-format and st5-eval always; the model on burn only behind its feature.
    let trainer = deps("st5-trainer");
    for (d, optional) in [
        ("st5-format", false),
        ("st5-eval", false),
        ("st5-core", true),
        ("st5-hub", true),
        ("burn", true),
    ] {
        assert_eq!(
            trainer.get(d),
            Some(&optional),
            "the trainer's {d}: optional {:?}",
            trainer.get(d)
        );
    }
}

/// The module a source file belongs to: its top-level file stem, or its folder under `src/`.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then(|| name.to_string())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `crate::NAME` references in code (not comments, not test modules), as module names.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let code = code.split("#[cfg(test)]").next().unwrap();
    let mut out = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (at, _) in line.match_indices("crate::") {
            let rest = &line[at + "crate::".len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                // `crate::{a, b::c}`: the first name of each item.
                Some(group) => group.split('}').next().unwrap().split(',').collect(),
                None => vec![rest],
            };
            for n in names {
                let n: String = n
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !n.is_empty() {
                    out.insert(n);
                }
            }
        }
    }
    out
}

/// The module graph of the crate whose sources are under `src`: module → modules it names.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        if let Some(m) = module_of(src, file) {
            let paths = crate_paths(&std::fs::read_to_string(file).unwrap());
            graph.entry(m).or_default().extend(paths);
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (m, deps) in graph.iter_mut() {
        deps.retain(|d| d != m && modules.contains(d));
    }
    graph
}

/// The modules that lie on a cycle of `graph`: those that reach themselves.
fn on_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let reaches = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&str> = graph[from].iter().map(String::as_str).collect();
        while let Some(m) = todo.pop() {
            if seen.insert(m.to_string()) {
                todo.extend(graph[m].iter().map(String::as_str));
            }
        }
        seen
    };
    graph.keys().filter(|m| reaches(m).contains(*m)).cloned().collect()
}

#[test]
fn no_module_circles_in_st5_core_or_st5_int8() {
    for krate in ["st5-core", "st5-int8"] {
        let src = Path::new(ROOT).join("crates").join(krate).join("src");
        let graph = module_graph(&src);
        assert!(graph.len() > 4, "{krate}: only {} modules found", graph.len());
        let cycles = on_cycles(&graph);
        assert!(cycles.is_empty(), "{krate}: modules on a circle: {cycles:?}\n{graph:#?}");
    }
}

#[test]
fn the_cycle_check_finds_a_circle() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    let cases: [(&[(&str, &str)], &[&str]); 3] = [
        (&[("a", "b"), ("b", "c")], &[]),
        (&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")], &["a", "b", "c"]),
        (&[("a", "b"), ("b", "a"), ("d", "a")], &["a", "b"]),
    ];
    for (edges, want) in cases {
        let got: Vec<String> = on_cycles(&graph(edges)).into_iter().collect();
        assert_eq!(got, want, "{edges:?}");
    }
    let code =
        "use crate::a::X;\n// crate::comment\nuse crate::{b, c::D};\n#[cfg(test)]\nuse crate::e;";
    assert_eq!(crate_paths(code), ["a", "b", "c"].map(String::from).into());
}
