//! Passages: a text longer than the model's window cut into pieces of at most `budget` tokens
//! (the model's own tokenizer counts them), ending at a sentence or paragraph boundary (UAX #29
//! sentences; a line break ends one) where one falls inside the window, each overlapping the
//! one before by up to `overlap` tokens, started at a sentence where possible; split by
//! paragraphs, a blank line always ends one and no passage reaches across it. Each passage is
//! a byte range of the text, so that a hit can show and highlight it.

use unicode_segmentation::UnicodeSegmentation;

use super::schema::Passages;
use crate::error::Result;
use crate::tokenizer::{T5Tokenizer, Truncation};

/// How texts are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Tokens a passage may hold, special tokens excluded.
    pub budget: usize,
    /// Tokens a passage may repeat from the one before.
    pub overlap: usize,
    /// A blank line ends a passage.
    pub paragraphs: bool,
}

/// Whether the text between two tokens (`gap`) holds a blank line: two line breaks with only
/// other white space between them.
fn blank_line(gap: &str) -> bool {
    let mut breaks = 0;
    for c in gap.chars() {
        match c {
            '\n' => breaks += 1,
            c if c.is_whitespace() => {}
            _ => breaks = 0,
        }
        if breaks >= 2 {
            return true;
        }
    }
    false
}

