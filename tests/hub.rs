//! Models by Hugging Face hub id (`st5 --model org/name[@revision]`, the trainer's `[model]
//! init`), against a fake hub served in-process on 127.0.0.1: `{endpoint}/{id}/resolve/
//! {revision}/{file}` from fixture directories, with the headers hf-hub reads (`ETag`,
//! `X-Repo-Commit`, `Content-Range` for its ranged GETs). Each test has its own server and its own
//! `HF_HOME`. Needs `cargo build --release --bin st5 --bin trainer` first.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use st5_tests::*;

/// One revision of one repository on the fake hub.
struct Served {
    id: &'static str,
    revision: &'static str,
    commit: &'static str,
    dir: PathBuf,
}

const MAIN: &str = "1111111111111111111111111111111111111111";
const V1: &str = "2222222222222222222222222222222222222222";

/// The fake hub's repositories: `st5-test/tiny` (main: a sentence-transformers model; v1: a
/// sharded Hugging Face T5) and `st5-test/t5` (a plain Hugging Face T5).
fn repos() -> Vec<Served> {
    vec![
        Served {
            id: "st5-test/tiny",
            revision: "main",
            commit: MAIN,
            dir: fixture("st-enc-mean-relu"),
        },
        Served {
            id: "st5-test/tiny",
            revision: "v1",
            commit: V1,
            dir: fixture("hf-t5-gated-bf16-sharded"),
        },
        Served {
            id: "st5-test/t5",
            revision: "main",
            commit: MAIN,
            dir: fixture("hf-t5-relu-f16"),
        },
    ]
}

struct FakeHub {
    url: String,
    /// Every request, as `METHOD /path`.
    log: Arc<Mutex<Vec<String>>>,
}

impl FakeHub {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let (repos, seen) = (Arc::new(repos()), log.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (repos, seen) = (repos.clone(), seen.clone());
                std::thread::spawn(move || serve(stream, &repos, &seen));
            }
        });
        Self { url, log }
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// A content hash for the `ETag` (hf-hub names the cached blob by it): FNV-1a, and the length.
fn etag(bytes: &[u8]) -> String {
    let hash = bytes
        .iter()
        .fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3));
    format!("{hash:016x}{:x}", bytes.len())
}

/// Answers one request (HTTP/1.1, one request per connection) as the hub's `resolve` endpoint
/// does: 200 or 206 for a `Range`, 404 with the hub's `X-Error-Code` otherwise.
fn serve(stream: TcpStream, repos: &[Served], log: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut words = line.split_whitespace();
    let (method, target) =
        (words.next().unwrap_or("").to_string(), words.next().unwrap_or("").to_string());
    let mut range = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("range")
        {
            range = value.trim().strip_prefix("bytes=").map(str::to_string);
        }
    }
    log.lock().unwrap().push(format!("{method} {target}"));
    let route = target.strip_prefix('/').and_then(|t| t.split_once("/resolve/"));
    let (id, revision, file) = match route.and_then(|(id, rest)| Some((id, rest.split_once('/')?)))
    {
        Some((id, (revision, file))) => (id, revision, file),
        None => ("", "", ""),
    };
    let repo = repos.iter().find(|r| r.id == id);
    let found = repos.iter().find(|r| r.id == id && r.revision == revision);
    let file_path = found.map(|r| r.dir.join(file)).filter(|p| !file.contains("..") && p.is_file());
    let mut out = stream;
    let Some(path) = file_path else {
        let code = match (repo, found) {
            (None, _) => "RepoNotFound",
            (_, None) => "RevisionNotFound",
            _ => "EntryNotFound",
        };
        let _ = write!(
            out,
            "HTTP/1.1 404 Not Found\r\nX-Error-Code: {code}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let len = bytes.len();
    let (status, start, end) = match range.as_deref().and_then(|r| r.split_once('-')) {
        Some((a, b)) => {
            let start: usize = a.parse().unwrap();
            let end = if b.is_empty() { len - 1 } else { b.parse::<usize>().unwrap().min(len - 1) };
            ("206 Partial Content", start, end)
        }
        None => ("200 OK", 0, len - 1),
    };
    let body = &bytes[start..=end];
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nETag: \"{}\"\r\nX-Repo-Commit: {}\r\nConnection: close\r\n",
        body.len(),
        etag(&bytes),
        found.unwrap().commit
    );
    if status.starts_with("206") {
        head += &format!("Content-Range: bytes {start}-{end}/{len}\r\n");
    }
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(b"\r\n");
    if method != "HEAD" {
        let _ = out.write_all(body);
    }
}

