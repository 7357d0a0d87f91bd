//! A minimal JSON value and writer: enough for `results.json`, without a
//! serde dependency. Writing only; the runner never reads JSON.

use std::fmt::{self, Write as _};

/// A JSON value. Objects keep insertion order so the file reads naturally.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// An object from `(key, value)` pairs.
    pub fn obj<K: Into<String>>(pairs: impl IntoIterator<Item = (K, Json)>) -> Json {
        Json::Obj(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// A number if `s` is a finite number, else a string: benchmark output is
    /// text, and `mode=lat` must stay a string while `size=8` becomes 8.
    pub fn guess(s: &str) -> Json {
        match s.parse::<f64>() {
            Ok(x) if x.is_finite() && !s.starts_with('+') => Json::Num(x),
            _ => Json::Str(s.to_string()),
        }
    }

    fn write(&self, out: &mut String, indent: usize) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(x) => {
                if x.is_finite() {
                    // Integers print without a fraction; others with Rust's
                    // shortest round-trip form.
                    if x.fract() == 0.0 && x.abs() < 1e15 {
                        let _ = write!(out, "{}", *x as i64);
                    } else {
                        let _ = write!(out, "{x}");
                    }
                } else {
                    out.push_str("null");
                }
            }
            Json::Str(s) => escape(s, out),
            Json::Arr(items) => {
                if items.is_empty() {
                    out.push_str("[]");
                    return;
                }
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(out, indent + 1);
                    v.write(out, indent + 1);
                }
                newline(out, indent);
                out.push(']');
            }
            Json::Obj(pairs) => {
                if pairs.is_empty() {
                    out.push_str("{}");
                    return;
                }
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(out, indent + 1);
                    escape(k, out);
                    out.push_str(": ");
                    v.write(out, indent + 1);
                }
                newline(out, indent);
                out.push('}');
            }
        }
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write(&mut s, 0);
        f.write_str(&s)
    }
}

fn newline(out: &mut String, indent: usize) {
    out.push('\n');
    for _ in 0..indent {
        out.push_str("  ");
    }
}

fn escape(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_nests() {
        let v = Json::obj([
            ("a", Json::str("x\"y\\z\n\u{1}")),
            (
                "b",
                Json::Arr(vec![Json::Num(1.0), Json::Num(0.5), Json::Null]),
            ),
            ("c", Json::Obj(vec![])),
            ("d", Json::Bool(true)),
        ]);
        let s = v.to_string();
        assert!(s.contains(r#""a": "x\"y\\z\n\u0001""#), "{s}");
        assert!(s.contains("1,"), "{s}");
        assert!(s.contains("0.5"), "{s}");
        assert!(s.contains(r#""c": {}"#), "{s}");
    }

    #[test]
    fn guesses_numbers() {
        assert_eq!(Json::guess("8"), Json::Num(8.0));
        assert_eq!(Json::guess("0.153"), Json::Num(0.153));
        assert_eq!(Json::guess("lat"), Json::str("lat"));
        assert_eq!(Json::guess("nan"), Json::str("nan"));
        assert_eq!(Json::guess("inf"), Json::str("inf"));
        assert_eq!(Json::Num(f64::NAN).to_string(), "null");
    }
}
