//! Filters on stored fields, checked against the schema once and then evaluated per document:
//! `{"lang": "en", "year": {"gte": 2020}, "tags": {"in": ["a", "b"]}, "or": [...], "not": {...}}`
//! (the keys of one object all hold: `and`), or the same as text for the command line:
//! `lang = en and year >= 2020 and tags in (a, b)`, with `or`, `not` and parentheses.
//! And facet counts over the documents that match.

use std::collections::BTreeMap;

use super::schema::{FieldType, Schema, Value, kind};
use crate::error::{Error, Result};

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
}

/// A filter checked against a schema: fields are positions, values have the field's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Field `0` compares to the value (for a string list, `Eq` asks that it holds it).
    Compare(usize, Op, Value),
    /// Field `0` is one of the values (a string list: holds one of them).
    In(usize, Vec<Value>),
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Not(Box<Filter>),
}

const OPS: [(&str, Op); 6] = [
    ("eq", Op::Eq),
    ("ne", Op::Ne),
    ("gt", Op::Gt),
    ("gte", Op::Gte),
    ("lt", Op::Lt),
    ("lte", Op::Lte),
];

impl Filter {
    /// The JSON form, checked against `schema`.
    pub fn from_json(schema: &Schema, v: &serde_json::Value) -> Result<Filter> {
        let Some(map) = v.as_object() else {
            return Err(Error::Query(format!("a filter is an object, not {}", kind(v))));
        };
        let mut all = Vec::new();
        for (key, v) in map {
            all.push(match key.as_str() {
                "and" | "or" => {
                    let Some(items) = v.as_array() else {
                        return Err(Error::Query(format!("`{key}` takes an array of filters, not {}", kind(v))));
                    };
                    let items = items.iter().map(|x| Filter::from_json(schema, x)).collect::<Result<Vec<_>>>()?;
                    if key == "and" { Filter::And(items) } else { Filter::Or(items) }
                }
                "not" => Filter::Not(Box::new(Filter::from_json(schema, v)?)),
                field => {
                    let (i, ty) = schema.field(field)?;
                    match v.as_object() {
                        None => Filter::Compare(i, Op::Eq, value(field, ty, v, false)?),
                        Some(ops) => {
                            let mut parts = Vec::new();
                            for (op, x) in ops {
                                if op == "in" {
                                    let Some(xs) = x.as_array() else {
                                        return Err(Error::Query(format!("`{field}`: `in` takes an array, not {}", kind(x))));
                                    };
                                    let xs = xs.iter().map(|x| value(field, ty, x, false)).collect::<Result<_>>()?;
                                    parts.push(Filter::In(i, xs));
                                    continue;
                                }
                                let Some(&(_, op)) = OPS.iter().find(|(n, _)| n == op) else {
                                    return Err(Error::Query(format!(
                                        "`{field}`: unknown operator `{op}` (expected eq, ne, gt, gte, lt, lte or in)"
                                    )));
                                };
                                let ordered = !matches!(op, Op::Eq | Op::Ne);
                                parts.push(Filter::Compare(i, op, value(field, ty, x, ordered)?));
                            }
                            if parts.len() == 1 { parts.remove(0) } else { Filter::And(parts) }
                        }
                    }
                }
            });
        }
        Ok(if all.len() == 1 { all.remove(0) } else { Filter::And(all) })
    }

    /// The text form (`year >= 2020 and (lang = en or not draft = true)`), checked against
    /// `schema`. Values are bare words or quoted strings; a number field's value is a number.
    pub fn parse(schema: &Schema, text: &str) -> Result<Filter> {
        let tokens = lex(text)?;
        let mut p = Parser { schema, tokens: &tokens, at: 0 };
        let f = p.or()?;
        match p.tokens.get(p.at) {
            None => Ok(f),
            Some(t) => Err(Error::Query(format!("filter `{text}`: unexpected `{}`", t.show()))),
        }
    }

