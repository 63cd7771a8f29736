//! Writing a file or a directory whole: a reader sees the old contents or the new ones, never a
//! part. The one helper behind every file st5 writes (an index, `st5 embed`'s output, `st5
//! eval`'s JSON, a trained soft prompt and its card) and every directory ([`write_dir`]: a saved
//! model, a trainer's checkpoint).

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

/// Writes the directory `dir` whole: `fill` writes its files into a staging directory
/// ([`temporary`] of `dir`, with [`write_under`]), which then takes `dir`'s place. The old
/// directory is moved aside first and removed only once the new one is in place. On failure the
/// staging directory is removed and `dir` is left as it was.
pub fn write_dir(dir: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let staging = temporary(dir);
    let _ = std::fs::remove_dir_all(&staging);
    let result = fill(&staging).and_then(|()| replace_dir(&staging, dir));
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    result
}

/// `bytes` as `dir/rel`, with the folders on the way: [`write_dir`]'s files.
pub fn write_under(dir: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    std::fs::write(&path, bytes).map_err(|e| Error::Write { path, source: e })
}

/// Moves `staging` to `dir`, the old `dir` (if any) aside first as `.{name}.old`.
fn replace_dir(staging: &Path, dir: &Path) -> Result<()> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let old = dir.with_file_name(format!(".{name}.old"));
    let had_old = dir.exists();
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
        std::fs::rename(dir, &old).map_err(|e| Error::io(dir, e))?;
    }
    std::fs::rename(staging, dir).map_err(|e| Error::io(dir, e))?;
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
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

    #[test]
    fn a_failed_directory_write_leaves_the_old_directory_and_no_staging() {
        let root = std::env::temp_dir().join(format!("st5-atomic-dir-{}", std::process::id()));
        let dir = root.join("model");
        std::fs::create_dir_all(&root).unwrap();
        let read = |rel: &str| std::fs::read(dir.join(rel)).ok();
        // (what fill does, then whether it succeeds, then a.txt and b/c.txt afterwards)
        type Fill = dyn Fn(&Path) -> Result<()>;
        let cases: [(&Fill, bool, Option<&[u8]>, Option<&[u8]>); 3] = [
            (&|d| write_under(d, "a.txt", b"one"), true, Some(b"one"), None),
            (
                &|d| write_under(d, "b/c.txt", b"x").and(Err(Error::Invalid("disk full".into()))),
                false,
                Some(b"one"),
                None,
            ),
            (&|d| write_under(d, "b/c.txt", b"two"), true, None, Some(b"two")),
        ];
        for (fill, ok, a, c) in cases {
            assert_eq!(write_dir(&dir, fill).is_ok(), ok);
            assert_eq!((read("a.txt").as_deref(), read("b/c.txt").as_deref()), (a, c));
            assert!(!temporary(&dir).exists());
            assert!(!root.join(".model.old").exists());
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}
