#!/usr/bin/env bash
# A real sentence corpus for the index's recall tests and scale benchmark: the first N distinct
# lines of shared/data's caption, news, Wikipedia and WikiSplit sentence pools, in a fixed order
# (no evaluation test split among them; see shared/data/SOURCES.md). The pools hold about 189k
# distinct sentences; past that (the 1M benchmark) each further line joins two pool sentences
# drawn by a fixed seed, so every line is still distinct text for the model to embed (which
# pairs depends on the awk's generator: mawk's, Debian's default awk, for the figures in docs/search-at-scale.md).
# Usage: scripts/index-corpus.sh N OUT [DATA_DIR]
set -euo pipefail
n=$1 out=$2
data=${3:-${ST5_DATA:-$(dirname "$0")/../../shared/data}}
t=$data/train
[ -d "$t" ] || { echo "index-corpus: no $t (pass the shared data folder)" >&2; exit 1; }
# The pool is read only as far as needed, so its first commands may end by SIGPIPE.
set +o pipefail
{
  cat "$t"/multi30k_flickr30k_captions/train.{1,2,3,4,5}.en
  cut -f2 "$t"/leipzig_sentences/eng_news_2016_10K-sentences.txt "$t"/leipzig_sentences/eng_wikipedia_2016_10K-sentences.txt
  cat "$t"/clinc150/all_wiki_sents.txt
  cut -f1 "$t"/wikisplit/tune.tsv "$t"/wikisplit/validation.tsv
} | tr -d '\r' | awk -v n="$n" '
  length($0) > 0 && !seen[$0]++ { pool[c++] = $0; print; if (c == n) exit }
  END {
    if (c < 2) exit  # nothing to join: the count check below says so
    srand(19)
    m = c
    for (; c < n; c++) {
      line = pool[int(rand() * m)] " " pool[int(rand() * m)]
      # Repeats are drawn again, a bounded number of times (a tiny pool runs out of pairs).
      if (seen[line]++) { if (++repeats > 10 * n) exit; c--; continue }
      print line
    }
  }' > "$out.partial"
set -o pipefail
have=$(wc -l < "$out.partial")
if [ "$have" -lt "$n" ]; then
  echo "index-corpus: only $have distinct sentences under $t (wanted $n)" >&2
  rm -f "$out.partial"
  exit 1
fi
mv "$out.partial" "$out"
