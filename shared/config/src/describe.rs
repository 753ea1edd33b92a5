//! What `hermes doctor` prints as the effective configuration: every variable `Config`
//! reads, in declaration order, with what it resolved to (secrets masked by their kind),
//! then what the variables add up to.

use crate::Config;
use crate::env::{self, ReadBy};

impl Config {
    /// The effective configuration as `(name, value)` rows with secrets masked (for
    /// `hermes doctor`): one row per declared variable, then the default provider and the
    /// delivery senders they resolve to.
    pub fn describe(&self) -> Vec<(String, String)> {
        let mut rows: Vec<(String, String)> = env::all()
            .filter(|s| s.read_by == ReadBy::Config)
            .map(|s| {
                let value = self
                    .shown
                    .get(s.name)
                    .cloned()
                    // Read only when another setting needs it (a sender's base URL).
                    .unwrap_or_else(|| "(not used)".into());
                (s.name.to_string(), value)
            })
            .collect();
        rows.push((
            "default provider".into(),
            match self.llm.provider.resolve(None) {
                Ok(p) if self.llm.provider.forced.is_some() => format!("{} (forced)", p.kind),
                Ok(p) => format!("{} (by key)", p.kind),
                Err(e) => format!("(none: {e})"),
            },
        ));
        rows.push((
            "delivery senders".into(),
            match self.delivery.configured() {
                c if c.is_empty() => "(none: chat replies are parked)".into(),
                c => c.join(", "),
            },
        ));
        rows
    }
}
