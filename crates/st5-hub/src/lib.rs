//! `st5-hub`: models by Hugging Face hub id. [`resolve`] turns a [`ModelSource`] into a local
//! directory: a path as it is, a hub model as its snapshot in the standard cache, holding only the
//! files loading reads. Which files those are is asked of st5-format's planner (`probe.rs`, the
//! same one the browser fetches by), so that no list of files is kept here.
//!
//! The cache is huggingface_hub's (`HF_HOME`, default `~/.cache/huggingface`, or `HF_HUB_CACHE`):
//! `models--org--name/{blobs,snapshots/<commit>,refs/<revision>}`, with `.no_exist/<commit>/`
//! recording files the hub does not have, so that Python and st5 share downloads. `HF_ENDPOINT`
//! names a mirror; `HF_HUB_OFFLINE=1` reads the cache alone; `HF_TOKEN` (or the token file
//! `huggingface-cli login` writes) opens private and gated models. hf-hub provides the cache
//! layout and the downloads; offline mode, `.no_exist` and the errors are this crate's.
//!
//! Kept apart from st5-format so that the HTTP client stays out of the browser's and the fuzz
//! targets' builds: the CLI and the trainer import it, nothing else.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use hf_hub::api::sync::{Api, ApiBuilder, ApiError, ApiRepo};
use hf_hub::{Cache, CacheRepo, Repo, RepoType};
use st5_format::files::FileBytes;
use st5_format::probe::{FilePlan, Probe, plan};
pub use st5_format::source::{DEFAULT_REVISION, HubModel, ModelSource};

/// The hub unless `HF_ENDPOINT` names another.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// What can go wrong fetching a hub model; every message names the id and the revision.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Every file the model would need is missing: no such repository, or no such revision.
    #[error(
        "no model {id} at revision {revision} on {endpoint}: the repository or the revision does not exist (and {id} is no local directory)"
    )]
    NotFound { id: String, revision: String, endpoint: String },
    /// The hub refused a request (401/403: private or gated, or a missing repository when not
    /// logged in).
    #[error(
        "model {id} (revision {revision}; no local directory, so read from the hub): {url}: HTTP {status}{hint}"
    )]
    Refused { id: String, revision: String, url: String, status: u16, hint: &'static str },
    /// A request failed for another reason (network, a header the protocol needs).
    #[error("model {id} (revision {revision}; no local directory, so read from the hub): {url}")]
    Request {
        id: String,
        revision: String,
        url: String,
        #[source]
        source: ApiError,
    },
    /// `HF_HUB_OFFLINE` is set and the cache has no snapshot for the revision.
    #[error(
        "model {id} (revision {revision}) is not in the cache {cache} and HF_HUB_OFFLINE is set: run once online, or unset it"
    )]
    NotCached { id: String, revision: String, cache: PathBuf },
    /// `HF_HUB_OFFLINE` is set and the snapshot lacks a file loading reads (and has no record that
    /// the hub lacks it).
    #[error(
        "model {id} (revision {revision}): {file} is not in the cache {snapshot} and HF_HUB_OFFLINE is set: run once online, or unset it"
    )]
    FileNotCached { id: String, revision: String, file: String, snapshot: PathBuf },
    /// The revision (a branch) moved to another commit between two files of one load.
    #[error(
        "model {id} (revision {revision}) moved from commit {first} to {now} during the download: run again"
    )]
    Moved { id: String, revision: String, first: String, now: String },
    /// The files fetched do not make a model (st5-format's error names the file's URL or path).
    #[error("model {id} (revision {revision})")]
    Layout {
        id: String,
        revision: String,
        #[source]
        source: Box<st5_format::Error>,
    },
    /// Reading or writing the cache.
    #[error("model {id} (revision {revision}): {path}")]
    Cache {
        id: String,
        revision: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The directory a model source loads from: a local path as it is (loading reports it if
/// missing), a hub model as its cached snapshot, fetched first unless offline. The one function
/// every front end resolves `--model` / `[model] init` through. `optional` names files fetched
/// too when the hub has them, beyond those loading reads (`st5 quantize` carries the model card).
pub fn resolve(source: &ModelSource, optional: &[&str]) -> Result<PathBuf> {
    match source {
        ModelSource::Local(path) => Ok(path.clone()),
        ModelSource::Hub(model) => Hub::from_env().fetch(model, optional),
    }
}

/// The hub settings, from the environment as huggingface_hub reads them.
pub struct Hub {
    /// The cache's `hub` folder (`$HF_HUB_CACHE`, else `$HF_HOME/hub`).
    pub cache: PathBuf,
    /// `$HF_ENDPOINT` without a trailing `/`, else [`DEFAULT_ENDPOINT`].
    pub endpoint: String,
    /// `$HF_HUB_OFFLINE` is 1, true, yes or on.
    pub offline: bool,
    /// `$HF_TOKEN`, else the token file in `$HF_HOME`.
    pub token: Option<String>,
}

impl Hub {
    /// The settings as huggingface_hub reads them (an empty variable counts as unset).
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let home = Cache::from_env();
        let cache = var("HF_HUB_CACHE").map(PathBuf::from).unwrap_or_else(|| home.path().clone());
        let endpoint = var("HF_ENDPOINT")
            .map(|e| e.trim_end_matches('/').to_string())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let offline = var("HF_HUB_OFFLINE")
            .is_some_and(|v| ["1", "ON", "YES", "TRUE"].contains(&v.to_uppercase().as_str()));
        let token = var("HF_TOKEN").or_else(|| home.token());
        Self { cache, endpoint, offline, token }
    }

    /// The snapshot directory of `model`, holding every file loading reads, and those of
    /// `optional` the hub has (offline: those the cache has).
    pub fn fetch(&self, model: &HubModel, optional: &[&str]) -> Result<PathBuf> {
        let repo = Repo::with_revision(model.id.clone(), RepoType::Model, model.revision.clone());
        let cached = Cache::new(self.cache.clone()).repo(repo.clone());
        let dir = self.cache.join(repo.folder_name());
        let fetch = Fetch { model, hub: self, cached, dir };
        if self.offline { fetch.cached_snapshot() } else { fetch.download(repo, optional) }
    }
}

/// One model being fetched.
struct Fetch<'a> {
    model: &'a HubModel,
    hub: &'a Hub,
    cached: CacheRepo,
    /// `models--org--name` in the cache.
    dir: PathBuf,
}

