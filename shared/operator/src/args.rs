//! A tool's arguments, read with clear refusals: only the names the tool's schema declares,
//! strings within their `maxLength`, integers within their bounds, ids that parse. The
//! bounds a parser enforces are the ones the catalog's schemas advertise (both read the
//! constants of [`crate::limits`]).

use std::str::FromStr;

use hermes_types::model::Platform;
use serde_json::{Map, Value};

use crate::error::ToolError;

/// An argument given as text or as a non-negative integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrOrCount<'a> {
    Str(&'a str),
    Count(i64),
}

/// The arguments of one call: a JSON object holding only names the tool takes.
pub struct Args {
    map: Map<String, Value>,
}

impl Args {
    /// `args` (absent or null: none) checked against `known`, the argument names of `tool`.
    pub fn parse(tool: &str, known: &[&str], args: Value) -> Result<Self, ToolError> {
        let map = match args {
            Value::Null => Map::new(),
            Value::Object(map) => map,
            _ => return Err(ToolError::invalid("arguments must be a JSON object")),
        };
        if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(ToolError::invalid(format!(
                "{tool} takes no argument {unknown:?} (it takes: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ))
            .with("argument", unknown.as_str()));
        }
        Ok(Self { map })
    }

    /// A string argument of at most `max` bytes, if given (`null` counts as absent).
    pub fn opt_str(&self, name: &str, max: usize) -> Result<Option<&str>, ToolError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.len() > max => Err(ToolError::invalid(format!(
                "{name} is longer than {max} bytes"
            ))
            .with("argument", name)),
            Some(Value::String(s)) if s.contains('\0') => Err(ToolError::invalid(format!(
                "{name} may not contain the NUL character"
            ))
            .with("argument", name)),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => {
                Err(ToolError::invalid(format!("{name} must be a string")).with("argument", name))
            }
        }
    }

    /// An argument that may be a string of at most `max` bytes or a non-negative integer
    /// (a cursor, which clients send in either form), if given.
    pub fn opt_str_or_count(
        &self,
        name: &str,
        max: usize,
    ) -> Result<Option<StrOrCount<'_>>, ToolError> {
        match self.map.get(name) {
            Some(Value::Number(n)) => n
                .as_i64()
                .filter(|v| *v >= 0)
                .map(|v| Some(StrOrCount::Count(v)))
                .ok_or_else(|| {
                    ToolError::invalid(format!(
                        "{name} must be a string or an integer from 0 to {}",
                        i64::MAX
                    ))
                    .with("argument", name)
                }),
            _ => Ok(self.opt_str(name, max)?.map(StrOrCount::Str)),
        }
    }

    /// A required string of 1 to `max` bytes, not only whitespace.
    pub fn str(&self, name: &str, max: usize) -> Result<&str, ToolError> {
        match self.opt_str(name, max)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => {
                Err(ToolError::invalid(format!("{name} must not be empty")).with("argument", name))
            }
            None => Err(ToolError::invalid(format!("{name} is required")).with("argument", name)),
        }
    }

    /// A required argument parsed by [`FromStr`] (an id); `what` names the expected form.
    pub fn parsed<T: FromStr>(&self, name: &str, what: &str) -> Result<T, ToolError> {
        self.opt_parsed(name, what)?
            .ok_or_else(|| ToolError::invalid(format!("{name} is required")).with("argument", name))
    }

    /// [`Args::parsed`], optional.
    pub fn opt_parsed<T: FromStr>(&self, name: &str, what: &str) -> Result<Option<T>, ToolError> {
        let Some(s) = self.opt_str(name, 200)? else {
            return Ok(None);
        };
        s.trim()
            .parse()
            .map(Some)
            .map_err(|_| ToolError::invalid(format!("{name} is not {what}")).with("argument", name))
    }

    /// An optional integer within `min..=max`.
    pub fn opt_int(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>, ToolError> {
        hermes_mcp_server::int_argument(&self.map, name, min, max)
            .map_err(|m| ToolError::invalid(m).with("argument", name))
    }

    /// A page size: `limit` within `1..=max`, `default` when absent.
    pub fn limit(&self, default: i64, max: i64) -> Result<i64, ToolError> {
        Ok(self.opt_int("limit", 1, max)?.unwrap_or(default))
    }

    /// The optional `platform` filter: a platform Hermes knows.
    pub fn platform(&self) -> Result<Option<Platform>, ToolError> {
        let Some(s) = self.opt_str("platform", 32)? else {
            return Ok(None);
        };
        Platform::parse(s).map(Some).ok_or_else(|| {
            let known: Vec<&str> = Platform::ALL.iter().map(|p| p.as_str()).collect();
            ToolError::invalid(format!("platform {s:?} is not one of {}", known.join(", ")))
                .with("argument", "platform")
        })
    }

    /// An optional list of at most `max_items` strings of at most `max` bytes each.
    pub fn opt_strs(
        &self,
        name: &str,
        max_items: usize,
        max: usize,
    ) -> Result<Option<Vec<&str>>, ToolError> {
        let bad = |why: String| ToolError::invalid(why).with("argument", name);
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) if items.len() > max_items => {
                Err(bad(format!("{name} may hold at most {max_items} items")))
            }
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v.as_str() {
                    Some(s) if s.len() <= max => Ok(s),
                    _ => Err(bad(format!(
                        "{name} must be a list of strings of at most {max} bytes"
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(bad(format!("{name} must be a list of strings"))),
        }
    }

    /// An optional boolean.
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, ToolError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => {
                Err(ToolError::invalid(format!("{name} must be true or false"))
                    .with("argument", name))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_names_and_bad_types_are_refused_with_the_argument() {
        let e = Args::parse("t", &["limit"], json!({ "lmit": 3 }))
            .err()
            .unwrap();
        assert_eq!(e.refusal.details["argument"], "lmit");
        assert!(
            e.refusal.message.contains("it takes: limit"),
            "{}",
            e.refusal.message
        );
        assert!(Args::parse("t", &[], json!([1])).is_err());
        let a = Args::parse(
            "t",
            &["limit", "q", "id"],
            json!({ "limit": 500, "q": "x".repeat(11), "id": "nope" }),
        )
        .unwrap();
        assert!(a.limit(50, 200).is_err());
        assert!(a.opt_str("q", 10).is_err());
        assert!(a.opt_str("q", 11).unwrap().is_some());
        assert!(a.parsed::<uuid::Uuid>("id", "a UUID").is_err());
        assert!(a.str("missing", 10).is_err());
    }

    #[test]
    fn absent_and_null_are_the_same_and_defaults_apply() {
        let a = Args::parse("t", &["limit", "platform"], json!({ "limit": null })).unwrap();
        assert_eq!(a.limit(50, 200).unwrap(), 50);
        assert_eq!(a.platform().unwrap(), None);
        let a = Args::parse("t", &["platform"], json!({ "platform": "telegram" })).unwrap();
        assert_eq!(a.platform().unwrap(), Some(Platform::Telegram));
        let a = Args::parse("t", &["platform"], json!({ "platform": "fax" })).unwrap();
        assert!(a.platform().is_err());
    }
}
