//! A collection's schema: the text fields that are searched (each with a boost) and the fields
//! that are stored and filtered, typed; and the one check that turns a JSON object into a
//! [`Document`] or refuses it, naming the id, the field and the type expected.

use serde::{Deserialize, Serialize};

use super::analyzer::Language;
use crate::by_name::by_name;
use crate::error::{Error, Result};

/// The type of a stored field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// A string (or a value of a closed set: an enum is a string here).
    String,
    /// A finite number.
    Number,
    Boolean,
    /// A list of strings (tags): a filter's `eq` asks that it holds the value, `in` that it holds
    /// one of the values.
    StringList,
}

impl FieldType {
    pub const ALL: [FieldType; 4] =
        [FieldType::String, FieldType::Number, FieldType::Boolean, FieldType::StringList];

    pub fn name(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Number => "number",
            FieldType::Boolean => "boolean",
            FieldType::StringList => "string[]",
        }
    }
}

by_name!(FieldType, "field type", "string, number, boolean or string[]", serde);

/// How a long text is cut into passages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Passages {
    /// Pieces that fill the model's window, ending at a sentence or a line break where one
    /// falls inside it (a paragraph may share a passage with the next).
    #[default]
    Window,
    /// As `Window`, but a blank line always ends a passage: each paragraph (and each heading on
    /// a line of its own) is a passage of its own, or several where it outgrows the window.
    Paragraphs,
}

impl Passages {
    pub const ALL: [Passages; 2] = [Passages::Window, Passages::Paragraphs];

    pub fn name(self) -> &'static str {
        match self {
            Passages::Window => "window",
            Passages::Paragraphs => "paragraphs",
        }
    }
}

by_name!(Passages, "passage split", "window or paragraphs", serde);

/// A searched text field and its weight in keyword ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextField {
    pub name: String,
    #[serde(default = "one")]
    pub boost: f32,
}

fn one() -> f32 {
    1.0
}

/// A stored, filterable field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredField {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FieldType,
}

/// What a collection holds: `{"id": "id", "text": [{"name": "title", "boost": 2}, {"name":
/// "body"}], "fields": [{"name": "year", "type": "number"}], "language": "english", "passages":
/// "window"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    /// The key holding each document's id (a non-empty string).
    #[serde(default = "id")]
    pub id: String,
    pub text: Vec<TextField>,
    #[serde(default)]
    pub fields: Vec<StoredField>,
    #[serde(default)]
    pub language: Language,
    /// How long texts are cut into passages.
    #[serde(default)]
    pub passages: Passages,
}

fn id() -> String {
    "id".into()
}

/// A stored field's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Boolean(bool),
    Number(f64),
    String(String),
    StringList(Vec<String>),
}

/// A document that fits its schema: its id, its text fields and its stored fields, each in the
/// schema's order (`None`: absent).
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub id: String,
    pub text: Vec<String>,
    pub fields: Vec<Option<Value>>,
}

