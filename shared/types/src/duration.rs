//! Durations as operators type them: `90s`, `10m`, `2h`, or bare seconds (`600`). One
//! parser for the CLI (`hermes agents … --reply-deadline 10m`) and the settings that take a
//! schedule (`HERMES_AGENT_REWAKE_DELAYS=1m,5m`), so both accept and refuse the same text.

use std::time::Duration;

/// Parse one duration: a whole number of seconds, optionally followed by `s`, `m` or `h`.
/// Zero is refused: every duration this reads is a wait that must pass.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_lowercase()),
        _ => (t, 's'),
    };
    let per_unit = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (use s, m or h, e.g. 90s, 10m, 2h)"
            ));
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 90s, 10m, 2h)"))?;
    let secs = n
        .checked_mul(per_unit)
        .ok_or_else(|| format!("{text:?} is too long"))?;
    if secs == 0 {
        return Err(format!("{text:?} must be longer than zero"));
    }
    Ok(Duration::from_secs(secs))
}

/// Parse a comma-separated list of durations (`1m,5m`); an empty text is the empty list.
pub fn parse_durations(text: &str) -> Result<Vec<Duration>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',').map(parse_duration).collect()
}

/// The shortest form [`parse_duration`] reads back: `1m`, `25m`, `2h`, `90s`.
pub fn duration_label(d: Duration) -> String {
    let secs = d.as_secs();
    if secs > 0 && secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs > 0 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_bare_seconds_parse() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration(" 600 "), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("5M"), Ok(Duration::from_secs(300)));
    }

    #[test]
    fn nonsense_zero_and_overflow_are_refused() {
        for bad in ["", "m", "0", "0s", "-5s", "1.5m", "10d", "ten", "1 m x"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_duration(&format!("{}h", u64::MAX)).is_err());
    }

    #[test]
    fn lists_split_on_commas_and_may_be_empty() {
        assert_eq!(
            parse_durations("1m, 5m,90"),
            Ok(vec![
                Duration::from_secs(60),
                Duration::from_secs(300),
                Duration::from_secs(90)
            ])
        );
        assert_eq!(parse_durations(" "), Ok(Vec::new()));
        assert!(parse_durations("1m,,5m").is_err());
        assert!(parse_durations("1m,0s").is_err());
    }

    #[test]
    fn labels_read_back() {
        for secs in [1, 59, 60, 90, 300, 3600, 5400, 7200] {
            let d = Duration::from_secs(secs);
            assert_eq!(parse_duration(&duration_label(d)), Ok(d));
        }
        assert_eq!(duration_label(Duration::from_secs(600)), "10m");
        assert_eq!(duration_label(Duration::from_secs(90)), "90s");
    }
}
