//! `current_time`: the current date and time in an IANA time zone.

use chrono::Utc;
use chrono_tz::Tz;
use hermes_types::model::ToolSpec;
use serde_json::json;

use crate::registry::{Tool, ToolError, ToolFuture};

pub struct CurrentTime;

impl CurrentTime {
    /// The answer for `timezone` (UTC when absent).
    pub fn at(
        arguments: &serde_json::Value,
        now: chrono::DateTime<Utc>,
    ) -> Result<String, ToolError> {
        let name = match arguments.get("timezone") {
            None | Some(serde_json::Value::Null) => "UTC",
            Some(serde_json::Value::String(s)) => s.as_str(),
            Some(other) => {
                return Err(ToolError::InvalidArguments(format!(
                    "timezone must be a string, got {other}"
                )));
            }
        };
        let tz: Tz = name
            .parse()
            .map_err(|_| ToolError::InvalidArguments(format!("unknown IANA time zone {name:?}")))?;
        let local = now.with_timezone(&tz);
        Ok(json!({
            "timezone": name,
            "datetime": local.to_rfc3339(),
            "weekday": local.format("%A").to_string(),
        })
        .to_string())
    }
}

impl Tool for CurrentTime {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "current_time".into(),
            description: "The current date and time in a time zone.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "timezone": {
                        "type": "string",
                        "description": "IANA time zone name, e.g. Europe/Paris; UTC when omitted"
                    }
                },
                "additionalProperties": false
            }),
            toolset: super::TOOLSET.into(),
        }
    }

    fn call<'a>(&'a self, arguments: &'a serde_json::Value) -> ToolFuture<'a> {
        Box::pin(async move { Self::at(arguments, Utc::now()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn converts_to_the_requested_zone() {
        let now = Utc.with_ymd_and_hms(2026, 1, 15, 12, 0, 0).unwrap();
        let out: serde_json::Value = serde_json::from_str(
            &CurrentTime::at(&json!({"timezone": "Asia/Tokyo"}), now).unwrap(),
        )
        .unwrap();
        assert_eq!(out["datetime"], "2026-01-15T21:00:00+09:00");
        assert_eq!(out["weekday"], "Thursday");
        let utc: serde_json::Value =
            serde_json::from_str(&CurrentTime::at(&json!({}), now).unwrap()).unwrap();
        assert_eq!(utc["datetime"], "2026-01-15T12:00:00+00:00");
    }

    #[test]
    fn refuses_unknown_zones_and_bad_types() {
        let now = Utc::now();
        assert!(matches!(
            CurrentTime::at(&json!({"timezone": "Mars/Olympus"}), now),
            Err(ToolError::InvalidArguments(_))
        ));
        assert!(matches!(
            CurrentTime::at(&json!({"timezone": 5}), now),
            Err(ToolError::InvalidArguments(_))
        ));
    }
}