impl Schema {
    /// Checks the schema itself: at least one text field, names unique and non-empty, boosts
    /// finite and positive.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Schema(m));
        if self.text.is_empty() {
            return bad("no text field to search: give at least one".into());
        }
        let mut names = std::collections::HashSet::new();
        for name in std::iter::once(&self.id)
            .chain(self.text.iter().map(|f| &f.name))
            .chain(self.fields.iter().map(|f| &f.name))
        {
            if name.is_empty() {
                return bad("a field has an empty name".into());
            }
            if !names.insert(name.as_str()) {
                return bad(format!("field `{name}` is named twice"));
            }
        }
        if let Some(f) = self.text.iter().find(|f| !(f.boost.is_finite() && f.boost > 0.0)) {
            return bad(format!(
                "text field `{}`: boost {} is not a positive number",
                f.name, f.boost
            ));
        }
        Ok(())
    }

    /// The position of a stored field, or an error naming it and the fields there are.
    pub fn field(&self, name: &str) -> Result<(usize, FieldType)> {
        self.fields
            .iter()
            .position(|f| f.name == name)
            .map(|i| (i, self.fields[i].kind))
            .ok_or_else(|| {
                let known: Vec<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
                Error::Query(format!(
                    "no stored field `{name}` (the schema's: {})",
                    known.join(", ")
                ))
            })
    }

    /// `object` as a document of this schema. Keys the schema does not name are not kept; a text
    /// field may be absent (empty) but not another type; a stored field may be absent or null.
    pub fn document(&self, object: &serde_json::Value) -> Result<Document> {
        let unnamed = || object.get(&self.id).map(|v| v.to_string()).unwrap_or_default();
        let refuse = |id: &str, field: &str, message: String| Error::Document {
            id: id.to_string(),
            field: field.to_string(),
            message,
        };
        let Some(map) = object.as_object() else {
            return Err(refuse(
                "",
                "",
                format!("a document is a JSON object, not {}", kind(object)),
            ));
        };
        let id = match map.get(&self.id) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
            Some(serde_json::Value::String(_)) => {
                return Err(refuse("", &self.id, "the id is empty".into()));
            }
            Some(v) => {
                return Err(refuse(
                    &unnamed(),
                    &self.id,
                    format!("expected a string id, got {}", kind(v)),
                ));
            }
            None => return Err(refuse("", &self.id, "the id is missing".into())),
        };
        let text = self
            .text
            .iter()
            .map(|f| match map.get(&f.name) {
                None | Some(serde_json::Value::Null) => Ok(String::new()),
                Some(serde_json::Value::String(s)) => Ok(s.clone()),
                Some(v) => {
                    Err(refuse(&id, &f.name, format!("expected a string (text), got {}", kind(v))))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let fields = self
            .fields
            .iter()
            .map(|f| {
                let Some(v) = map.get(&f.name).filter(|v| !v.is_null()) else {
                    return Ok(None);
                };
                let wrong =
                    || refuse(&id, &f.name, format!("expected {}, got {}", f.kind, kind(v)));
                Ok(Some(match (f.kind, v) {
                    (FieldType::String, serde_json::Value::String(s)) => Value::String(s.clone()),
                    (FieldType::Boolean, serde_json::Value::Bool(b)) => Value::Boolean(*b),
                    (FieldType::Number, serde_json::Value::Number(n)) => {
                        Value::Number(n.as_f64().filter(|x| x.is_finite()).ok_or_else(wrong)?)
                    }
                    (FieldType::StringList, serde_json::Value::Array(items)) => Value::StringList(
                        items
                            .iter()
                            .map(|x| x.as_str().map(String::from).ok_or_else(wrong))
                            .collect::<Result<_>>()?,
                    ),
                    _ => return Err(wrong()),
                }))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Document { id, text, fields })
    }

    /// A document back as a JSON object (absent fields left out): what `get` returns.
    pub fn to_json(&self, doc: &Document) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert(self.id.clone(), doc.id.clone().into());
        for (f, t) in self.text.iter().zip(&doc.text) {
            map.insert(f.name.clone(), t.clone().into());
        }
        for (f, v) in self.fields.iter().zip(&doc.fields) {
            match v {
                // A whole number as JSON writes it (2020, not 2020.0).
                Some(Value::Number(x)) if x.fract() == 0.0 && x.abs() < 9e15 => {
                    map.insert(f.name.clone(), (*x as i64).into());
                }
                Some(v) => {
                    map.insert(
                        f.name.clone(),
                        serde_json::to_value(v).expect("a value serializes"),
                    );
                }
                None => {}
            }
        }
        serde_json::Value::Object(map)
    }
}

/// A JSON value's kind, for errors.
pub(crate) fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn schema() -> Schema {
        serde_json::from_value(json!({
            "text": [{"name": "title", "boost": 2.0}, {"name": "body"}],
            "fields": [
                {"name": "year", "type": "number"},
                {"name": "lang", "type": "string"},
                {"name": "draft", "type": "boolean"},
                {"name": "tags", "type": "string[]"}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn documents_that_break_the_schema_are_refused_by_id_and_field() {
        let s = schema();
        s.validate().unwrap();
        // (document, the words the error must hold)
        let cases: [(serde_json::Value, &[&str]); 9] = [
            (json!("text"), &["JSON object", "a string"]),
            (json!({"title": "x"}), &["`id`", "missing"]),
            (json!({"id": "", "title": "x"}), &["empty"]),
            (json!({"id": 7}), &["`id`", "a number"]),
            (json!({"id": "a", "title": 3}), &["\"a\"", "`title`", "a number"]),
            (json!({"id": "a", "year": "2020"}), &["\"a\"", "`year`", "number", "a string"]),
            (json!({"id": "a", "draft": 1}), &["`draft`", "boolean"]),
            (json!({"id": "a", "tags": ["x", 2]}), &["`tags`", "string[]", "an array"]),
            (json!({"id": "a", "lang": ["en"]}), &["`lang`", "string", "an array"]),
        ];
        for (doc, words) in cases {
            let err = s.document(&doc).unwrap_err().to_string();
            assert!(words.iter().all(|w| err.contains(w)), "{doc}: {err}");
        }
        let doc = s
            .document(&json!({"id": "a", "title": "T", "year": 2021, "tags": ["x"], "other": {"kept": false}, "lang": null}))
            .unwrap();
        assert_eq!(doc.text, ["T", ""]);
        assert_eq!(
            doc.fields,
            [Some(Value::Number(2021.0)), None, None, Some(Value::StringList(vec!["x".into()]))]
        );
        assert_eq!(
            s.to_json(&doc),
            json!({"id": "a", "title": "T", "body": "", "year": 2021, "tags": ["x"]})
        );
    }

    #[test]
    fn bad_schemas_are_refused() {
        let cases: [(serde_json::Value, &str); 4] = [
            (json!({"text": []}), "no text field"),
            (json!({"text": [{"name": "a"}, {"name": "a"}]}), "named twice"),
            (json!({"text": [{"name": "id"}]}), "named twice"),
            (json!({"text": [{"name": "a", "boost": 0}]}), "boost"),
        ];
        for (schema, want) in cases {
            let s: Schema = serde_json::from_value(schema.clone()).unwrap();
            let err = s.validate().unwrap_err().to_string();
            assert!(err.contains(want), "{schema}: {err}");
        }
        let err = serde_json::from_value::<Schema>(
            json!({"text": [{"name": "a"}], "fields": [{"name": "b", "type": "date"}]}),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("date"), "{err}");
    }
}