/// A scratch folder for one test: `HF_HOME`, inputs and outputs.
fn scratch(tag: &str) -> PathBuf {
    let dir = scratch_dir(&format!("hub-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a workspace binary against `hub`, with `home` as `HF_HOME` (and the other hub
/// variables cleared), from `cwd`.
fn run_bin(
    bin: &str,
    args: &[&str],
    hub: &FakeHub,
    home: &Path,
    offline: bool,
    cwd: &Path,
) -> Output {
    let mut cmd = Command::new(workspace_bin(bin));
    cmd.args(args)
        .current_dir(cwd)
        .env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", home)
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_TOKEN")
        .stdin(Stdio::null());
    if offline {
        cmd.env("HF_HUB_OFFLINE", "1");
    } else {
        cmd.env_remove("HF_HUB_OFFLINE");
    }
    cmd.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `st5 embed --model MODEL --input texts --output OUT.npy [extra]`: the `.npy` bytes.
fn embed(
    hub: &FakeHub,
    dir: &Path,
    model: &str,
    extra: &[&str],
    offline: bool,
    cwd: &Path,
) -> Vec<u8> {
    let input = dir.join("texts.txt");
    std::fs::write(&input, "A man is playing a guitar.\nThe cat sleeps.\n\nTwo dogs run.\n")
        .unwrap();
    let out = dir.join("out.npy");
    let _ = std::fs::remove_file(&out);
    let mut args = vec!["embed", "--model", model, "--input", input.to_str().unwrap()];
    args.extend(["--output", out.to_str().unwrap()]);
    args.extend(extra);
    let o = run_bin("st5", &args, hub, &dir.join("hf"), offline, cwd);
    assert!(o.status.success(), "st5 embed --model {model}: {}", stderr(&o));
    std::fs::read(&out).unwrap()
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.extend(files_under(&path).into_iter().map(|f| format!("{name}/{f}")));
        } else {
            out.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

#[test]
fn a_hub_id_embeds_as_its_directory_does_fetching_only_what_loading_reads_then_offline() {
    let hub = FakeHub::start();
    let dir = scratch("id");
    let fixture_dir = fixture("st-enc-mean-relu");
    let want = embed(&hub, &dir, fixture_dir.to_str().unwrap(), &[], false, &dir);
    assert!(hub.requests().is_empty(), "a directory needs no hub: {:?}", hub.requests());

    let got = embed(&hub, &dir, "st5-test/tiny", &[], false, &dir);
    assert_eq!(got, want, "by id and by directory differ");
    // The standard cache layout, holding exactly the files the layout reads.
    let snapshot = dir.join("hf/hub/models--st5-test--tiny/snapshots").join(MAIN);
    assert_eq!(
        files_under(&snapshot),
        [
            "1_Pooling/config.json",
            "2_Dense/config.json",
            "2_Dense/model.safetensors",
            "config.json",
            "model.safetensors",
            "modules.json",
            "sentence_bert_config.json",
            "tokenizer.json",
            "tokenizer_config.json",
        ]
    );
    let refs = dir.join("hf/hub/models--st5-test--tiny/refs/main");
    assert_eq!(std::fs::read_to_string(refs).unwrap(), MAIN);
    let requests = hub.requests();
    assert!(
        !requests.iter().any(|r| r.contains("README.md") || r.contains("expected.json")),
        "fetched a file loading does not read: {requests:?}"
    );

    // Offline, from the cache alone: not one request, the same bytes.
    let before = hub.requests().len();
    let offline = embed(&hub, &dir, "st5-test/tiny", &[], true, &dir);
    assert_eq!(offline, want, "offline differs");
    assert_eq!(hub.requests().len(), before, "offline mode made requests");

    // Offline, a revision never fetched: an error naming it, the id and the offline mode.
    let o = run_bin(
        "st5",
        &["embed", "--model", "st5-test/tiny@v1"],
        &hub,
        &dir.join("hf"),
        true,
        &dir,
    );
    let msg = stderr(&o);
    assert!(!o.status.success());
    for part in ["st5-test/tiny", "v1", "HF_HUB_OFFLINE"] {
        assert!(msg.contains(part), "no `{part}` in: {msg}");
    }

    // Online again: the cached files are reused (one ranged GET each for the commit, no full
    // download).
    let before = hub.requests().len();
    assert_eq!(embed(&hub, &dir, "st5-test/tiny", &[], false, &dir), want);
    let again = &hub.requests()[before..];
    assert!(again.iter().all(|r| r.starts_with("GET /st5-test/tiny/resolve/main/")), "{again:?}");

    // `st5 quantize` resolves the same way: by id, the same directory as by path.
    let (by_id, by_dir) = (dir.join("q-id"), dir.join("q-dir"));
    for (model, out) in [("st5-test/tiny", &by_id), (fixture_dir.to_str().unwrap(), &by_dir)] {
        let args =
            ["quantize", "--model", model, "--dtype", "int8", "--output", out.to_str().unwrap()];
        let o = run_bin("st5", &args, &hub, &dir.join("hf"), false, &dir);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    // The model card comes along (fetched for `quantize` alone).
    assert_eq!(files_under(&by_id), files_under(&by_dir));
    assert!(by_id.join("README.md").is_file());
    for file in files_under(&by_dir) {
        let (a, b) =
            (std::fs::read(by_id.join(&file)).unwrap(), std::fs::read(by_dir.join(&file)).unwrap());
        assert!(a == b, "quantized {file} differs by id and by directory");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_revision_reads_its_own_commit() {
    let hub = FakeHub::start();
    let dir = scratch("revision");
    let tokenizer = tokenizer_json();
    let extra = ["--tokenizer", tokenizer.to_str().unwrap()];
    let sharded = fixture("hf-t5-gated-bf16-sharded");
    let want = embed(&hub, &dir, sharded.to_str().unwrap(), &extra, false, &dir);
    let got = embed(&hub, &dir, "st5-test/tiny@v1", &extra, false, &dir);
    assert_eq!(got, want, "@v1 is not the sharded model");
    let snapshot = dir.join("hf/hub/models--st5-test--tiny/snapshots").join(V1);
    let shards = files_under(&snapshot).iter().filter(|f| f.ends_with(".safetensors")).count();
    assert_eq!(shards, 5, "{:?}", files_under(&snapshot));
    // The hub's absent files are recorded (`.no_exist`, as huggingface_hub does), so offline
    // mode can tell them from files never fetched.
    let no_exist = dir.join("hf/hub/models--st5-test--tiny/.no_exist").join(V1);
    assert!(no_exist.join("modules.json").is_file(), "{:?}", files_under(&no_exist));
    assert_eq!(embed(&hub, &dir, "st5-test/tiny@v1", &extra, true, &dir), want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_id_or_revision_names_both() {
    let hub = FakeHub::start();
    let dir = scratch("missing");
    for (model, id, revision) in [
        ("st5-test/missing", "st5-test/missing", "main"),
        ("st5-test/tiny@nope", "st5-test/tiny", "nope"),
    ] {
        let o = run_bin("st5", &["embed", "--model", model], &hub, &dir.join("hf"), false, &dir);
        let msg = stderr(&o);
        assert!(!o.status.success(), "{model} succeeded");
        assert!(msg.contains(id) && msg.contains(revision), "{model}: {msg}");
        assert!(msg.contains(&hub.url), "{model}: the endpoint is not named: {msg}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_existing_directory_wins_over_a_hub_id() {
    let hub = FakeHub::start();
    let dir = scratch("local");
    let tokenizer = tokenizer_json();
    let extra = ["--tokenizer", tokenizer.to_str().unwrap()];
    // `st5-test/tiny` relative to the working directory: a plain T5, not the hub's model.
    let local = dir.join("st5-test/tiny");
    std::fs::create_dir_all(&local).unwrap();
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(fixture("hf-t5-relu-f16").join(file), local.join(file)).unwrap();
    }
    let want = embed(&hub, &dir, local.to_str().unwrap(), &extra, false, &dir);
    let got = embed(&hub, &dir, "st5-test/tiny", &extra, false, &dir);
    assert_eq!(got, want);
    assert!(hub.requests().is_empty(), "the directory was not used: {:?}", hub.requests());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two steps of the trainer from `[model] init = "st5-test/t5"` write the same model as from the
/// fixture's directory.
#[test]
fn the_trainer_starts_from_a_hub_id() {
    let hub = FakeHub::start();
    let dir = scratch("trainer");
    let root = root();
    let config = |name: &str, init: &str| {
        let text = format!(
            "seed = 7\ndevice = \"cpu\"\noutput = {:?}\neval_every = 0\neval_data = {:?}\n\
             [model]\ninit = {init:?}\ntokenizer = {:?}\nvariant = \"enc-mean\"\ndim = 16\n\
             max_seq_length = 32\n\
             [[stage]]\nname = \"qa\"\nbatch_size = 8\nsteps = 2\nlr = 1e-3\ntemperature = 0.01\n\
             [[stage.dataset]]\npath = {:?}\ncolumns = [\"anchor\", \"positive\"]\n",
            dir.join(name).join("model"),
            shared_data(),
            tokenizer_json(),
            root.join("trainer/configs/data/qa.jsonl"),
        );
        std::fs::create_dir_all(dir.join(name)).unwrap();
        let path = dir.join(name).join("config.toml");
        std::fs::write(&path, text).unwrap();
        path
    };
    let from_dir = config("dir", fixture("hf-t5-relu-f16").to_str().unwrap());
    let from_id = config("id", "st5-test/t5");
    for cfg in [&from_dir, &from_id] {
        let args = ["train", "--config", cfg.to_str().unwrap()];
        let o = run_bin("trainer", &args, &hub, &dir.join("hf"), false, &dir);
        assert!(o.status.success(), "{}: {}", cfg.display(), stderr(&o));
    }
    let (a, b) = (dir.join("dir/model"), dir.join("id/model"));
    let weights: Vec<String> =
        files_under(&a).into_iter().filter(|f| f.ends_with(".safetensors")).collect();
    assert!(!weights.is_empty(), "no weights in {}", a.display());
    for file in weights {
        assert!(
            std::fs::read(a.join(&file)).unwrap() == std::fs::read(b.join(&file)).unwrap(),
            "{file} differs between init by directory and by hub id"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
