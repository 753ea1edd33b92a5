//! The JSON body of an agent wake (docs/agents.md, "Signed agent webhooks"): the contract's
//! envelope (`kind`, `workspace{id, slug, key}`, `agent{id, profileKey}`, `issue{id, key,
//! title}`, `dispatch{mode, chosen, reason}`) with the run presented as the contract's issue
//! and chat thread (docs/agents.md, "Threads and issues"), and Hermes's own fields beside it
//! under their own names (`run`, `deliveryId`, the engagement contract).

use hermes_db::webhook_deliveries::WakeTarget;
use hermes_types::agent::EngagementMode;
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{AgentWake, MessageEvent};
use serde_json::{Value, json};

/// Longest issue title, in characters (a longer first line is cut with `…`).
const TITLE_CHARS: usize = 80;
/// The run's key as the contract's `issue.key`: the workspace key and the last eight hex
/// digits of the run id (`DEFAULT-3F9A01C2`). A handle for people and logs; `issue.id` is
/// the identity.
pub fn issue_key(workspace_key: &str, run: RunId) -> String {
    let hex = run.as_uuid().simple().to_string().to_ascii_uppercase();
    format!("{workspace_key}-{}", &hex[hex.len() - 8..])
}

/// The run's title as the contract's `issue.title`: the message's first non-empty line, cut
/// to 80 characters; a message without text is named by its platform and attachments.
pub fn issue_title(message: &MessageEvent) -> String {
    let line = message
        .text
        .as_deref()
        .and_then(|t| t.lines().map(str::trim).find(|l| !l.is_empty()));
    match line {
        Some(l) if l.chars().count() > TITLE_CHARS => {
            let cut: String = l.chars().take(TITLE_CHARS - 1).collect();
            format!("{}…", cut.trim_end())
        }
        Some(l) => l.to_string(),
        None => match message.media.len() {
            0 => format!("A {} message", message.platform.as_str()),
            1 => format!("A {} message with 1 attachment", message.platform.as_str()),
            n => format!(
                "A {} message with {n} attachments",
                message.platform.as_str()
            ),
        },
    }
}

/// Who enforces an external run's tool policy, stated as it is (docs/agents.md,
/// "Engagement modes"): an external agent's tools run in its own runtime, so neither
/// Hermes layer sees, let alone refuses, its calls; `enforced` says what Hermes enforces.
fn enforcement_layers() -> Value {
    json!([
        {
            "kind": "hermes-router",
            "enforced": false,
            "detail": "the mode and allowlist are recorded on the run and sent here; the router never sees this runtime's tool calls",
        },
        {
            "kind": "hermes-host",
            "enforced": false,
            "detail": "this run's tools do not execute on Hermes hosts",
        },
        {
            "kind": "agent-runtime",
            "enforced": false,
            "detail": "not verified by Hermes: this runtime must apply engagement_mode and allowed_host_tools itself",
        },
    ])
}

