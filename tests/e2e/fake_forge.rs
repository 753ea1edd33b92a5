//! A fake Forge written from the contract's text alone (docs/agents.md, "The contract, item
//! by item"): its MCP surface at `POST /api/mcp/rpc` (JSON-RPC 2.0, Bearer-authenticated,
//! stateless streamable HTTP without a server stream) with the contract's tool names
//! (`agent.inbox.list`, `agent.inbox.ack`, `agent.context.bundle`, `agents.me`,
//! `agents.heartbeat`, `chat.appendMessage`, `chat.startDraft`, `chat.appendDraftChunk`,
//! `chat.finalizeDraft`), an inbox of AgentRuns each on an issue, and a record of every call.
//! A test may leave tools out (a Forge that lacks them), set the agent's `maxConcurrent`
//! and slow the draft calls down. Hermes's own presence calls (`agents.me`,
//! `agents.heartbeat`) come on a timer, not from a run: [`FakeForge::run_calls`] leaves them
//! out.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Every tool of the contract's agent side.
pub const CONTRACT_TOOLS: [&str; 9] = [
    "agent.inbox.list",
    "agent.inbox.ack",
    "agent.context.bundle",
    "agents.me",
    "agents.heartbeat",
    "chat.appendMessage",
    "chat.startDraft",
    "chat.appendDraftChunk",
    "chat.finalizeDraft",
];

/// One `tools/call` the Forge received.
#[derive(Clone, Debug)]
pub struct Call {
    pub tool: String,
    pub arguments: Value,
    pub authorization: Option<String>,
}

/// An AgentRun of the Forge's inbox.
#[derive(Clone, Debug)]
struct InboxRun {
    run_id: String,
    issue_id: String,
    acked: bool,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    inbox: Vec<InboxRun>,
}

/// The fake Forge.
#[derive(Clone)]
pub struct FakeForge {
    tools: Vec<&'static str>,
    state: Arc<Mutex<State>>,
    /// How long each draft call (`chat.appendDraftChunk`, `chat.finalizeDraft`) takes.
    slow_drafts: Option<Duration>,
    /// The `maxConcurrent` `agents.me` answers.
    max_concurrent: u32,
}

impl FakeForge {
    /// A Forge with every contract tool.
    pub fn new() -> Self {
        Self::with_tools(&CONTRACT_TOOLS)
    }