/// Weights are only asked about for existence until the layout is known (see `probe.rs`).
fn is_weights(file: &str) -> bool {
    file.ends_with(".safetensors") || file.ends_with(".bin")
}

impl Fetch<'_> {
    fn id(&self) -> (String, String) {
        (self.model.id.clone(), self.model.revision.clone())
    }

    fn cache_error(&self, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
        let (id, revision) = self.id();
        let path = path.to_path_buf();
        move |source| Error::Cache { id, revision, path, source }
    }

    fn layout_error(&self, source: st5_format::Error) -> Error {
        let (id, revision) = self.id();
        Error::Layout { id, revision, source: Box::new(source) }
    }

    /// `.no_exist/<commit>`: huggingface_hub's record of files the hub lacks at a commit.
    fn no_exist(&self, commit: &str) -> PathBuf {
        self.dir.join(".no_exist").join(commit)
    }

    fn snapshot(&self, commit: &str) -> PathBuf {
        self.dir.join("snapshots").join(commit)
    }

    fn read(&self, path: &Path) -> Result<FileBytes> {
        FileBytes::map(path).map_err(self.cache_error(path))
    }

    /// Offline: the planner answered from the snapshot the revision points to, each file
    /// present, recorded absent, or an error naming it.
    fn cached_snapshot(&self) -> Result<PathBuf> {
        let (id, revision) = self.id();
        let refs = self.dir.join("refs").join(&revision);
        let commit = match std::fs::read_to_string(&refs) {
            Ok(commit) => commit.trim().to_string(),
            // A commit hash names its snapshot directly.
            Err(_) => revision.clone(),
        };
        let snapshot = self.snapshot(&commit);
        if commit.is_empty() || !snapshot.is_dir() {
            return Err(Error::NotCached { id, revision, cache: self.hub.cache.clone() });
        }
        let no_exist = self.no_exist(&commit);
        let missing = |file: &str| Error::FileNotCached {
            id: id.clone(),
            revision: revision.clone(),
            file: file.to_string(),
            snapshot: snapshot.clone(),
        };
        let mut probe = Probe::new(format!("{}/", snapshot.display()));
        loop {
            match plan(&probe).map_err(|e| self.layout_error(e))? {
                FilePlan::Need(files) => {
                    for file in files {
                        let path = snapshot.join(&file);
                        if path.is_file() {
                            if is_weights(&file) {
                                probe.present.insert(file);
                            } else {
                                let bytes = self.read(&path)?;
                                probe.fetched.insert(file, bytes);
                            }
                        } else if no_exist.join(&file).exists() {
                            probe.absent.insert(file);
                        } else {
                            return Err(missing(&file));
                        }
                    }
                }
                FilePlan::Ready(weights) => {
                    if let Some(file) = weights.iter().find(|w| !snapshot.join(w).is_file()) {
                        return Err(missing(file));
                    }
                    return Ok(snapshot);
                }
            }
        }
    }

    /// Online: each file the planner asks for is looked up on the hub (one ranged GET for its
    /// commit and etag), downloaded unless the snapshot has it, and all must come from one
    /// commit; then the revision's ref and the `.no_exist` records are written.
    fn download(&self, repo: Repo, optional: &[&str]) -> Result<PathBuf> {
        let (id, revision) = self.id();
        let api = ApiBuilder::from_cache(Cache::new(self.hub.cache.clone()))
            .with_endpoint(self.hub.endpoint.clone())
            .with_token(self.hub.token.clone())
            .with_progress(std::io::stderr().is_terminal())
            .build()
            .map_err(|source| Error::Request {
                id: id.clone(),
                revision: revision.clone(),
                url: self.hub.endpoint.clone(),
                source,
            })?;
        let remote = api.repo(repo);
        let mut state = Online { api: &api, remote: &remote, commit: None, absent: Vec::new() };
        let mut probe = Probe::new(remote.url(""));
        let weights = loop {
            let step = plan(&probe);
            match step {
                Ok(FilePlan::Need(files)) => {
                    for file in files {
                        // Weights are only checked for existence here (see `is_weights`).
                        match state.lookup(self, &file, !is_weights(&file))? {
                            None => {
                                probe.absent.insert(file.clone());
                                state.absent.push(file);
                            }
                            Some(_) if is_weights(&file) => {
                                probe.present.insert(file);
                            }
                            Some(path) => {
                                let bytes = self.read(&path)?;
                                probe.fetched.insert(file, bytes);
                            }
                        }
                    }
                }
                Ok(FilePlan::Ready(weights)) => break weights,
                // Nothing at all was found: the id or the revision is wrong, which a 404 for
                // each file cannot tell apart.
                Err(_) if state.commit.is_none() => {
                    return Err(Error::NotFound {
                        id,
                        revision,
                        endpoint: self.hub.endpoint.clone(),
                    });
                }
                Err(e) => return Err(self.layout_error(e)),
            }
        };
        for file in &weights {
            if state.lookup(self, file, true)?.is_none() {
                // Listed by the planner because it existed a moment ago.
                return Err(state.refused(self, file, 404));
            }
        }
        for file in optional {
            if state.lookup(self, file, true)?.is_none() {
                state.absent.push(file.to_string());
            }
        }
        let commit = state.commit.expect("a planned model has files");
        if commit != revision {
            self.cached.create_ref(&commit).map_err(self.cache_error(&self.hub.cache))?;
        }
        let no_exist = self.no_exist(&commit);
        for file in &state.absent {
            let marker = no_exist.join(file);
            let made = marker.parent().map_or(Ok(()), std::fs::create_dir_all);
            made.and_then(|()| std::fs::write(&marker, b"")).map_err(self.cache_error(&marker))?;
        }
        Ok(self.snapshot(&commit))
    }
}

