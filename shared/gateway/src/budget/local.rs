//! Holds made while Redis cannot be read (docs/models-and-budgets.md, where budgets live): a
//! call is checked against the settled totals in PostgreSQL plus the holds of calls in flight
//! in this process, and holds its worst case here until it settles. Replicas do not see each
//! other's in-process holds, so while Redis is down one user can overspend by at most the
//! worst cases of their calls in flight on the *other* replicas at that moment; every call's
//! real usage is still recorded in PostgreSQL, so the next check counts it.

use std::collections::HashMap;
use std::sync::Mutex;

use hermes_config::TierBudget;
use hermes_db::budgets::TokensUsed;
use hermes_types::ids::UserId;

use super::Refusal;

/// Tokens held per user in this process.
#[derive(Default)]
pub(super) struct LocalHolds(Mutex<HashMap<UserId, u64>>);

impl LocalHolds {
    /// Hold `tokens` for `user` if `settled` plus every hold of the user in this process
    /// stays within both windows of `budget`.
    pub(super) fn hold(
        &self,
        user: UserId,
        settled: TokensUsed,
        budget: TierBudget,
        tokens: u64,
    ) -> Result<(), Refusal> {
        let mut holds = self.0.lock().expect("local holds");
        let held = holds.get(&user).copied().unwrap_or(0);
        if settled.day + held + tokens > budget.daily_tokens {
            return Err(Refusal::UserDaily);
        }
        if settled.month + held + tokens > budget.monthly_tokens {
            return Err(Refusal::UserMonthly);
        }
        holds.insert(user, held + tokens);
        Ok(())
    }

    /// Give back `tokens` of `user`.
    pub(super) fn release(&self, user: UserId, tokens: u64) {
        let mut holds = self.0.lock().expect("local holds");
        if let Some(held) = holds.get_mut(&user) {
            *held = held.saturating_sub(tokens);
            if *held == 0 {
                holds.remove(&user);
            }
        }
    }

    /// What `user` holds in this process.
    pub(super) fn held(&self, user: UserId) -> u64 {
        self.0
            .lock()
            .expect("local holds")
            .get(&user)
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_count_until_released() {
        let h = LocalHolds::default();
        let user = UserId::new();
        let budget = TierBudget {
            daily_tokens: 100,
            monthly_tokens: 1000,
        };
        let settled = TokensUsed { day: 40, month: 40 };
        assert_eq!(h.hold(user, settled, budget, 30), Ok(()));
        assert_eq!(h.hold(user, settled, budget, 31), Err(Refusal::UserDaily));
        h.release(user, 30);
        assert_eq!(h.held(user), 0);
        assert_eq!(h.hold(user, settled, budget, 60), Ok(()));
    }
}
