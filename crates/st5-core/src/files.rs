//! Where model files come from: a directory on disk, or an in-memory map of relative paths to
//! bytes (files fetched or picked in a browser). Loading reads through [`ModelFiles`] only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A read-only view of a model's files by relative, `/`-separated path.
pub trait ModelFiles {
    /// The bytes of `rel`, or `None` when there is no such file.
    fn read(&self, rel: &str) -> Result<Option<Vec<u8>>>;
    /// The name of `rel` in messages (the full path for a directory).
    fn path(&self, rel: &str) -> PathBuf;

    /// True when `rel` exists.
    fn exists(&self, rel: &str) -> bool;

    /// Reads and parses a JSON file; `None` when absent. Errors name the file.
    fn json<T: serde::de::DeserializeOwned>(&self, rel: &str) -> Result<Option<T>>
    where
        Self: Sized,
    {
        match self.read(rel)? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| Error::Json { path: self.path(rel), source }),
        }
    }
}

/// Joins relative paths, treating `""` and `"."` as the root.
pub fn join(dir: &str, name: &str) -> String {
    match dir.trim_matches('/') {
        "" | "." => name.to_string(),
        d => format!("{d}/{name}"),
    }
}

/// A model directory on disk.
pub struct Dir(pub PathBuf);

impl ModelFiles for Dir {
    fn read(&self, rel: &str) -> Result<Option<Vec<u8>>> {
        let p = self.path(rel);
        if !p.is_file() {
            return Ok(None);
        }
        std::fs::read(&p).map(Some).map_err(|e| Error::io(p, e))
    }
    fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() { self.0.clone() } else { self.0.join(rel) }
    }
    fn exists(&self, rel: &str) -> bool {
        self.path(rel).is_file()
    }
}

/// Model files held in memory, keyed by relative path (`config.json`, `2_Dense/model.safetensors`).
#[derive(Default, Clone)]
pub struct MemoryFiles {
    pub files: BTreeMap<String, Vec<u8>>,
    /// Shown before paths in messages, separator included (`memory:`, a base URL).
    pub label: String,
}

impl MemoryFiles {
    /// Reads every file under `dir` into memory (for tests, and to mirror a browser upload).
    pub fn from_dir(dir: &Path) -> Result<Self> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) -> Result<()> {
            for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
                let p = entry.map_err(|e| Error::io(dir, e))?.path();
                if p.is_dir() {
                    walk(root, &p, out)?;
                } else {
                    let rel = p
                        .strip_prefix(root)
                        .expect("under root")
                        .to_string_lossy()
                        .replace('\\', "/");
                    out.insert(rel, std::fs::read(&p).map_err(|e| Error::io(&p, e))?);
                }
            }
            Ok(())
        }
        let mut files = BTreeMap::new();
        walk(dir, dir, &mut files)?;
        Ok(Self { files, label: "memory:".into() })
    }
}

impl ModelFiles for MemoryFiles {
    fn read(&self, rel: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.files.get(rel).cloned())
    }
    fn path(&self, rel: &str) -> PathBuf {
        PathBuf::from(format!("{}{rel}", self.label))
    }
    fn exists(&self, rel: &str) -> bool {
        self.files.contains_key(rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_handles_root_and_slashes() {
        let cases = [
            ("", "a.json", "a.json"),
            (".", "a.json", "a.json"),
            ("0_T", "c.json", "0_T/c.json"),
            ("0_T/", "c.json", "0_T/c.json"),
            ("/x/", "y", "x/y"),
        ];
        for (d, n, want) in cases {
            assert_eq!(join(d, n), want, "join({d:?}, {n:?})");
        }
    }
}
