//! The Forge contract's dispatcher side, item 6 (docs/agents.md, "Workspaces"): workspaces
//! made and changed with `hermes workspaces create|list|show|set` (slug, key, synthetic
//! secret, budget), and the same profile key in two of them end to end: two agents named
//! victor, each woken in its own workspace's name and signed with its secret, each key seeing
//! only its own runs.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{TestEnv, eventually};
use hermes_types::ids::AgentId;
use hermes_types::model::Platform;
use serde_json::{Value, json};

use crate::agent_mcp::{Mcp, env_with, peer};
use crate::forge_contract::{assert_signed_both_ways, closed_as, listed, message, wake};

/// `hermes <args>`, which must succeed: its output.
async fn ok(env: &TestEnv, args: &[&str]) -> String {
    let (code, out, err) = env.hermes(args).await;
    assert_eq!(code, 0, "hermes {args:?}: {out}{err}");
    out
}

/// `hermes <args>`, which must fail: its error output.
async fn refused(env: &TestEnv, args: &[&str]) -> String {
    let (code, out, err) = env.hermes(args).await;
    assert_ne!(code, 0, "hermes {args:?} should fail: {out}");
    err
}

/// The word of `out` starting with `prefix`.
fn word(out: &str, prefix: &str) -> String {
    out.split_whitespace()
        .find(|w| w.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix}… in {out}"))
        .to_string()
}

/// A workspace as `hermes workspaces show --json` gives it.
async fn shown(env: &TestEnv, slug: &str) -> Value {
    serde_json::from_str(&ok(env, &["workspaces", "show", slug, "--json"]).await).unwrap()
}

/// One workspace's victor, made with the CLI as an operator would: the agent (signed with the
/// workspace's secret), a Telegram user assigned to it, and a key speaking for it.
struct Victor {
    id: AgentId,
    key: String,
}

