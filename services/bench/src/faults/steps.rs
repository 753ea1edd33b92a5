//! What a fault run is doing now: each step is printed with the wall-clock time (to read the
//! servers' and the fleet's logs beside it) and remembered, so that a run that gives up at its
//! deadline can say where it stood instead of ending without a word.

use std::sync::Mutex;

/// The last step said, for the deadline's message.
static LAST: Mutex<String> = Mutex::new(String::new());

/// Say what the run is doing now, on stderr with the time, and remember it.
pub(super) fn step(what: &str) {
    *LAST.lock().unwrap_or_else(|e| e.into_inner()) = tell(what);
}

/// Say `what` on stderr with the time, without making it the step (the load's progress);
/// returns the line said.
pub(super) fn tell(what: &str) -> String {
    let line = format!("{} {what}", chrono::Utc::now().format("%H:%M:%S%.3f"));
    eprintln!("faults: {line}");
    line
}

/// The last step said (empty before the first).
pub(super) fn last() -> String {
    LAST.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_step_is_remembered() {
        step("first");
        step("second");
        assert!(last().ends_with(" second"), "{}", last());
    }
}