/// The online side of one fetch: the client, and the commit the first file came from.
struct Online<'a> {
    api: &'a Api,
    remote: &'a ApiRepo,
    commit: Option<String>,
    absent: Vec<String>,
}

impl Online<'_> {
    fn refused(&self, fetch: &Fetch, file: &str, status: u16) -> Error {
        let (id, revision) = fetch.id();
        let hint = match status {
            401 | 403 => {
                " (a private or gated model, or a missing one: set HF_TOKEN to a token that may read it)"
            }
            _ => "",
        };
        Error::Refused { id, revision, url: self.remote.url(file), status, hint }
    }

    /// The cached path of `file` at the revision's commit, downloaded if the snapshot lacks it
    /// and `download` is set; `None` when the hub has no such file.
    fn lookup(&mut self, fetch: &Fetch, file: &str, download: bool) -> Result<Option<PathBuf>> {
        let (id, revision) = fetch.id();
        let url = self.remote.url(file);
        let request = |source| Error::Request {
            id: id.clone(),
            revision: revision.clone(),
            url: url.clone(),
            source,
        };
        let meta = match self.api.metadata(&url) {
            Ok(meta) => meta,
            Err(ApiError::RequestError(e)) => match *e {
                ureq::Error::StatusCode(404) => return Ok(None),
                ureq::Error::StatusCode(status) => return Err(self.refused(fetch, file, status)),
                e => return Err(request(ApiError::RequestError(Box::new(e)))),
            },
            Err(e) => return Err(request(e)),
        };
        let commit = self.commit.get_or_insert_with(|| meta.commit_hash().to_string()).clone();
        let moved = |now: &str| Error::Moved {
            id: id.clone(),
            revision: revision.clone(),
            first: commit.clone(),
            now: now.to_string(),
        };
        if meta.commit_hash() != commit {
            return Err(moved(meta.commit_hash()));
        }
        let path = fetch.snapshot(&commit).join(file);
        if path.is_file() || !download {
            return Ok(Some(path));
        }
        let got = self.remote.download(file).map_err(request)?;
        if got != path {
            // The download asked again and found a newer commit: `snapshots/<commit>/<file>`.
            let snapshots = fetch.dir.join("snapshots");
            let now = got.strip_prefix(&snapshots).ok().and_then(|p| p.components().next());
            let now = now.map(|c| c.as_os_str().to_string_lossy().into_owned());
            return Err(moved(&now.unwrap_or_else(|| got.display().to_string())));
        }
        Ok(Some(path))
    }
}
