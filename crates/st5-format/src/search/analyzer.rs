//! Text analysis for keyword search: Unicode words (UAX #29, `unicode-segmentation`), case
//! folding, stop words and Snowball stemming (`rust-stemmers`) per language, each word with its
//! byte range in the source text so that a hit can be highlighted.

use std::collections::HashSet;

use crate::by_name::by_name;

/// The language of a collection's text: its stemmer and stop words. `none` keeps every word as
/// it is, lower-cased (codes, names, scripts without a stemmer such as Chinese or Japanese, whose
/// ideographs UAX #29 splits one a word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Language {
    Arabic,
    Danish,
    Dutch,
    #[default]
    English,
    Finnish,
    French,
    German,
    Greek,
    Hungarian,
    Italian,
    Norwegian,
    Portuguese,
    Romanian,
    Russian,
    Spanish,
    Swedish,
    Tamil,
    Turkish,
    None,
}

impl Language {
    pub const ALL: [Language; 19] = [
        Language::Arabic,
        Language::Danish,
        Language::Dutch,
        Language::English,
        Language::Finnish,
        Language::French,
        Language::German,
        Language::Greek,
        Language::Hungarian,
        Language::Italian,
        Language::Norwegian,
        Language::Portuguese,
        Language::Romanian,
        Language::Russian,
        Language::Spanish,
        Language::Swedish,
        Language::Tamil,
        Language::Turkish,
        Language::None,
    ];

    pub fn name(self) -> &'static str {
        self.table().0
    }

    /// (name, ISO 639-1 code for the stop-word lists, Snowball algorithm)
    fn table(self) -> (&'static str, &'static str, Option<rust_stemmers::Algorithm>) {
        use rust_stemmers::Algorithm as A;
        match self {
            Language::Arabic => ("arabic", "ar", Some(A::Arabic)),
            Language::Danish => ("danish", "da", Some(A::Danish)),
            Language::Dutch => ("dutch", "nl", Some(A::Dutch)),
            Language::English => ("english", "en", Some(A::English)),
            Language::Finnish => ("finnish", "fi", Some(A::Finnish)),
            Language::French => ("french", "fr", Some(A::French)),
            Language::German => ("german", "de", Some(A::German)),
            Language::Greek => ("greek", "el", Some(A::Greek)),
            Language::Hungarian => ("hungarian", "hu", Some(A::Hungarian)),
            Language::Italian => ("italian", "it", Some(A::Italian)),
            Language::Norwegian => ("norwegian", "no", Some(A::Norwegian)),
            Language::Portuguese => ("portuguese", "pt", Some(A::Portuguese)),
            Language::Romanian => ("romanian", "ro", Some(A::Romanian)),
            Language::Russian => ("russian", "ru", Some(A::Russian)),
            Language::Spanish => ("spanish", "es", Some(A::Spanish)),
            Language::Swedish => ("swedish", "sv", Some(A::Swedish)),
            Language::Tamil => ("tamil", "ta", Some(A::Tamil)),
            Language::Turkish => ("turkish", "tr", Some(A::Turkish)),
            Language::None => ("none", "", None),
        }
    }
}

by_name!(
    Language,
    "language",
    "arabic, danish, dutch, english, finnish, french, german, greek, hungarian, italian, norwegian, portuguese, romanian, russian, spanish, swedish, tamil, turkish or none",
    serde
);

/// English stop words: Lucene's English set, the one Elasticsearch (`_english_`) and bm25s
/// (`stopwords="en"`) use. The other languages take NLTK's lists (the `stop-words` crate).
const ENGLISH_STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// A word of a text: its lower-cased form and its byte range in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word<'a> {
    pub lower: String,
    pub start: usize,
    pub end: usize,
    pub text: &'a str,
}

/// One language's analysis: words → terms.
pub struct Analyzer {
    language: Language,
    stemmer: Option<rust_stemmers::Stemmer>,
    stop: HashSet<&'static str>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer").field("language", &self.language).finish()
    }
}

impl Analyzer {
    pub fn new(language: Language) -> Self {
        let (_, code, algorithm) = language.table();
        let stop = match language {
            Language::English => ENGLISH_STOP_WORDS.iter().copied().collect(),
            Language::None => HashSet::new(),
            _ => stop_words::lookup(code).unwrap_or(&[]).iter().copied().collect(),
        };
        Self { language, stemmer: algorithm.map(rust_stemmers::Stemmer::create), stop }
    }

    pub fn language(&self) -> Language {
        self.language
    }

    /// The text's words (UAX #29 words that hold a letter or a digit), lower-cased, in order.
    pub fn words<'a>(&self, text: &'a str) -> Vec<Word<'a>> {
        use unicode_segmentation::UnicodeSegmentation;
        text.unicode_word_indices()
            .map(|(start, w)| Word {
                lower: w.to_lowercase(),
                start,
                end: start + w.len(),
                text: w,
            })
            .collect()
    }

    /// A lower-cased word's term: its stem, or `None` for a stop word.
    pub fn term(&self, lower: &str) -> Option<String> {
        if self.stop.contains(lower) {
            return None;
        }
        Some(match &self.stemmer {
            Some(s) => s.stem(lower).into_owned(),
            None => lower.to_string(),
        })
    }

    /// The text's terms in order, stop words left out.
    pub fn terms(&self, text: &str) -> Vec<String> {
        self.words(text).iter().filter_map(|w| self.term(&w.lower)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_fold_case_stem_and_drop_stop_words_with_their_offsets() {
        // (language, text, terms)
        let cases: [(Language, &str, &[&str]); 7] = [
            (Language::English, "The Cats are RUNNING to the houses.", &["cat", "run", "hous"]),
            (Language::English, "It is what it is", &["what"]),
            (Language::English, "", &[]),
            (Language::English, "C++ v2.0 e-mail", &["c", "v2.0", "e", "mail"]),
            (Language::French, "Les chevaux mangeaient", &["cheval", "mang"]),
            (Language::None, "The Straße 東京", &["the", "straße", "東", "京"]),
            (Language::German, "Die Häuser", &["haus"]),
        ];
        for (language, text, want) in cases {
            let a = Analyzer::new(language);
            assert_eq!(a.terms(text), want, "{language}: {text:?}");
        }
        let a = Analyzer::new(Language::English);
        let text = "Éclair, déjà vu!";
        for w in a.words(text) {
            assert_eq!(&text[w.start..w.end], w.text);
        }
        assert_eq!(
            a.words(text).iter().map(|w| w.lower.as_str()).collect::<Vec<_>>(),
            ["éclair", "déjà", "vu"]
        );
    }

    #[test]
    fn language_names_round_trip() {
        for l in Language::ALL {
            assert_eq!(l.name().parse::<Language>().unwrap(), l);
        }
        assert!("klingon".parse::<Language>().unwrap_err().to_string().contains("klingon"));
    }
}
