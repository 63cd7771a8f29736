//! Writing a file whole: a reader sees the old bytes or the new ones, never a part. The one
//! helper behind every file st5 writes (a saved model's single files, an index, `st5 embed`'s
//! output, `st5 eval`'s JSON, a trained soft prompt and its card).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where [`write_with`] writes `path` before the rename: `.{name}.saving` beside it, on the same
/// file system, so the rename is atomic.
pub fn temporary(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.saving"))
}

/// Writes `path` through [`temporary`]: `fill` writes the contents, which are flushed and synced
/// before the rename. On failure the temporary file is removed and `path` is left as it was; the
/// error names `path` (the file the caller asked for).
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<()> {
    let tmp = temporary(path);
    let result = (|| {
        let mut out = BufWriter::new(File::create(&tmp)?);
        fill(&mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Write { path: path.into(), source: e });
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::Write { path: path.into(), source: e }
    })
}

/// [`write_with`] for bytes already in memory.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    write_with(path, |w| w.write_all(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = std::env::temp_dir().join(format!("st5-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.bin");
        // (what the writer does, the file's bytes after it, whether the call succeeds)
        let cases: [(&dyn Fn(&mut BufWriter<File>) -> std::io::Result<()>, &[u8], bool); 3] = [
            (&|w| w.write_all(b"one"), b"one", true),
            (&|w| w.write_all(b"two").and(Err(std::io::Error::other("disk full"))), b"one", false),
            (&|w| w.write_all(b"three"), b"three", true),
        ];
        for (fill, want, ok) in cases {
            let result = write_with(&path, fill);
            assert_eq!(result.is_ok(), ok, "{result:?}");
            if let Err(e) = result {
                assert!(e.to_string().contains("out.bin") && e.to_string().contains("disk full"));
            }
            assert_eq!(std::fs::read(&path).unwrap(), want);
            assert!(!temporary(&path).exists());
        }
        // A path whose folder does not exist: an error naming it, nothing written.
        let missing = dir.join("no/such/dir/out.bin");
        assert!(write(&missing, b"x").unwrap_err().to_string().contains("out.bin"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
