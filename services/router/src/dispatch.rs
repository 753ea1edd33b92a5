//! Agent dispatch (docs/agents.md): who answers this run. An explicit assignment of the channel
//! or the user wins; then an `@profileKey` mention in the text; then round robin among the
//! eligible agents. An external agent silent past the presence window
//! (`HERMES_AGENT_PRESENCE_SECS`) is not chosen by a mention or round robin. A workspace with
//! no agents answers with the configured persona. The
//! decision is recorded on the run as `dispatch { mode, chosen, reason }`.
//!
//! BUSY pauses the dispatcher for that agent (docs/agents.md, "BUSY pauses the dispatcher"):
//! a mention or round robin never picks an agent that is not ONLINE, and an assignment to a
//! BUSY or OFFLINE agent either holds the run for it (`HERMES_AGENT_PAUSED_ASSIGNMENTS=wait`,
//! external agents) or is dispatched as if there were none.

use chrono::Utc;
use hermes_config::PausedAssignments;
use hermes_db::agents::Agent;
use hermes_db::users::Resolved;
use hermes_db::{DbError, Transaction, agents, round_robin};
use hermes_types::agent::{AgentKind, AgentStatus, Dispatch, DispatchMode};
use hermes_types::ids::WorkspaceId;
use hermes_types::intent::Intent;
use hermes_types::ttl_cache::TtlCache;
use std::time::Duration;

/// The chosen agent, or none (the built-in persona).
pub struct Chosen {
    pub agent: Option<Agent>,
    pub dispatch: Dispatch,
    /// The run waits, unwoken, for its paused agent to be ONLINE again.
    pub held: bool,
}

/// What a run of `agent` may not be given now: `Some(status)` when the agent is paused
/// (BUSY, OFFLINE, or an external agent silent past the presence window, which counts as
/// OFFLINE even before the presence sweep says so).
fn paused(agent: &Agent, heard_within: Duration) -> Option<AgentStatus> {
    if agent.is_silent(heard_within, Utc::now()) {
        return Some(AgentStatus::Offline);
    }
    (agent.status != AgentStatus::Online).then_some(agent.status)
}

/// The `@profileKey` mentions in a text, in order (lower-cased; keys are lower-case).
pub fn mentions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        // A mention starts at '@' not preceded by a word character (so e-mail addresses
        // such as a@b.com are not mentions).
        if c == '@' && !prev.is_some_and(|p| p.is_alphanumeric() || p == '_') {
            let key: String = text[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            if !key.is_empty() {
                out.push(key.to_ascii_lowercase());
            }
        }
        prev = Some(c);
    }
    out
}

/// Whether a workspace has any agent, remembered for a few seconds: most installs answer
/// with the configured persona, and asking the database twice per message to learn that
/// nothing changed is the router's most avoidable cost. A new agent is picked up within
/// [`PRESENCE_TTL`].
pub struct Presence {
    known: TtlCache<WorkspaceId, bool>,
}

/// How long "this workspace has (no) agents" is trusted.
pub const PRESENCE_TTL: Duration = Duration::from_secs(2);
/// Workspaces remembered at once (a bool each: the bound only guards against unbounded growth).
const PRESENCE_CACHED_WORKSPACES: usize = 10_000;

impl Default for Presence {
    fn default() -> Self {
        Self {
            known: TtlCache::new(PRESENCE_TTL, PRESENCE_CACHED_WORKSPACES),
        }
    }
}

impl Presence {
    async fn has_agents(
        &self,
        tx: &Transaction<'_>,
        workspace: WorkspaceId,
    ) -> Result<bool, DbError> {
        if let Some(has) = self.known.get(&workspace) {
            return Ok(has);
        }
        let has = agents::any(tx, workspace).await?;
        self.known.insert(workspace, has);
        Ok(has)
    }
}

/// How dispatch is asked to choose.
pub struct Ask<'a> {
    pub presence: &'a Presence,
    /// `HERMES_AGENT_PRESENCE_SECS`.
    pub heard_within: Duration,
    /// `HERMES_AGENT_PAUSED_ASSIGNMENTS`.
    pub paused: PausedAssignments,
}