/// The byte ranges of `text`'s passages, from its tokens' byte ranges (`tokens`, in order, the
/// special tokens left out). An empty or blank text has none.
pub fn cut(text: &str, tokens: &[(usize, usize)], split: Split) -> Vec<(usize, usize)> {
    let n = tokens.len();
    if n == 0 {
        return Vec::new();
    }
    let budget = split.budget.max(1);
    let overlap = split.overlap.min(budget - 1);
    // Token `i` starts a sentence when a sentence boundary lies between it and the token before,
    // and a word when text that is no token (a space) does.
    let bounds: Vec<usize> = text.split_sentence_bound_indices().map(|(at, _)| at).collect();
    let mut starts = vec![false; n];
    let mut words = vec![true; n];
    // Token `i` starts a paragraph (when they split passages): no passage reaches across it.
    let mut hard = vec![false; n];
    let mut b = 0;
    for (i, &(start, _)) in tokens.iter().enumerate().skip(1) {
        let before = tokens[i - 1].1;
        while b < bounds.len() && bounds[b] <= before {
            b += 1;
        }
        starts[i] = b < bounds.len() && bounds[b] <= start;
        words[i] = start > before;
        hard[i] = split.paragraphs && start > before && blank_line(&text[before..start]);
    }
    starts[0] = true;
    // The end of the passage that starts at token `i`, and whether it ends at a sentence: the
    // last sentence start inside the window if it holds more than one sentence, else the last
    // word start (a word longer than the window is cut).
    let window = |i: usize| -> (usize, bool) {
        let end = (i + budget).min(n);
        if let Some(p) = (i + 1..end).find(|&s| hard[s]) {
            return (p, true);
        }
        if end == n {
            return (n, true);
        }
        let inside = i + 1..=end;
        match inside.clone().rev().find(|&s| starts[s]) {
            Some(s) => (s, true),
            None => (inside.rev().find(|&s| words[s]).unwrap_or(end), false),
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        let (end, whole) = window(i);
        out.push((tokens[i].0, tokens[end - 1].1));
        if end == n {
            return out;
        }
        if hard[end] {
            i = end;
            continue;
        }
        // The next passage repeats up to `overlap` tokens: whole sentences after a passage that
        // ended at one (if the passage they start reaches past this one), else whole words.
        let back = end.saturating_sub(overlap).max(i + 1);
        i = if whole {
            (back..end).find(|&s| starts[s] && window(s).0 > end).unwrap_or(end)
        } else {
            (back..end).find(|&s| words[s]).unwrap_or(end)
        };
    }
}

/// Each text's passages for a model whose tokenizer is `tokenizer` (its truncation set aside)
/// and whose window holds `max_tokens` tokens, its special tokens included. A piece of a text
/// can tokenize into more tokens alone than it took inside the text (a word cut at its edge), so
/// each passage is tokenized again, and a text whose passages overflow is cut again tighter.
pub fn passages(
    tokenizer: &T5Tokenizer,
    texts: &[&str],
    max_tokens: usize,
    overlap: usize,
    split: Passages,
) -> Result<Vec<Vec<(usize, usize)>>> {
    let paragraphs = split == Passages::Paragraphs;
    let whole = tokenizer.with_truncation(Truncation::Off)?;
    let encoded = whole.tokens(texts)?;
    let mut out = Vec::with_capacity(texts.len());
    for (text, tokens) in texts.iter().zip(encoded) {
        if text.trim().is_empty() {
            out.push(Vec::new());
            continue;
        }
        let specials = tokens.iter().filter(|t| t.special).count();
        // Character offsets → byte offsets.
        let bytes: Vec<usize> = text.char_indices().map(|(b, _)| b).chain([text.len()]).collect();
        let at = |c: usize| bytes[c.min(bytes.len() - 1)];
        let ranges: Vec<(usize, usize)> = (tokens.iter())
            .filter(|t| !t.special && t.stop > t.start)
            .map(|t| (at(t.start), at(t.stop)))
            .collect();
        let mut budget = max_tokens.saturating_sub(specials).max(1);
        loop {
            let cuts = cut(text, &ranges, Split { budget, overlap, paragraphs });
            let pieces: Vec<&str> = cuts.iter().map(|&(a, b)| &text[a..b]).collect();
            let longest = whole.encode_batch(&pieces)?.iter().map(Vec::len).max().unwrap_or(0);
            if longest <= max_tokens || budget == 1 {
                out.push(cuts);
                break;
            }
            budget = budget.saturating_sub(longest - max_tokens).max(1);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token a word, as a whitespace tokenizer would give.
    fn words(text: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut start = None;
        for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
            match (c.is_whitespace(), start) {
                (false, None) => start = Some(i),
                (true, Some(s)) => {
                    out.push((s, i));
                    start = None;
                }
                _ => {}
            }
        }
        out
    }

    #[test]
    fn passages_end_at_sentences_overlap_and_map_back_to_the_text() {
        let text = "One two three. Four five six seven. Eight nine.\n\nTen eleven twelve thirteen fourteen fifteen sixteen.";
        // (budget, overlap, passages)
        let cases: [(usize, usize, &[&str]); 6] = [
            (100, 0, &[text]),
            (
                8,
                0,
                &[
                    "One two three. Four five six seven.",
                    "Eight nine.",
                    "Ten eleven twelve thirteen fourteen fifteen sixteen.",
                ],
            ),
            (
                5,
                0,
                &[
                    "One two three.",
                    "Four five six seven.",
                    "Eight nine.",
                    "Ten eleven twelve thirteen fourteen",
                    "fifteen sixteen.",
                ],
            ),
            // "Eight nine." would end the third passage where the second does: not repeated.
            (
                8,
                4,
                &[
                    "One two three. Four five six seven.",
                    "Four five six seven. Eight nine.",
                    "Ten eleven twelve thirteen fourteen fifteen sixteen.",
                ],
            ),
            // Inside one long sentence, the overlap is tokens.
            (
                5,
                2,
                &[
                    "One two three.",
                    "Four five six seven.",
                    "Eight nine.",
                    "Ten eleven twelve thirteen fourteen",
                    "thirteen fourteen fifteen sixteen.",
                ],
            ),
            (
                1,
                5,
                &[
                    "One", "two", "three.", "Four", "five", "six", "seven.", "Eight", "nine.",
                    "Ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen.",
                ],
            ),
        ];
        for (budget, overlap, want) in cases {
            let got: Vec<&str> =
                cut(text, &words(text), Split { budget, overlap, paragraphs: false })
                    .iter()
                    .map(|&(a, b)| &text[a..b])
                    .collect();
            assert_eq!(got, want, "budget {budget} overlap {overlap}");
        }
        assert!(cut("", &[], Split { budget: 4, overlap: 1, paragraphs: false }).is_empty());
        // Unicode: ranges are byte ranges on character boundaries.
        let text = "Ça coûte 5 €. Naïve café — ok? 東京は大きい。";
        for (a, b) in cut(text, &words(text), Split { budget: 3, overlap: 1, paragraphs: false }) {
            assert!(text.is_char_boundary(a) && text.is_char_boundary(b));
        }
    }

    #[test]
    fn split_by_paragraphs_no_passage_reaches_across_a_blank_line() {
        let text =
            "Title\n\nOne two three. Four five.\n \n\nSix seven eight nine ten eleven.\nTwelve.";
        let paragraphs =
            ["Title", "One two three. Four five.", "Six seven eight nine ten eleven.\nTwelve."];
        // (budget, overlap)
        for (budget, overlap) in [(100, 0), (100, 8), (6, 2), (3, 1), (1, 0)] {
            let split = Split { budget, overlap, paragraphs: true };
            let got: Vec<&str> =
                cut(text, &words(text), split).iter().map(|&(a, b)| &text[a..b]).collect();
            let case = format!("budget {budget} overlap {overlap}: {got:?}");
            if budget == 100 {
                assert_eq!(got, paragraphs, "{case}");
            }
            // Each passage lies inside one paragraph, and every word is in one.
            assert!(got.iter().all(|p| paragraphs.iter().any(|q| q.contains(p))), "{case}");
            for w in text.split_whitespace() {
                assert!(got.iter().any(|p| p.contains(w)), "{w}: {case}");
            }
        }
        // By window, the first two paragraphs share a passage.
        let window = Split { budget: 100, overlap: 0, paragraphs: false };
        assert_eq!(cut(text, &words(text), window), vec![(0, text.len())]);
        assert!(!blank_line(" \n x \n") && blank_line("\n\t\r\n") && !blank_line(""));
    }
}
