//! Where model files come from: a directory on disk, or an in-memory map of relative paths to
//! bytes (files fetched or picked in a browser, or compiled into a binary). Loading reads through
//! [`ModelFiles`] only, and gets [`FileBytes`]: shared, never copied, so that the weights exist
//! once (a memory map, or the one buffer the caller handed over) beside the model built from them.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

/// A file's bytes, shared by reference count: cloning one is free. It holds a buffer it owns,
/// a read-only memory map of a file (native), or data compiled into the binary.
#[derive(Clone)]
pub struct FileBytes(Arc<dyn AsRef<[u8]> + Send + Sync>);

impl FileBytes {
    /// Bytes compiled into the binary (`include_bytes!`): not copied.
    pub fn from_static(bytes: &'static [u8]) -> Self {
        Self(Arc::new(bytes))
    }

    /// The bytes of the file at `path`: memory-mapped where the platform allows, so that they
    /// stay in the page cache instead of the heap; read otherwise (an empty file, a pipe).
    pub fn map(path: &Path) -> std::io::Result<Self> {
        // The file is closed at the end of this block, before `read` opens the path again.
        #[cfg(not(target_arch = "wasm32"))]
        {
            let file = std::fs::File::open(path)?;
            if file.metadata()?.len() > 0 {
                // SAFETY: the map is read-only and lives only while a model loads. A file
                // changed under it by another process would change the bytes read, as a
                // concurrent write would change a `read`; safetensors validates every offset it
                // parses from them.
                if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
                    return Ok(Self(Arc::new(map)));
                }
            }
        }
        std::fs::read(path).map(Self::from)
    }
}

impl From<Vec<u8>> for FileBytes {
    fn from(bytes: Vec<u8>) -> Self {
        Self(Arc::new(bytes))
    }
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl AsRef<[u8]> for FileBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileBytes({} bytes)", self.len())
    }
}

/// A read-only view of a model's files by relative, `/`-separated path.
pub trait ModelFiles {
    /// The bytes of `rel`, or `None` when there is no such file.
    fn read(&self, rel: &str) -> Result<Option<FileBytes>>;
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
    fn read(&self, rel: &str) -> Result<Option<FileBytes>> {
        let p = self.path(rel);
        if !p.is_file() {
            return Ok(None);
        }
        FileBytes::map(&p).map(Some).map_err(|e| Error::io(p, e))
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
    pub files: BTreeMap<String, FileBytes>,
    /// Shown before paths in messages, separator included (`memory:`, a base URL).
    pub label: String,
}

impl MemoryFiles {
    /// Reads every file under `dir` into memory (for tests, and to mirror a browser upload).
    pub fn from_dir(dir: &Path) -> Result<Self> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, FileBytes>) -> Result<()> {
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
                    out.insert(rel, std::fs::read(&p).map_err(|e| Error::io(&p, e))?.into());
                }
            }
            Ok(())
        }
        let mut files = BTreeMap::new();
        walk(dir, dir, &mut files)?;
        Ok(Self { files, label: "memory:".into() })
    }

    /// Inserts (or replaces) a file.
    pub fn insert(&mut self, rel: impl Into<String>, bytes: impl Into<FileBytes>) {
        self.files.insert(rel.into(), bytes.into());
    }
}

impl ModelFiles for MemoryFiles {
    fn read(&self, rel: &str) -> Result<Option<FileBytes>> {
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