/// Choose the agent of a run, inside the run's transaction (rows locked, so capacity holds
/// under concurrency).
pub async fn choose(
    tx: &Transaction<'_>,
    ask: &Ask<'_>,
    who: &Resolved,
    text: &str,
    intent: Intent,
) -> Result<Chosen, DbError> {
    let assigned = who.channel_agent_id.or(who.user.agent_id);
    let mut passed_over = None;
    if let Some(id) = assigned
        && let Some(agent) = agents::lock(tx, id).await?
    {
        let scope = if who.channel_agent_id.is_some() {
            "channel"
        } else {
            "user"
        };
        let reason = format!("assigned to this {scope}");
        match paused(&agent, ask.heard_within) {
            None => return chosen(agent, DispatchMode::Assigned, reason, false, tx).await,
            Some(status)
                if agent.kind == AgentKind::External && ask.paused == PausedAssignments::Wait =>
            {
                let reason = format!("{reason}; held while the agent is {status}");
                return chosen(agent, DispatchMode::Assigned, reason, true, tx).await;
            }
            Some(status) => {
                passed_over = Some(format!("assigned agent {} is {status}", agent.profile_key));
            }
        }
    }
    let mut c = choose_unassigned(tx, ask, who, text, intent).await?;
    if let Some(note) = passed_over {
        c.dispatch.reason = format!("{note}: {}", c.dispatch.reason);
    }
    Ok(c)
}

/// A mention, else round robin, else the persona.
async fn choose_unassigned(
    tx: &Transaction<'_>,
    ask: &Ask<'_>,
    who: &Resolved,
    text: &str,
    intent: Intent,
) -> Result<Chosen, DbError> {
    let has_agents = ask.presence.has_agents(tx, who.user.workspace_id).await?;
    let keys = if has_agents {
        mentions(text)
    } else {
        Vec::new()
    };
    for key in keys {
        let Some(agent) = agents::by_key_in(tx, who.user.workspace_id, &key).await? else {
            continue;
        };
        // A BUSY or OFFLINE agent (a silent one included) is not given a mention.
        if paused(&agent, ask.heard_within).is_some() {
            continue;
        }
        let Some(agent) = agents::lock(tx, agent.id).await? else {
            continue;
        };
        return chosen(
            agent,
            DispatchMode::Mention,
            format!("mentioned as @{key}"),
            false,
            tx,
        )
        .await;
    }
    if let Some(agent) =
        round_robin::next(tx, who.user.workspace_id, intent.as_str(), ask.heard_within).await?
    {
        return chosen(
            agent,
            DispatchMode::RoundRobin,
            "round-robin".into(),
            false,
            tx,
        )
        .await;
    }
    let reason = if has_agents {
        "no eligible agent (all offline, busy or at capacity): default persona"
    } else {
        "no agents configured: default persona"
    };
    Ok(Chosen {
        agent: None,
        dispatch: Dispatch {
            mode: DispatchMode::Default,
            chosen: "default".into(),
            reason: reason.into(),
        },
        held: false,
    })
}

async fn chosen(
    agent: Agent,
    mode: DispatchMode,
    reason: String,
    held: bool,
    tx: &Transaction<'_>,
) -> Result<Chosen, DbError> {
    agents::mark_dispatched(tx, agent.id).await?;
    Ok(Chosen {
        dispatch: Dispatch {
            mode,
            chosen: agent.profile_key.clone(),
            reason,
        },
        agent: Some(agent),
        held,
    })
}

/// The label of the kind of a chosen agent, for metrics.
pub fn kind_label(c: &Chosen) -> &'static str {
    match c.agent.as_ref().map(|a| a.kind) {
        Some(AgentKind::Internal) => "internal",
        Some(AgentKind::External) => "external",
        None => "default",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_words_after_at() {
        assert_eq!(mentions("hey @Victor can you look"), vec!["victor"]);
        assert_eq!(mentions("@mizu and @victor-2"), vec!["mizu", "victor-2"]);
        assert!(mentions("mail me at a@b.com").is_empty());
        assert!(mentions("just @ nothing").is_empty());
        assert_eq!(mentions("é@x @y"), vec!["y"]);
    }
}
