//! Money and token arithmetic of the budgets: micro-dollars as integers (dollars appear only
//! at the edges: gauges, logs, `hermes killswitch status`) and a call's worst-case tokens.

/// Micro-dollars as an exact decimal string of dollars ("0.000024"), for logs.
pub(super) fn micro_to_usd(micro: u64) -> String {
    format!("{}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

/// Micro-dollars as dollars for a gauge (display only: money is never computed in floats).
pub(super) fn micro_to_dollars(micro: u64) -> f64 {
    micro as f64 / 1_000_000.0
}

/// Today's spend as stored: integer micro-dollars, or a dollar float written by a build
/// before the switch to integers (read as that old format and converted). Anything else
/// is `None`, which the callers read as nothing spent: the day starts fresh. (An old total
/// of exactly whole dollars, "2", cannot be told from micro-dollars; it reads low on the day
/// of the upgrade only.)
pub(super) fn spent_micro(s: &str) -> Option<u64> {
    let s = s.trim();
    s.parse::<u64>().ok().or_else(|| usd_to_micro(s))
}

/// A dollar float (the old format of the spend key) as micro-dollars, rounded to the
/// nearest.
fn usd_to_micro(s: &str) -> Option<u64> {
    let v: f64 = s.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * 1_000_000.0).round() as u64)
}

/// A call's worst case: its input estimated at 4 characters a token (tool schemas
/// included) plus its output cap.
pub fn estimate_tokens(
    messages: &[hermes_types::model::ChatMessage],
    tools: &[hermes_types::model::ToolSpec],
    max_output: u32,
) -> u64 {
    let chars: usize = messages
        .iter()
        .map(|m| {
            m.content.as_deref().map_or(0, str::len)
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
        })
        .sum::<usize>()
        + tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum::<usize>();
    (chars as u64).div_ceil(4) + u64::from(max_output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_round_trips_through_the_float_counter() {
        assert_eq!(micro_to_usd(24), "0.000024");
        assert_eq!(micro_to_usd(3_000_001), "3.000001");
        assert_eq!(usd_to_micro("3.000001"), Some(3_000_001));
        assert_eq!(usd_to_micro("250"), Some(250_000_000));
        assert_eq!(usd_to_micro("nan"), None);
    }

    #[test]
    fn spend_is_read_as_integer_micro_dollars_or_the_old_dollar_float() {
        assert_eq!(spent_micro("2100"), Some(2100));
        assert_eq!(
            spent_micro("0.00105"),
            Some(1050),
            "a key from an older build"
        );
        assert_eq!(spent_micro("3"), Some(3), "an integer is micro-dollars");
        assert_eq!(spent_micro("garbage"), None);
    }

    #[test]
    fn estimate_counts_input_and_the_output_cap() {
        let m = vec![hermes_types::model::ChatMessage::text(
            hermes_types::model::Role::User,
            "x".repeat(400),
        )];
        assert_eq!(estimate_tokens(&m, &[], 1024), 100 + 1024);
    }
}