/// The JSON a woken agent receives: what happened, to whom, in which workspace, for which
/// issue (the run) and chat thread, how the agent was chosen, and the run's engagement
/// contract.
pub fn wake_body(env: &Envelope, wake: &AgentWake, target: &WakeTarget) -> Value {
    let restricted = wake.engagement_mode != EngagementMode::Execute;
    let key = &target.workspace_key;
    let m = &wake.message;
    let platform = Some(m.platform.as_str());
    let attachments: Vec<Value> = m.media.iter().map(|x| x.attachment(platform)).collect();
    json!({
        "kind": wake.event,
        "deliveryId": wake.delivery_id,
        "workspace": {
            "id": target.workspace_id,
            "slug": target.workspace_slug,
            "key": key,
            "name": target.workspace_name,
        },
        "agent": { "id": wake.agent_id, "profileKey": wake.profile_key },
        "issue": {
            "id": env.run_id,
            "key": issue_key(key, env.run_id),
            "title": issue_title(m),
        },
        // The thread a chat reply goes to is the run's chat, named by the run.
        "threadId": env.run_id,
        // The contract's `chosen` is the agent's id; Hermes's record of the run keeps the
        // profile key (as `agent.profileKey` says it here).
        "dispatch": {
            "mode": wake.dispatch.mode,
            "chosen": wake.agent_id,
            "reason": wake.dispatch.reason,
        },
        "run": {
            "id": env.run_id,
            "platform": m.platform,
            "chatId": m.chat_id,
            "senderId": m.sender_id,
            "text": m.text,
            "receivedAt": m.received_at,
            "attachments": attachments,
        },
        "engagement_mode": wake.engagement_mode,
        "forge_contract_version": wake.contract_version,
        "tool_allowlist": wake.tool_allowlist,
        "runtime_policy": {
            "contract_version": wake.contract_version,
            "engagement_mode": wake.engagement_mode,
            "allowed_host_tools": wake.tool_allowlist,
            "restricted": restricted,
            "enforcement_layers": enforcement_layers(),
        },
    })
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use hermes_db::webhook_deliveries::WakeStatus;
    use hermes_db::workspaces::derived_key;
    use hermes_types::agent::{Dispatch, DispatchMode, WakeEvent};
    use hermes_types::ids::{AgentId, DeliveryId, WorkspaceId};
    use hermes_types::model::{Media, MediaKind, Platform};

    use super::*;

    fn message(text: Option<&str>, media: Vec<Media>) -> MessageEvent {
        MessageEvent {
            platform: Platform::Telegram,
            sender_id: "u1".into(),
            chat_id: "c1".into(),
            text: text.map(str::to_string),
            media,
            external_message_id: None,
            sender_name: None,
            received_at: Utc::now(),
            metadata: None,
        }
    }

    #[test]
    fn the_wake_body_carries_the_contracts_envelope_and_hermess_fields() {
        let photo = Media {
            kind: MediaKind::Image,
            platform_id: Some("AgACAgQ".into()),
            url: None,
            mime_type: Some("image/jpeg".into()),
        };
        let wake = AgentWake {
            delivery_id: DeliveryId::new(),
            agent_id: AgentId::new(),
            profile_key: "victor".into(),
            event: WakeEvent::ChatMessagePosted,
            dispatch: Dispatch {
                mode: DispatchMode::RoundRobin,
                chosen: "victor".into(),
                reason: "round-robin".into(),
            },
            engagement_mode: EngagementMode::Review,
            contract_version: "2026-06-06.2".into(),
            tool_allowlist: Vec::new(),
            message: message(Some("\n review AXI-42\nthanks"), vec![photo]),
        };
        let target = WakeTarget {
            status: WakeStatus::Pending,
            attempts: 0,
            agent_id: wake.agent_id,
            webhook_url: None,
            secret_sealed: None,
            workspace_secret_sealed: None,
            standard_webhooks: false,
            workspace_id: WorkspaceId::new(),
            workspace_slug: "axiom".into(),
            workspace_name: "Axiom".into(),
            workspace_key: "AXIOM".into(),
        };
        let env = Envelope::new(RunId::new(), None, &wake);
        let body = wake_body(&env, &wake, &target);
        assert_eq!(body["kind"], "CHAT_MESSAGE_POSTED");
        assert_eq!(body["workspace"]["slug"], "axiom");
        assert_eq!(body["workspace"]["key"], "AXIOM");
        assert_eq!(body["agent"]["profileKey"], "victor");
        assert_eq!(body["issue"]["id"], json!(env.run_id));
        assert_eq!(body["threadId"], json!(env.run_id));
        assert!(body["issue"]["key"].as_str().unwrap().starts_with("AXIOM-"));
        assert_eq!(body["issue"]["title"], "review AXI-42");
        assert_eq!(body["dispatch"]["chosen"], json!(wake.agent_id));
        assert_eq!(body["dispatch"]["mode"], "ROUND_ROBIN");
        assert_eq!(body["dispatch"]["reason"], "round-robin");
        assert_eq!(body["run"]["id"], json!(env.run_id));
        assert_eq!(body["run"]["attachments"][0]["file_id"], "AgACAgQ");
        assert_eq!(body["engagement_mode"], "REVIEW");
        assert_eq!(body["runtime_policy"]["contract_version"], "2026-06-06.2");
        assert_eq!(body["runtime_policy"]["allowed_host_tools"], json!([]));
        // Hermes runs none of an external agent's tools: it claims no enforcement.
        let layers = body["runtime_policy"]["enforcement_layers"]
            .as_array()
            .unwrap();
        assert!(!layers.is_empty());
        assert!(layers.iter().all(|l| l["enforced"] == false), "{layers:?}");
        assert!(layers.iter().any(|l| l["kind"] == "agent-runtime"));
    }

    #[test]
    fn keys_and_titles_are_derived_from_the_slug_and_the_message() {
        assert_eq!(derived_key("acme-corp_2"), "ACMECORP2");
        assert_eq!(derived_key("-_-"), "WS");
        let run = RunId::new();
        let key = issue_key("AXI", run);
        assert_eq!(key.len(), "AXI-".len() + 8);
        assert!(run.to_string().to_ascii_uppercase().ends_with(&key[4..]));
        let long = "x".repeat(200);
        let title = issue_title(&message(Some(&long), Vec::new()));
        assert_eq!(title.chars().count(), TITLE_CHARS);
        assert!(title.ends_with('…'));
        assert_eq!(
            issue_title(&message(None, Vec::new())),
            "A telegram message"
        );
    }
}
