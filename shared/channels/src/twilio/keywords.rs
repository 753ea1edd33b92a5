//! SMS keywords (<https://help.twilio.com/articles/223134027>): a message that is only an
//! opt-out word (`STOP` and its synonyms) stops every message to the number until it sends
//! an opt-in word (`START`, `YES`, `UNSTOP`); `HELP` or `INFO` asks who is writing. Carriers
//! require both, and Twilio enforces the first on its side too (error 21610). Hermes keeps
//! the opt-out itself, in PostgreSQL (docs/channels.md, "SMS through Twilio"), so no reply,
//! late answer, scheduled job or operator's send goes to a number that said `STOP`, whatever
//! route or number sent it. With Twilio's Advanced Opt-Out on, the webhook names the kind
//! in `OptOutType`, which wins over the words.

/// What a keyword asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keyword {
    /// Stop every message to the number.
    Stop,
    /// Messages may go again.
    Start,
    /// Who is this, and how do I stop it.
    Help,
}

impl Keyword {
    /// The word stored with an opt-out and shown in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Keyword::Stop => "stop",
            Keyword::Start => "start",
            Keyword::Help => "help",
        }
    }
}

/// Twilio's default opt-out words.
const STOP: [&str; 8] = [
    "STOP",
    "STOPALL",
    "UNSUBSCRIBE",
    "CANCEL",
    "END",
    "QUIT",
    "OPTOUT",
    "REVOKE",
];
/// Twilio's default opt-in words.
const START: [&str; 3] = ["START", "YES", "UNSTOP"];
/// Twilio's default help words.
const HELP: [&str; 2] = ["HELP", "INFO"];

/// The keyword a message is: Twilio's `OptOutType` when it sent one, else a body that is
/// one of the words alone (any case, surrounding spaces and a final period ignored).
pub fn keyword(body: Option<&str>, opt_out_type: Option<&str>) -> Option<Keyword> {
    match opt_out_type.map(str::to_ascii_uppercase).as_deref() {
        Some("STOP") => return Some(Keyword::Stop),
        Some("START") => return Some(Keyword::Start),
        Some("HELP") => return Some(Keyword::Help),
        _ => {}
    }
    let word = body?
        .trim()
        .trim_end_matches(['.', '!'])
        .to_ascii_uppercase();
    if STOP.contains(&word.as_str()) {
        Some(Keyword::Stop)
    } else if START.contains(&word.as_str()) {
        Some(Keyword::Start)
    } else if HELP.contains(&word.as_str()) {
        Some(Keyword::Help)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_keyword_alone_counts() {
        assert_eq!(keyword(Some("STOP"), None), Some(Keyword::Stop));
        assert_eq!(keyword(Some("  stop. "), None), Some(Keyword::Stop));
        assert_eq!(keyword(Some("Unsubscribe"), None), Some(Keyword::Stop));
        assert_eq!(keyword(Some("start"), None), Some(Keyword::Start));
        assert_eq!(keyword(Some("Yes"), None), Some(Keyword::Start));
        assert_eq!(keyword(Some("help"), None), Some(Keyword::Help));
        assert_eq!(keyword(Some("please stop"), None), None);
        assert_eq!(keyword(Some("stop it"), None), None);
        assert_eq!(keyword(None, None), None);
        // Twilio's Advanced Opt-Out names the kind of a custom word.
        assert_eq!(keyword(Some("arrêt"), Some("STOP")), Some(Keyword::Stop));
        assert_eq!(keyword(Some("hello"), Some("other")), None);
    }
}