async fn victor_of(env: &TestEnv, url: &str, workspace: &str, sender: &str) -> Victor {
    let agent = [
        "agents",
        "create",
        "victor",
        "--kind",
        "external",
        "--name",
        "Victor",
        "--webhook-url",
        url,
        "--workspace-secret",
        "--workspace",
        workspace,
        "--json",
    ];
    let created: Value = serde_json::from_str(&ok(env, &agent).await).unwrap();
    let id: AgentId = serde_json::from_value(created["agent"]["id"].clone()).unwrap();
    let user = [
        "users",
        "create",
        "--name",
        "Ana",
        "--credits",
        "5",
        "--agent",
        "victor",
        "--workspace",
        workspace,
        "--json",
    ];
    let user: Value = serde_json::from_str(&ok(env, &user).await).unwrap();
    let user = user["id"].as_str().unwrap().to_string();
    let link = [
        "channels",
        "link",
        user.as_str(),
        "--platform",
        "telegram",
        "--sender-id",
        sender,
        "--workspace",
        workspace,
    ];
    ok(env, &link).await;
    let name = format!("victor-{workspace}");
    let key = [
        "api-keys",
        "create",
        "--name",
        name.as_str(),
        "--agent",
        "victor",
        "--workspace",
        workspace,
    ];
    let key = ok(env, &key).await;
    let key = key
        .lines()
        .find_map(|l| l.strip_prefix("key: "))
        .unwrap_or_else(|| panic!("no key in {key}"))
        .to_string();
    Victor { id, key }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_6_workspaces_are_operable_and_two_victors_each_see_only_their_own() {
    let peer = peer().await;
    let env = env_with(&peer).await;

    let out = ok(
        &env,
        &[
            "workspaces",
            "create",
            "axiom",
            "--name",
            "Axiom Labs",
            "--key",
            "AXI",
            "--signing-secret",
            "--daily-tokens",
            "1000",
            "--daily-usd",
            "2.5",
        ],
    )
    .await;
    let axiom_secret = word(&out, "whsec_");
    let out = ok(
        &env,
        &[
            "workspaces",
            "create",
            "beta",
            "--name",
            "Beta",
            "--signing-secret",
        ],
    )
    .await;
    let beta_secret = word(&out, "whsec_");
    assert_ne!(axiom_secret, beta_secret);
    // A slug or key taken, and a key the contract's issue keys cannot carry, are refused.
    let err = refused(&env, &["workspaces", "create", "axiom", "--name", "Again"]).await;
    assert!(err.contains("already exists"), "{err}");
    let err = refused(
        &env,
        &[
            "workspaces",
            "create",
            "gamma",
            "--name",
            "G",
            "--key",
            "AXI",
        ],
    )
    .await;
    assert!(err.contains("has the key \"AXI\""), "{err}");
    let err = refused(
        &env,
        &[
            "workspaces",
            "create",
            "delta",
            "--name",
            "D",
            "--key",
            "ax-1",
        ],
    )
    .await;
    assert!(err.contains("--key"), "{err}");

    let axiom = shown(&env, "axiom").await;
    assert_eq!(
        (
            axiom["key"].clone(),
            axiom["signing_secret"].clone(),
            axiom["daily_tokens"].clone(),
            axiom["daily_micro_usd"].clone()
        ),
        (json!("AXI"), json!(true), json!(1000), json!(2_500_000)),
        "{axiom}"
    );
    let beta = shown(&env, "beta").await;
    assert_eq!(beta["key"], "BETA", "derived from the slug: {beta}");
    ok(
        &env,
        &[
            "workspaces",
            "set",
            "beta",
            "--key",
            "BET",
            "--daily-usd",
            "0",
            "--name",
            "Beta Co",
        ],
    )
    .await;
    let beta = shown(&env, "beta").await;
    assert_eq!(
        (
            beta["key"].clone(),
            beta["daily_micro_usd"].clone(),
            beta["name"].clone()
        ),
        (json!("BET"), json!(0), json!("Beta Co"))
    );
    let listed_all: Value =
        serde_json::from_str(&ok(&env, &["workspaces", "list", "--json"]).await).unwrap();
    let slugs: Vec<&str> = listed_all
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["slug"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, ["axiom", "beta", "default"]);
    let text = ok(&env, &["workspaces", "list"]).await;
    assert!(!text.contains("whsec_"), "secrets never list: {text}");

    // The same profile key in both, end to end.
    let url = format!("{}/agents/forge", peer.uri());
    let a = victor_of(&env, &url, "axiom", "111").await;
    let b = victor_of(&env, &url, "beta", "222").await;
    assert_ne!(a.id, b.id);
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    let run_a = message(&bus, Platform::Telegram, "111", "for axiom", Vec::new()).await;
    let run_b = message(&bus, Platform::Telegram, "222", "for beta", Vec::new()).await;

    for (run, victor, secret, slug, key) in [
        (run_a, &a, &axiom_secret, "axiom", "AXI"),
        (run_b, &b, &beta_secret, "beta", "BET"),
    ] {
        let req = wake(&peer, run).await;
        assert_signed_both_ways(&req, secret);
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        assert_eq!(body["workspace"]["slug"], slug);
        assert_eq!(body["workspace"]["key"], key);
        assert_eq!(
            body["agent"],
            json!({"id": victor.id, "profileKey": "victor"})
        );
        assert!(
            body["issue"]["key"]
                .as_str()
                .is_some_and(|k| k.starts_with(&format!("{key}-"))),
            "{body}"
        );
    }

    let mcp_a = Mcp::new(&fleet, &a.key);
    let mcp_b = mcp_a.with_key(&b.key);
    for (mcp, victor, own, other) in [(&mcp_a, &a, run_a, run_b), (&mcp_b, &b, run_b, run_a)] {
        let me = mcp.ok("agents.me", json!({})).await;
        assert_eq!(me["id"], json!(victor.id));
        listed(mcp, own).await;
        let all = mcp.ok("agent.inbox.list", json!({"status": "all"})).await;
        let ids: Vec<&Value> = all["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["runId"])
            .collect();
        assert_eq!(ids, [&json!(own)], "each key sees only its own");
        let foreign = mcp
            .refused("agent.context.bundle", json!({"issueId": other}))
            .await;
        assert_eq!(foreign["code"], "NOT_FOUND");
        let foreign = mcp
            .refused("agent.inbox.ack", json!({"runId": other}))
            .await;
        assert_eq!(foreign["code"], "NOT_FOUND");
        mcp.ok("agent.inbox.ack", json!({"runId": own})).await;
        mcp.ok(
            "chat.appendMessage",
            json!({"threadId": own, "body": "answered in my workspace"}),
        )
        .await;
    }
    for run in [run_a, run_b] {
        closed_as(&env, run, "completed").await;
    }
    eventually(Duration::from_secs(30), "both answers sent", || async {
        let sent = hermes_testkit::telegram_texts_to(&peer, "111").await.len()
            + hermes_testkit::telegram_texts_to(&peer, "222").await.len();
        (sent == 2).then_some(())
    })
    .await;
    bus.close().await;
    fleet.stop().await.unwrap();
}
