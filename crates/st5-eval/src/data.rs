//! Parsers for the evaluation sets in `shared/data` (layouts and traps per its `SOURCES.md`):
//! unquoted TSV, blank gold lines in STS15/16, STS13's SMT gold file without inputs, Latin-1
//! files and a UTF-8 BOM. Every error names the file and line.

use std::path::{Path, PathBuf};

use crate::error::{EvalError, Result};

/// Where the evaluation sets are when nobody says: `$ST5_DATA`, else `../shared/data` from the
/// working directory (where it sits beside an st5 checkout). The CLI's `--data` and the
/// trainer's `eval_data` default to it.
pub fn default_data_dir() -> PathBuf {
    std::env::var_os("ST5_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/data"))
}

/// A scored sentence pair (STS, SICK-R, STS-B).
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredPair {
    pub a: String,
    pub b: String,
    pub score: f64,
}

/// A labelled text (MR, CR, SUBJ, MPQA, SST-2, TREC).
#[derive(Debug, Clone, PartialEq)]
pub struct Labeled {
    pub text: String,
    pub label: usize,
}

/// A labelled pair (MRPC, GLUE pair tasks).
#[derive(Debug, Clone, PartialEq)]
pub struct LabeledPair {
    pub a: String,
    pub b: String,
    pub label: usize,
}

/// Reads a text file: UTF-8 (BOM stripped), falling back to Latin-1 for files that are not
/// valid UTF-8 (MR, SUBJ, TREC train), where every byte is one code point.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes =
        std::fs::read(path).map_err(|source| EvalError::Io { path: path.into(), source })?;
    let text = match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => e.into_bytes().iter().map(|&b| b as char).collect(),
    };
    Ok(text.strip_prefix('\u{feff}').map(str::to_string).unwrap_or(text))
}

/// Lines without their terminators (`\n` or `\r\n`); a final newline adds no empty line.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l))
}

fn bad(path: &Path, line: usize, message: impl Into<String>) -> EvalError {
    EvalError::Parse { path: path.into(), line, message: message.into() }
}

fn parse_score(path: &Path, line: usize, s: &str) -> Result<f64> {
    s.trim().parse().map_err(|_| bad(path, line, format!("score `{s}` is not a number")))
}

/// One STS year: `STS.input.<set>.txt` (sentence1 TAB sentence2) with `STS.gs.<set>.txt`.
/// Pairs with a blank gold line are skipped; a gold file without an input file (STS13 SMT) is
/// skipped by name. Returns `(set name, pairs)` sorted by set name.
pub fn sts_year(dir: &Path) -> Result<(Vec<(String, Vec<ScoredPair>)>, Vec<String>)> {
    let mut sets = Vec::new();
    let mut skipped = Vec::new();
    let entries =
        std::fs::read_dir(dir).map_err(|source| EvalError::Io { path: dir.into(), source })?;
    let mut gold_files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("STS.gs.") && n.ends_with(".txt") && n != "STS.gs.ALL.txt"
            })
        })
        .collect();
    gold_files.sort();
    for gs in gold_files {
        let name = gs
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .trim_start_matches("STS.gs.")
            .trim_end_matches(".txt")
            .to_string();
        let input = dir.join(format!("STS.input.{name}.txt"));
        if !input.is_file() {
            skipped.push(name);
            continue;
        }
        let gold_text = read_text(&gs)?;
        let input_text = read_text(&input)?;
        let gold: Vec<(usize, &str)> = lines(&gold_text).collect();
        let inputs: Vec<(usize, &str)> = lines(&input_text).collect();
        if gold.len() != inputs.len() {
            return Err(bad(
                &gs,
                gold.len(),
                format!(
                    "{} gold lines but {} input lines in {}",
                    gold.len(),
                    inputs.len(),
                    input.display()
                ),
            ));
        }
        let mut pairs = Vec::new();
        for ((ln, g), (iln, inp)) in gold.into_iter().zip(inputs) {
            if g.trim().is_empty() {
                continue;
            }
            let mut cols = inp.split('\t');
            let (Some(a), Some(b)) = (cols.next(), cols.next()) else {
                return Err(bad(&input, iln, "expected sentence1 TAB sentence2"));
            };
            pairs.push(ScoredPair {
                a: a.to_string(),
                b: b.to_string(),
                score: parse_score(&gs, ln, g)?,
            });
        }
        sets.push((name, pairs));
    }
    Ok((sets, skipped))
}

/// STS Benchmark `sts-{train,dev,test}.csv`: TAB columns genre, file, year, id, score,
/// sentence1, sentence2 (extra columns ignored), no header, no quoting.
pub fn sts_benchmark(path: &Path) -> Result<Vec<ScoredPair>> {
    let text = read_text(path)?;
    lines(&text)
        .filter(|(_, l)| !l.is_empty())
        .map(|(ln, l)| {
            let cols: Vec<&str> = l.split('\t').collect();
            if cols.len() < 7 {
                return Err(bad(
                    path,
                    ln,
                    format!("expected at least 7 TAB columns, found {}", cols.len()),
                ));
            }
            Ok(ScoredPair {
                a: cols[5].into(),
                b: cols[6].into(),
                score: parse_score(path, ln, cols[4])?,
            })
        })
        .collect()
}