    /// Whether a document's stored `fields` (in schema order) pass.
    pub fn matches(&self, fields: &[Option<Value>]) -> bool {
        match self {
            Filter::And(fs) => fs.iter().all(|f| f.matches(fields)),
            Filter::Or(fs) => fs.iter().any(|f| f.matches(fields)),
            Filter::Not(f) => !f.matches(fields),
            Filter::In(i, xs) => match &fields[*i] {
                None => false,
                Some(Value::StringList(have)) => {
                    xs.iter().any(|x| matches!(x, Value::String(s) if have.contains(s)))
                }
                Some(v) => xs.contains(v),
            },
            Filter::Compare(i, op, x) => match (&fields[*i], x) {
                (None, _) => *op == Op::Ne,
                (Some(Value::StringList(have)), Value::String(s)) => match op {
                    Op::Eq => have.contains(s),
                    Op::Ne => !have.contains(s),
                    _ => false,
                },
                (Some(v), x) => {
                    let Some(order) = compare(v, x) else { return false };
                    use std::cmp::Ordering::*;
                    match op {
                        Op::Eq => order == Equal,
                        Op::Ne => order != Equal,
                        Op::Gt => order == Greater,
                        Op::Gte => order != Less,
                        Op::Lt => order == Less,
                        Op::Lte => order != Greater,
                    }
                }
            },
        }
    }
}

