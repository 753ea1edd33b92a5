//! The tools stage's policy check before a call: a tool the run was not offered never runs.

use std::sync::atomic::{AtomicUsize, Ordering};

use hermes_types::agent::EngagementMode;
use hermes_types::model::{ToolPolicy, ToolSpec};
use serde_json::json;

use super::*;
use crate::registry::{Tool, ToolFuture};

/// A tool that counts its calls, so a test sees whether it ran.
struct Counting(Arc<AtomicUsize>);

impl Tool for Counting {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "fetch_secrets".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
            toolset: "web".into(),
        }
    }

    fn call<'a>(&'a self, _arguments: &'a serde_json::Value) -> ToolFuture<'a> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok("ran".to_owned()) })
    }
}

#[tokio::test]
async fn a_registered_tool_the_run_was_not_offered_never_runs() {
    let runs = Arc::new(AtomicUsize::new(0));
    let registry = Registry::default().with(Counting(runs.clone()));
    let policy = ToolPolicy {
        engagement_mode: EngagementMode::Execute,
        tool_allowlist: None,
    };
    let call = ToolCall {
        id: "call_1".into(),
        name: "fetch_secrets".into(),
        arguments: json!({}),
        signature: None,
    };
    let nothing = Permit {
        offered: &[],
        policy: &policy,
    };
    let refused = execute(&registry, nothing, &call).await;
    assert_eq!(refused.outcome, Outcome::Refused(RefusalReason::NotOffered));
    let body: serde_json::Value = serde_json::from_str(&refused.text).unwrap();
    assert_eq!(body["refused"], true);
    assert_eq!(body["reason"], "not_offered");
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    let offered = registry.specs();
    let permit = Permit {
        offered: &offered,
        policy: &policy,
    };
    assert_eq!(execute(&registry, permit, &call).await.outcome, Outcome::Ok);
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // Unknown names stay unknown_tool only when they were offered (a registry that
    // changed under the run); a name never offered is a refusal.
    let ghost = ToolCall {
        name: "no_such_tool".into(),
        ..call
    };
    assert_eq!(
        execute(&registry, permit, &ghost).await.outcome,
        Outcome::Refused(RefusalReason::NotOffered)
    );
}
