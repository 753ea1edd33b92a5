//! A schedule written as text, as the source document's `hermes cron` and jobs API take it
//! (docs/api.md, "Jobs"): `"every 30s"` (or `"30s"`; units s, m, h, d and their long names)
//! and a 5-field cron expression in UTC (`"0 8 * * 1-5"`). The object forms stay the
//! canonical shape: a text schedule is answered and stored as its object.

use super::scheduled::Schedule;

/// `text` as a schedule, or why not (the message names the accepted forms).
pub fn parse(text: &str) -> Result<Schedule, String> {
    let t = text.trim();
    let interval = t
        .strip_prefix("every")
        .or_else(|| t.strip_prefix("Every"))
        .map(str::trim_start)
        .unwrap_or(t);
    if let Some(seconds) = interval_seconds(interval) {
        return Ok(Schedule::Every { seconds });
    }
    if t.split_whitespace().count() == 5 {
        return Ok(Schedule::Cron {
            expr: t.split_whitespace().collect::<Vec<_>>().join(" "),
            timezone: None,
        });
    }
    Err(format!(
        "schedule {t:?} is neither an interval (\"every 30s\", \"every 5m\", \"2h\", \"1d\") \
         nor a 5-field cron expression (\"0 8 * * 1-5\"); one-off times are not schedules"
    ))
}

/// `30s`, `30 s`, `5 minutes`, `2h`, `1 day`: the interval in seconds (`None` when `s` is
/// not one, or too long to count).
fn interval_seconds(s: &str) -> Option<u64> {
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(digits);
    let n: u64 = number.parse().ok()?;
    let per = match unit.trim().to_ascii_lowercase().as_str() {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        _ => return None,
    };
    n.checked_mul(per)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_in_every_spelling_the_document_and_its_peers_use() {
        for (text, seconds) in [
            ("every 30s", 30),
            ("every 5m", 300),
            ("Every 2 hours", 7200),
            ("30m", 1800),
            ("1d", 86_400),
            ("every 90 seconds", 90),
        ] {
            assert_eq!(parse(text), Ok(Schedule::Every { seconds }), "{text}");
        }
    }

    #[test]
    fn five_fields_are_a_cron_expression_in_utc() {
        assert_eq!(
            parse("  0 8  * * 1-5 "),
            Ok(Schedule::Cron {
                expr: "0 8 * * 1-5".into(),
                timezone: None
            })
        );
    }

    #[test]
    fn anything_else_is_refused_naming_the_forms() {
        for text in [
            "tomorrow",
            "every 5 fortnights",
            "2026-12-01T09:00",
            "* * * *",
            "every",
        ] {
            let e = parse(text).unwrap_err();
            assert!(
                e.contains("every 30s") && e.contains("0 8 * * 1-5"),
                "{text}: {e}"
            );
        }
    }
}