fn compare(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => a.partial_cmp(b),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Boolean(a), Value::Boolean(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

/// A filter's value for a field of type `ty` (a string list compares to strings); `ordered`: a
/// range, which booleans refuse.
fn value(field: &str, ty: FieldType, v: &serde_json::Value, ordered: bool) -> Result<Value> {
    let wrong =
        |want: &str| Error::Query(format!("`{field}` is {ty}: expected {want}, got {}", kind(v)));
    match ty {
        FieldType::Number => v.as_f64().map(Value::Number).ok_or_else(|| wrong("a number")),
        FieldType::String | FieldType::StringList => {
            v.as_str().map(|s| Value::String(s.into())).ok_or_else(|| wrong("a string"))
        }
        FieldType::Boolean if ordered => {
            Err(Error::Query(format!("`{field}` is boolean: no ranges")))
        }
        FieldType::Boolean => v.as_bool().map(Value::Boolean).ok_or_else(|| wrong("true or false")),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Sym(&'static str),
}

impl Token {
    fn show(&self) -> String {
        match self {
            Token::Word(w) => w.clone(),
            Token::Quoted(q) => format!("\"{q}\""),
            Token::Sym(s) => s.to_string(),
        }
    }
}

fn lex(text: &str) -> Result<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(at, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' || c == '\'' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next() {
                    Some((_, q)) if q == c => break,
                    Some((_, x)) => s.push(x),
                    None => {
                        return Err(Error::Query(format!(
                            "filter `{text}`: unclosed quote at {at}"
                        )));
                    }
                }
            }
            out.push(Token::Quoted(s));
        } else if let Some(sym) = [">=", "<=", "!=", "=", ">", "<", "(", ")", ","]
            .into_iter()
            .find(|s| text[at..].starts_with(s))
        {
            (0..sym.len()).for_each(|_| {
                chars.next();
            });
            out.push(Token::Sym(sym));
        } else if "=<>!(),".contains(c) {
            // A symbol's first character that starts none of the symbols (`!` alone).
            return Err(Error::Query(format!("filter `{text}`: unexpected `{c}` at {at}")));
        } else {
            let mut w = String::new();
            while let Some(&(_, x)) = chars.peek() {
                if x.is_whitespace() || "=<>!(),\"'".contains(x) {
                    break;
                }
                w.push(x);
                chars.next();
            }
            out.push(Token::Word(w));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    schema: &'a Schema,
    tokens: &'a [Token],
    at: usize,
}

impl Parser<'_> {
    fn keyword(&mut self, k: &str) -> bool {
        let hit =
            matches!(self.tokens.get(self.at), Some(Token::Word(w)) if w.eq_ignore_ascii_case(k));
        self.at += usize::from(hit);
        hit
    }
    fn sym(&mut self, s: &str) -> bool {
        let hit = matches!(self.tokens.get(self.at), Some(Token::Sym(x)) if *x == s);
        self.at += usize::from(hit);
        hit
    }
    fn or(&mut self) -> Result<Filter> {
        let mut parts = vec![self.and()?];
        while self.keyword("or") {
            parts.push(self.and()?);
        }
        Ok(if parts.len() == 1 { parts.remove(0) } else { Filter::Or(parts) })
    }
    fn and(&mut self) -> Result<Filter> {
        let mut parts = vec![self.unary()?];
        while self.keyword("and") {
            parts.push(self.unary()?);
        }
        Ok(if parts.len() == 1 { parts.remove(0) } else { Filter::And(parts) })
    }
    fn unary(&mut self) -> Result<Filter> {
        if self.keyword("not") {
            return Ok(Filter::Not(Box::new(self.unary()?)));
        }
        if self.sym("(") {
            let f = self.or()?;
            if !self.sym(")") {
                return Err(self.unexpected("`)`"));
            }
            return Ok(f);
        }
        let Some(Token::Word(field)) = self.tokens.get(self.at).cloned() else {
            return Err(self.unexpected("a field name"));
        };
        self.at += 1;
        let (i, ty) = self.schema.field(&field)?;
        if self.keyword("in") {
            if !self.sym("(") {
                return Err(self.unexpected("`(`"));
            }
            let mut xs = vec![self.value(&field, ty, false)?];
            while self.sym(",") {
                xs.push(self.value(&field, ty, false)?);
            }
            if !self.sym(")") {
                return Err(self.unexpected("`)`"));
            }
            return Ok(Filter::In(i, xs));
        }
        let op = match self.tokens.get(self.at) {
            Some(Token::Sym("=")) => Op::Eq,
            Some(Token::Sym("!=")) => Op::Ne,
            Some(Token::Sym(">")) => Op::Gt,
            Some(Token::Sym(">=")) => Op::Gte,
            Some(Token::Sym("<")) => Op::Lt,
            Some(Token::Sym("<=")) => Op::Lte,
            _ => return Err(self.unexpected("=, !=, >, >=, <, <= or in")),
        };
        self.at += 1;
        Ok(Filter::Compare(i, op, self.value(&field, ty, !matches!(op, Op::Eq | Op::Ne))?))
    }
    fn value(&mut self, field: &str, ty: FieldType, ordered: bool) -> Result<Value> {
        let json = match self.tokens.get(self.at) {
            Some(Token::Quoted(s)) => serde_json::Value::String(s.clone()),
            Some(Token::Word(w)) => match ty {
                FieldType::Number => w
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .and_then(serde_json::Number::from_f64)
                    .map(serde_json::Value::Number)
                    .unwrap_or_else(|| serde_json::Value::String(w.clone())),
                FieldType::Boolean => match w.as_str() {
                    "true" => serde_json::Value::Bool(true),
                    "false" => serde_json::Value::Bool(false),
                    _ => serde_json::Value::String(w.clone()),
                },
                _ => serde_json::Value::String(w.clone()),
            },
            _ => return Err(self.unexpected("a value")),
        };
        self.at += 1;
        value(field, ty, &json, ordered)
    }
    fn unexpected(&self, want: &str) -> Error {
        let got =
            self.tokens.get(self.at).map_or("the end".to_string(), |t| format!("`{}`", t.show()));
        Error::Query(format!("filter: expected {want}, found {got}"))
    }
}

/// Facet counts: for each field asked, how many of the documents hold each value (a string
/// list counts each of its strings; numbers by their value), most frequent first.
pub fn facets<'a>(
    schema: &Schema,
    names: &[String],
    docs: impl Iterator<Item = &'a [Option<Value>]> + Clone,
) -> Result<BTreeMap<String, Vec<(String, usize)>>> {
    let mut out = BTreeMap::new();
    for name in names {
        let (i, _) = schema.field(name)?;
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for fields in docs.clone() {
            match &fields[i] {
                None => {}
                Some(Value::StringList(xs)) => {
                    let mut xs: Vec<&String> = xs.iter().collect();
                    xs.sort();
                    xs.dedup();
                    xs.into_iter().for_each(|x| *counts.entry(x.clone()).or_default() += 1);
                }
                Some(Value::String(s)) => *counts.entry(s.clone()).or_default() += 1,
                Some(Value::Number(x)) => *counts.entry(x.to_string()).or_default() += 1,
                Some(Value::Boolean(b)) => *counts.entry(b.to_string()).or_default() += 1,
            }
        }
        let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out.insert(name.clone(), counts);
    }
    Ok(out)
}
