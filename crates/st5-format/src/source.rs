//! Where a model comes from, as a user names it (`st5 --model`, the trainer's `[model] init`): a
//! local path, or a Hugging Face hub id `org/name[@revision]`. Only the naming is decided here,
//! without a network client, so that the trainer's config parser (which builds without one, for
//! fuzzing) and the CLI read a name the same way; `st5-hub` fetches a hub model's files.

use std::fmt;
use std::path::{Path, PathBuf};

/// The revision a hub id without `@revision` means, as on the hub.
pub const DEFAULT_REVISION: &str = "main";

/// A model as named by the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A directory (or, for the trainer, a T5 `config.json`): an existing path always wins, and a
    /// name that is no hub id stays a path, which loading reports missing by its name.
    Local(PathBuf),
    /// A model on the Hugging Face hub (or a mirror).
    Hub(HubModel),
}

/// A hub repository and the revision (branch, tag or commit) to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubModel {
    /// `org/name`.
    pub id: String,
    /// `main` unless the name said `@revision`.
    pub revision: String,
}

impl ModelSource {
    /// Reads `name`, relative to `base` (the working directory for the CLI: `""`; the config's
    /// folder for the trainer): the path `base/name` when it exists, so that `models/st5-small`
    /// stays a directory; else a hub id when `name` is one (`org/name`, as the npm package
    /// takes them, optionally `@revision`); else the path.
    pub fn parse(name: &str, base: &Path) -> Self {
        let path = base.join(name);
        if path.exists() {
            return Self::Local(path);
        }
        match HubModel::parse(name) {
            Some(hub) => Self::Hub(hub),
            None => Self::Local(path),
        }
    }
}

impl HubModel {
    /// `org/name[@revision]`, or `None` when `name` is no hub id: exactly two segments of ASCII
    /// letters, digits, `-`, `_` and `.`, the owner starting with a letter or digit (the npm
    /// package's rule, so both front ends agree); a revision of the same characters and `/`
    /// (`refs/pr/1`), with no empty or `..` segment, since it names a file in the cache.
    pub fn parse(name: &str) -> Option<Self> {
        let (id, revision) = match name.split_once('@') {
            Some((id, revision)) => (id, Some(revision)),
            None => (name, None),
        };
        let (owner, repo) = id.split_once('/')?;
        let word = |s: &str| {
            !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        let id_ok = word(owner)
            && word(repo)
            && owner.as_bytes()[0].is_ascii_alphanumeric()
            && repo != "."
            && repo != "..";
        let revision_ok = |r: &str| r.split('/').all(|seg| word(seg) && seg != "." && seg != "..");
        match revision {
            _ if !id_ok => None,
            Some(r) if !revision_ok(r) => None,
            r => Some(Self {
                id: id.to_string(),
                revision: r.unwrap_or(DEFAULT_REVISION).to_string(),
            }),
        }
    }
}

impl fmt::Display for HubModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (revision {})", self.id, self.revision)
    }
}

impl fmt::Display for ModelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local(path) => write!(f, "{}", path.display()),
            Self::Hub(hub) => hub.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_ids_and_revisions() {
        let hub = |id: &str, revision: &str| {
            Some(HubModel { id: id.to_string(), revision: revision.to_string() })
        };
        let cases: [(&str, Option<HubModel>); 14] = [
            (
                "sentence-transformers/sentence-t5-base",
                hub("sentence-transformers/sentence-t5-base", "main"),
            ),
            ("org/name@v1.0", hub("org/name", "v1.0")),
            ("org/name@refs/pr/1", hub("org/name", "refs/pr/1")),
            ("org/name.v2_x", hub("org/name.v2_x", "main")),
            // Paths, not ids.
            ("name", None),
            ("./org/name", None),
            ("/abs/name", None),
            ("org/name/", None),
            ("a/b/c", None),
            ("../name", None),
            ("org/..", None),
            ("org/name@", None),
            ("org/name@../../x", None),
            ("org/na me", None),
        ];
        for (name, want) in cases {
            assert_eq!(HubModel::parse(name), want, "{name}");
        }
    }

    #[test]
    fn an_existing_path_wins_over_an_id() {
        let base = std::env::temp_dir().join(format!("st5-source-{}", std::process::id()));
        std::fs::create_dir_all(base.join("org/name")).unwrap();
        assert_eq!(
            ModelSource::parse("org/name", &base),
            ModelSource::Local(base.join("org/name"))
        );
        assert_eq!(
            ModelSource::parse("org/other@v2", &base),
            ModelSource::Hub(HubModel { id: "org/other".into(), revision: "v2".into() })
        );
        assert_eq!(ModelSource::parse("missing", &base), ModelSource::Local(base.join("missing")));
        assert_eq!(ModelSource::parse("org/other", &base).to_string(), "org/other (revision main)");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
