//! Parsing of the benchmark programs' output (format in bench/README.md).
//!
//! A measurement line is `RESULT key=value key=value ...`; lines starting
//! with `#` are comments (the `# <bench> ... library=<text>` header names the
//! library). Anything else is ignored, since launchers print their own noise.

use std::fmt;

/// Whether smaller or larger values of a metric are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Better {
    Lower,
    Higher,
}

impl Better {
    pub fn as_str(self) -> &'static str {
        match self {
            Better::Lower => "lower",
            Better::Higher => "higher",
        }
    }
}

/// One `RESULT` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub bench: String,
    pub mode: String,
    pub size: u64,
    pub ranks: u32,
    pub metric: String,
    pub better: Better,
    pub min: f64,
    pub med: f64,
    pub max: f64,
    /// Every key=value of the line, in order, including the ones above.
    pub fields: Vec<(String, String)>,
}

/// Why a `RESULT` line was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    NotKeyValue(String),
    Missing(&'static str),
    Bad { key: &'static str, value: String },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::NotKeyValue(w) => write!(f, "`{w}` is not key=value"),
            ParseError::Missing(k) => write!(f, "missing key `{k}`"),
            ParseError::Bad { key, value } => write!(f, "bad value `{value}` for `{key}`"),
        }
    }
}

/// Parses one line; `Ok(None)` for lines that are not `RESULT` lines.
pub fn parse_line(line: &str) -> Result<Option<Measurement>, ParseError> {
    let Some(rest) = line.trim().strip_prefix("RESULT ") else {
        return Ok(None);
    };
    let mut fields = Vec::new();
    for word in rest.split_whitespace() {
        let (k, v) = word
            .split_once('=')
            .ok_or_else(|| ParseError::NotKeyValue(word.to_string()))?;
        fields.push((k.to_string(), v.to_string()));
    }
    let get = |key: &'static str| -> Result<&str, ParseError> {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .ok_or(ParseError::Missing(key))
    };
    let num = |key: &'static str| -> Result<f64, ParseError> {
        let v = get(key)?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| ParseError::Bad {
                key,
                value: v.to_string(),
            })
    };
    let int = |key: &'static str| -> Result<u64, ParseError> {
        let v = get(key)?;
        v.parse::<u64>().map_err(|_| ParseError::Bad {
            key,
            value: v.to_string(),
        })
    };
    let better = match get("better")? {
        "lower" => Better::Lower,
        "higher" => Better::Higher,
        other => {
            return Err(ParseError::Bad {
                key: "better",
                value: other.to_string(),
            })
        }
    };
    let ranks = int("ranks")?;
    Ok(Some(Measurement {
        bench: get("bench")?.to_string(),
        mode: get("mode")?.to_string(),
        size: int("size")?,
        ranks: u32::try_from(ranks).map_err(|_| ParseError::Bad {
            key: "ranks",
            value: ranks.to_string(),
        })?,
        metric: get("metric")?.to_string(),
        better,
        min: num("min")?,
        med: num("med")?,
        max: num("max")?,
        fields,
    }))
}

/// The measurements of a whole output, plus the errors met on the way.
pub fn parse_output(text: &str) -> (Vec<Measurement>, Vec<String>) {
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    for line in text.lines() {
        match parse_line(line) {
            Ok(Some(m)) => ok.push(m),
            Ok(None) => {}
            Err(e) => errors.push(format!("{e}: {line}")),
        }
    }
    (ok, errors)
}

/// The `library=` text of the `# <bench> ...` header, if any.
pub fn library_version(text: &str) -> Option<String> {
    text.lines().filter(|l| l.starts_with("# ")).find_map(|l| {
        l.split_once("library=")
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "RESULT bench=pingpong mode=lat size=8 ranks=2 iters=10000 reps=5 \
                        metric=lat_us better=lower min=0.38 med=0.39 max=0.41 window=64";

    #[test]
    fn parses_a_result_line() {
        let m = parse_line(LINE).unwrap().unwrap();
        assert_eq!(m.bench, "pingpong");
        assert_eq!(m.mode, "lat");
        assert_eq!(m.size, 8);
        assert_eq!(m.ranks, 2);
        assert_eq!(m.metric, "lat_us");
        assert_eq!(m.better, Better::Lower);
        assert_eq!((m.min, m.med, m.max), (0.38, 0.39, 0.41));
        assert!(m.fields.contains(&("window".into(), "64".into())));
    }

    #[test]
    fn ignores_other_lines_and_reports_bad_ones() {
        let text = format!(
            "# pingpong ranks=2 library=MPICH Version:\t4.0.2\nnoise\n{LINE}\n\
             RESULT bench=x mode=y size=1 ranks=2 metric=m better=sideways min=1 med=1 max=1\n\
             RESULT bench=x mode=y size=1 ranks=2 metric=m better=lower min=1 med=nan max=1\n\
             RESULT oops\n"
        );
        let (ok, errors) = parse_output(&text);
        assert_eq!(ok.len(), 1);
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert_eq!(
            library_version(&text).as_deref(),
            Some("MPICH Version: 4.0.2")
        );
    }

    #[test]
    fn missing_keys_are_errors() {
        assert_eq!(
            parse_line("RESULT bench=x"),
            Err(ParseError::Missing("better"))
        );
    }
}