    /// A Forge with only `tools`.
    pub fn with_tools(tools: &[&'static str]) -> Self {
        Self {
            tools: tools.to_vec(),
            state: Arc::default(),
            slow_drafts: None,
            max_concurrent: 3,
        }
    }

    /// The same Forge, whose agent may hold `n` runs at once.
    pub fn max_concurrent(mut self, n: u32) -> Self {
        self.max_concurrent = n;
        self
    }

    /// The same Forge, whose draft chunks and finalizations each take `delay`.
    pub fn slow_drafts(mut self, delay: Duration) -> Self {
        self.slow_drafts = Some(delay);
        self
    }

    /// Put an unacknowledged AgentRun `run_id` on issue `issue_id` in the agent's inbox.
    pub fn assign(&self, run_id: &str, issue_id: &str) {
        self.state.lock().unwrap().inbox.push(InboxRun {
            run_id: run_id.into(),
            issue_id: issue_id.into(),
            acked: false,
        });
    }

    /// Every call so far, oldest first.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The calls so far but the presence ones (`agents.*`), oldest first.
    pub fn run_calls(&self) -> Vec<Call> {
        let (_, run): (Vec<Call>, Vec<Call>) = self.calls().into_iter().partition(is_presence);
        run
    }

    /// The presence calls so far (`agents.me`, `agents.heartbeat`), oldest first.
    pub fn presence(&self) -> Vec<Call> {
        self.calls().into_iter().filter(is_presence).collect()
    }

    /// The names of the calls so far but the presence ones.
    pub fn tools_called(&self) -> Vec<String> {
        self.run_calls().into_iter().map(|c| c.tool).collect()
    }

    /// Serve it; its MCP URL is `{uri}/api/mcp/rpc`.
    pub async fn serve(&self) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/api/mcp/rpc"))
            .respond_with(self.clone())
            .mount(&server)
            .await;
        // No server-initiated stream: 405, as the transport allows.
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(405))
            .mount(&server)
            .await;
        server
    }

    /// The result of `tool` called with `args` (`Err`: a tool error the Forge reports).
    fn answer(&self, tool: &str, args: &Value) -> Result<Value, String> {
        let mut state = self.state.lock().unwrap();
        let s = |k: &str| args[k].as_str().unwrap_or_default().to_string();
        match tool {
            "agent.inbox.list" => {
                let unacked = args["status"] == "unacked";
                let runs: Vec<Value> = state
                    .inbox
                    .iter()
                    .filter(|r| !unacked || !r.acked)
                    .map(|r| json!({"runId": r.run_id, "issueId": r.issue_id, "status": if r.acked {"acked"} else {"unacked"}}))
                    .collect();
                Ok(json!({ "runs": runs }))
            }
            "agent.inbox.ack" => {
                let run = state
                    .inbox
                    .iter_mut()
                    .find(|r| r.run_id == s("runId"))
                    .ok_or("RUN_NOT_FOUND")?;
                run.acked = true;
                Ok(json!({"runId": run.run_id, "acked": true}))
            }
            "agent.context.bundle" => {
                let issue = s("issueId");
                Ok(json!({
                    "issue": {"id": issue, "key": "AXI-42", "title": "Review the login page"},
                    "comments": [{"author": "bailey", "body": format!("BUNDLE-OF-{issue}: check the redirect")}],
                    "runProtocol": {"contractVersion": "2026-06-06.2", "engagementMode": "EXECUTE", "mutationAllowed": true},
                }))
            }
            "agents.me" => Ok(
                json!({"id": "agt_victor", "profileKey": "victor", "capabilities": [], "maxConcurrent": self.max_concurrent}),
            ),
            "agents.heartbeat" => Ok(json!({"ok": true, "status": args["status"]})),
            "chat.startDraft" => Ok(json!({"draftId": format!("drf_{}", s("threadId"))})),
            "chat.appendDraftChunk" => Ok(json!({"ok": true})),
            "chat.finalizeDraft" => {
                Ok(json!({"messageId": "msg_final", "draftId": args["draftId"]}))
            }
            "chat.appendMessage" => Ok(json!({"messageId": "msg_1"})),
            _ => Err("UNKNOWN_TOOL".into()),
        }
    }
}

/// Whether `call` is a presence call.
fn is_presence(call: &Call) -> bool {
    call.tool.starts_with("agents.")
}

impl Respond for FakeForge {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Ok(msg) = serde_json::from_slice::<Value>(&req.body) else {
            return ResponseTemplate::new(400);
        };
        let Some(id) = msg.get("id").cloned() else {
            // A notification (`notifications/initialized`).
            return ResponseTemplate::new(202);
        };
        let mut delay = None;
        let result = match msg["method"].as_str().unwrap_or_default() {
            "initialize" => json!({
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake-forge", "version": "1.0.0"},
            }),
            "tools/list" => json!({"tools": self.tools.iter().map(|name| json!({
                "name": name,
                "description": format!("the Forge's {name}"),
                "inputSchema": {"type": "object"},
            })).collect::<Vec<_>>()}),
            "tools/call" => {
                let tool = msg["params"]["name"].as_str().unwrap_or_default();
                let arguments = msg["params"]["arguments"].clone();
                let call = Call {
                    tool: tool.to_string(),
                    arguments: arguments.clone(),
                    authorization: req
                        .headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string),
                };
                self.state.lock().unwrap().calls.push(call);
                if tool.starts_with("chat.") && tool.contains("Draft") && tool != "chat.startDraft"
                {
                    delay = self.slow_drafts;
                }
                let known = self.tools.contains(&tool);
                match known.then(|| self.answer(tool, &arguments)) {
                    Some(Ok(v)) => {
                        json!({"content": [{"type": "text", "text": v.to_string()}], "isError": false})
                    }
                    Some(Err(code)) => {
                        json!({"content": [{"type": "text", "text": code}], "isError": true})
                    }
                    None => {
                        json!({"content": [{"type": "text", "text": "UNKNOWN_TOOL"}], "isError": true})
                    }
                }
            }
            "ping" => json!({}),
            other => {
                return ResponseTemplate::new(200).set_body_json(json!({
                    "jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("no method {other}")},
                }));
            }
        };
        let resp = ResponseTemplate::new(200)
            .set_body_json(json!({"jsonrpc": "2.0", "id": id, "result": result}));
        match delay {
            Some(d) => resp.set_delay(d),
            None => resp,
        }
    }
}