/// SICK `SICK_{train,trial,test_annotated}.txt`: a header, then TAB columns pair_ID,
/// sentence_A, sentence_B, relatedness_score, entailment_judgment.
pub fn sick(path: &Path) -> Result<Vec<ScoredPair>> {
    let text = read_text(path)?;
    lines(&text)
        .skip(1)
        .filter(|(_, l)| !l.is_empty())
        .map(|(ln, l)| {
            let cols: Vec<&str> = l.split('\t').collect();
            if cols.len() < 4 {
                return Err(bad(
                    path,
                    ln,
                    "expected pair_ID, sentence_A, sentence_B, relatedness_score",
                ));
            }
            Ok(ScoredPair {
                a: cols[1].into(),
                b: cols[2].into(),
                score: parse_score(path, ln, cols[3])?,
            })
        })
        .collect()
}

/// A binary task stored as one file per class, one text per line (MR, CR, SUBJ, MPQA):
/// `pos` lines get label 1, `neg` lines label 0. Every line is a sample, blank ones included,
/// as in SentEval (CR has two blank lines).
pub fn binary_files(pos: &Path, neg: &Path) -> Result<Vec<Labeled>> {
    let mut out = Vec::new();
    for (path, label) in [(neg, 0), (pos, 1)] {
        let text = read_text(path)?;
        out.extend(lines(&text).map(|(_, l)| Labeled { text: l.trim().to_string(), label }));
    }
    Ok(out)
}

/// SST-2 `sentiment-{train,dev,test}`: `sentence TAB label(0/1)`.
pub fn sst2(path: &Path) -> Result<Vec<Labeled>> {
    let text = read_text(path)?;
    lines(&text)
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(ln, l)| {
            let (s, label) =
                l.rsplit_once('\t').ok_or_else(|| bad(path, ln, "expected sentence TAB label"))?;
            let label = label
                .trim()
                .parse()
                .map_err(|_| bad(path, ln, format!("label `{label}` is not 0 or 1")))?;
            Ok(Labeled { text: s.trim().to_string(), label })
        })
        .collect()
}

/// The six coarse TREC classes, in SentEval's order.
pub const TREC_CLASSES: [&str; 6] = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"];

/// TREC `train_5500.label` / `TREC_10.label`: `COARSE:fine question`, coarse label kept.
pub fn trec(path: &Path) -> Result<Vec<Labeled>> {
    let text = read_text(path)?;
    lines(&text)
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(ln, l)| {
            let (tag, q) =
                l.split_once(' ').ok_or_else(|| bad(path, ln, "expected `LABEL:fine question`"))?;
            let coarse = tag.split(':').next().unwrap_or_default();
            let label = TREC_CLASSES
                .iter()
                .position(|c| *c == coarse)
                .ok_or_else(|| bad(path, ln, format!("unknown TREC class `{coarse}`")))?;
            Ok(Labeled { text: q.trim().to_string(), label })
        })
        .collect()
}

/// MRPC `msr_paraphrase_{train,test}.txt`: BOM, a header, then TAB columns Quality, #1 ID,
/// #2 ID, #1 String, #2 String.
pub fn mrpc(path: &Path) -> Result<Vec<LabeledPair>> {
    let text = read_text(path)?;
    lines(&text)
        .skip(1)
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(ln, l)| {
            let cols: Vec<&str> = l.split('\t').collect();
            if cols.len() < 5 {
                return Err(bad(path, ln, "expected Quality, #1 ID, #2 ID, #1 String, #2 String"));
            }
            let label = cols[0]
                .trim()
                .parse()
                .map_err(|_| bad(path, ln, format!("quality `{}` is not 0 or 1", cols[0])))?;
            Ok(LabeledPair { a: cols[3].into(), b: cols[4].into(), label })
        })
        .collect()
}

/// A GLUE TSV with a header, reading the named text and label columns. `labels` maps label
/// strings to class ids (empty: the label column is an integer, or a float for regression).
pub fn glue_tsv(
    path: &Path,
    text_cols: &[&str],
    label_col: &str,
) -> Result<(Vec<Vec<String>>, Vec<String>)> {
    let text = read_text(path)?;
    let mut it = lines(&text);
    let (_, header) = it.next().ok_or_else(|| bad(path, 1, "empty file"))?;
    let cols: Vec<&str> = header.split('\t').collect();
    let find = |name: &str| {
        cols.iter()
            .position(|c| *c == name)
            .ok_or_else(|| bad(path, 1, format!("no column `{name}` in header")))
    };
    let idx: Vec<usize> = text_cols.iter().map(|c| find(c)).collect::<Result<_>>()?;
    let li = find(label_col)?;
    let mut texts = Vec::new();
    let mut labels = Vec::new();
    for (ln, l) in it.filter(|(_, l)| !l.is_empty()) {
        let f: Vec<&str> = l.split('\t').collect();
        let get = |i: usize| {
            f.get(i)
                .map(|s| s.to_string())
                .ok_or_else(|| bad(path, ln, format!("missing column {}", i + 1)))
        };
        texts.push(idx.iter().map(|&i| get(i)).collect::<Result<Vec<_>>>()?);
        labels.push(get(li)?);
    }
    Ok((texts, labels))
}

/// The records of a CSV text (RFC 4180: `"` quotes a field, `""` is a quote inside one, and a
/// quoted field may span lines), each with the line it starts on.
fn csv_records(text: &str, path: &Path) -> Result<Vec<(usize, Vec<String>)>> {
    let (mut records, mut fields, mut field) = (Vec::new(), Vec::new(), String::new());
    let (mut line, mut start, mut quoted, mut touched) = (1, 1, false, false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => (quoted, touched) = (true, true),
            (false, ',') => fields.push(std::mem::take(&mut field)),
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n') => {
                if touched || !field.is_empty() || !fields.is_empty() {
                    fields.push(std::mem::take(&mut field));
                    records.push((start, std::mem::take(&mut fields)));
                }
                touched = false;
                line += 1;
                start = line;
            }
            (_, c) => {
                if c == '\n' {
                    line += 1;
                }
                field.push(c);
                touched = true;
            }
        }
    }
    if quoted {
        return Err(bad(path, start, "a quoted field is not closed"));
    }
    if touched || !field.is_empty() || !fields.is_empty() {
        fields.push(field);
        records.push((start, fields));
    }
    Ok(records)
}

/// Banking77 `train.csv` / `test.csv` (header `text,category`): each query with the index of
/// its intent in `intents`, which grows as new intents appear (read train first, and test shares
/// its numbering).
pub fn banking77(path: &Path, intents: &mut Vec<String>) -> Result<Vec<Labeled>> {
    let text = read_text(path)?;
    let mut records = csv_records(&text, path)?.into_iter();
    match records.next() {
        Some((_, h)) if h == ["text", "category"] => {}
        _ => return Err(bad(path, 1, "expected the header `text,category`")),
    }
    records
        .map(|(ln, r)| {
            let [text, intent] = <[String; 2]>::try_from(r)
                .map_err(|r| bad(path, ln, format!("{} fields, expected 2", r.len())))?;
            let label = match intents.iter().position(|i| *i == intent) {
                Some(i) => i,
                None => {
                    intents.push(intent);
                    intents.len() - 1
                }
            };
            Ok(Labeled { text, label })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, bytes: &[u8]) -> PathBuf {
        let p = std::env::temp_dir().join(format!("st5-eval-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn decoding_handles_bom_and_latin1() {
        let cases: [(&[u8], &str); 4] = [
            (b"plain", "plain"),
            (b"\xef\xbb\xbfbom", "bom"),
            (b"caf\xe9", "caf\u{e9}"),
            ("caf\u{e9}".as_bytes(), "caf\u{e9}"),
        ];
        for (i, (bytes, want)) in cases.iter().enumerate() {
            assert_eq!(read_text(&write(&format!("dec{i}"), bytes)).unwrap(), *want);
        }
    }

    #[test]
    fn malformed_rows_name_file_and_line() {
        let p = write("stsb", b"g\tf\ty\t1\t4.0\ta\tb\ng\tf\ty\t2\tx\ta\tb\n");
        let err = sts_benchmark(&p).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("stsb"), "{err}");
        let p = write("trec", b"NUM:dist How far ?\nXYZ:foo what\n");
        let err = trec(&p).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("XYZ"), "{err}");
    }

    #[test]
    fn csv_records_follow_rfc_4180() {
        let path = Path::new("t.csv");
        // (text, records as (start line, fields))
        let cases: [(&str, Vec<(usize, Vec<&str>)>); 6] = [
            ("a,b\n", vec![(1, vec!["a", "b"])]),
            ("a,b\r\nc,d", vec![(1, vec!["a", "b"]), (2, vec!["c", "d"])]),
            ("\"x, y\",z\n", vec![(1, vec!["x, y", "z"])]),
            ("\"say \"\"hi\"\"\",q\n", vec![(1, vec!["say \"hi\"", "q"])]),
            (
                "\"two\nlines\",q\nnext,r\n",
                vec![(1, vec!["two\nlines", "q"]), (3, vec!["next", "r"])],
            ),
            ("\"\",e\n\n", vec![(1, vec!["", "e"])]),
        ];
        for (text, want) in cases {
            let got = csv_records(text, path).unwrap();
            let want: Vec<(usize, Vec<String>)> = want
                .into_iter()
                .map(|(l, f)| (l, f.into_iter().map(String::from).collect()))
                .collect();
            assert_eq!(got, want, "{text:?}");
        }
        let e = csv_records("a,b\n\"open,c\n", path).unwrap_err().to_string();
        assert!(e.contains("t.csv, line 2") && e.contains("not closed"), "{e}");
    }
}
