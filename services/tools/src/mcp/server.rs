//! One configured MCP server as this replica sees it: its live session (if any), the tools
//! it contributes, its breaker, and the calls made through it.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use hermes_config::McpServerSettings;
use hermes_telemetry::ToolMetrics;
use hermes_types::model::ToolSpec;
use prometheus::IntGauge;
use secrecy::ExposeSecret;
use serde_json::json;

use super::breaker::Breaker;
use super::client::{McpConnection, McpError};
use super::naming;
use super::sampling::{Complete, Sampler};
use super::sampling_policy::{RunsInFlight, SamplingGate};
use crate::approval::ApprovalRules;
use crate::registry::ToolError;
use hermes_net::redact::redact;
use hermes_types::sync;

/// What a registered name does on the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// `tools/call` of the server tool of this name.
    Tool(String),
    /// One of the resource and prompt wrappers.
    Utility(Utility),
}

/// The wrappers registered around a server's resources and prompts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Utility {
    ListResources,
    ReadResource,
    ListPrompts,
    GetPrompt,
}

/// A registered tool of this server.
#[derive(Clone, Debug)]
pub struct Registered {
    pub spec: ToolSpec,
    pub action: Action,
}

pub struct McpServer {
    pub name: String,
    pub settings: McpServerSettings,
    session: RwLock<Option<Arc<McpConnection>>>,
    tools: RwLock<Vec<Registered>>,
    breaker: Mutex<Breaker>,
    /// One refresh of the tool list at a time (a burst of `list_changed`); holds whether this replica has reported the server's tools
    /// once (the first report is made even when the list is empty, so the registry's
    /// entries of a previous run are replaced).
    pub(crate) refreshing: tokio::sync::Mutex<bool>,
    up: IntGauge,
    /// Configured secret values, removed verbatim from errors shown to the model.
    secrets: Vec<String>,
    /// Serves the server's sampling requests (absent: no model path in this process).
    pub(crate) sampler: Option<Arc<Sampler>>,
    /// The runs whose calls are in flight here, whose policies sampling applies.
    runs: Arc<RunsInFlight>,
}

impl McpServer {
    pub fn new(
        name: String,
        settings: McpServerSettings,
        metrics: &ToolMetrics,
        llm: Option<Arc<dyn Complete>>,
        approvals: Arc<ApprovalRules>,
    ) -> Self {
        let up = metrics.mcp_server_up.with_label_values(&[&name]);
        let runs = Arc::new(RunsInFlight::default());
        let sampler = llm.map(|llm| {
            let gate = SamplingGate {
                settings: settings.clone(),
                approvals,
                runs: runs.clone(),
            };
            Arc::new(Sampler::new(name.clone(), gate, llm, metrics.clone()))
        });
        let secrets = settings
            .headers
            .values()
            .chain(settings.env.values())
            .map(|s| s.expose_secret().to_owned())
            .collect();
        up.set(0);
        Self {
            name,
            settings,
            session: RwLock::new(None),
            tools: RwLock::new(Vec::new()),
            breaker: Mutex::new(Breaker::default()),
            refreshing: tokio::sync::Mutex::new(false),
            up,
            secrets,
            sampler,
            runs,
        }
    }

    /// The toolset of this server.
    pub fn toolset(&self) -> String {
        naming::toolset(&self.name)
    }

    /// The registered tools (kept while the session is down: a dead or slow server never
    /// unregisters its tools; calls fail until it is back).
    pub fn registered(&self) -> Vec<Registered> {
        sync::read(&self.tools).clone()
    }

    pub(crate) fn attach(&self, session: Arc<McpConnection>) {
        *sync::write(&self.session) = Some(session);
        sync::lock(&self.breaker).reset();
        self.up.set(1);
    }

    pub(crate) fn detach(&self) -> Option<Arc<McpConnection>> {
        self.up.set(0);
        sync::write(&self.session).take()
    }

    /// Re-read the server's tool list through `session` and apply the filters. Returns the
    /// new specs when they changed, and always the first time.
    pub(crate) async fn refresh(
        &self,
        session: &McpConnection,
    ) -> Result<Option<Vec<ToolSpec>>, McpError> {
        let mut reported = self.refreshing.lock().await;
        let remote = session.list_tools().await?;
        let caps = session.capabilities();
        let filter = &self.settings.tools;
        let toolset = self.toolset();
        let mut registered: Vec<Registered> = remote
            .into_iter()
            .filter(|t| filter.admits(&t.name))
            .map(|t| Registered {
                spec: ToolSpec {
                    name: naming::tool_name(&self.name, &t.name),
                    description: t.description,
                    parameters: t.input_schema,
                    toolset: toolset.clone(),
                },
                action: Action::Tool(t.name),
            })
            .collect();
        if caps.resources && filter.resources {
            registered.push(self.utility(Utility::ListResources));
            registered.push(self.utility(Utility::ReadResource));
        }
        if caps.prompts && filter.prompts {
            registered.push(self.utility(Utility::ListPrompts));
            registered.push(self.utility(Utility::GetPrompt));
        }
        registered.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        let mut current = sync::write(&self.tools);
        let changed = current.len() != registered.len()
            || current.iter().zip(&registered).any(|(a, b)| {
                a.spec.name != b.spec.name
                    || a.spec.parameters != b.spec.parameters
                    || a.spec.description != b.spec.description
            });
        *current = registered;
        let report = changed || !*reported;
        *reported = true;
        Ok(report.then(|| current.iter().map(|r| r.spec.clone()).collect()))
    }

    fn utility(&self, utility: Utility) -> Registered {
        let (tool, description, parameters) = match utility {
            Utility::ListResources => (
                "list_resources",
                format!("List the resources of the MCP server {}.", self.name),
                json!({"type": "object", "properties": {}}),
            ),
            Utility::ReadResource => (
                "read_resource",
                format!("Read one resource of the MCP server {} by URI.", self.name),
                json!({"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]}),
            ),
            Utility::ListPrompts => (
                "list_prompts",
                format!("List the prompts of the MCP server {}.", self.name),
                json!({"type": "object", "properties": {}}),
            ),
            Utility::GetPrompt => (
                "get_prompt",
                format!("Get one prompt of the MCP server {} by name.", self.name),
                json!({"type": "object", "properties": {
                    "name": {"type": "string"},
                    "arguments": {"type": "object", "additionalProperties": {"type": "string"}}
                }, "required": ["name"]}),
            ),
        };
        Registered {
            spec: ToolSpec {
                name: naming::tool_name(&self.name, tool),
                description,
                parameters,
                toolset: self.toolset(),
            },
            action: Action::Utility(utility),
        }
    }

    /// Run `action` with `arguments`, bounded by the server's `timeout`, through the breaker.
    pub async fn invoke(
        &self,
        action: &Action,
        arguments: &serde_json::Value,
    ) -> Result<String, ToolError> {
        let session = sync::read(&self.session).clone();
        let Some(session) = session.filter(|s| !s.is_closed()) else {
            return Err(ToolError::Failed(format!(
                "the MCP server {} is not connected right now (it is being restarted)",
                self.name
            )));
        };
        if !sync::lock(&self.breaker).admit(Instant::now()) {
            return Err(ToolError::Failed(format!(
                "the MCP server {} failed repeatedly; calls are paused for a short while",
                self.name
            )));
        }
        let timeout = self.settings.call_timeout();
        // Sampling requests the server makes meanwhile see this run's policy.
        let _in_flight = self.runs.enter();
        let call = async {
            match action {
                Action::Tool(name) => session
                    .call_tool(name, arguments)
                    .await
                    .map(|o| if o.is_error { Err(o.text) } else { Ok(o.text) }),
                Action::Utility(Utility::ListResources) => session.list_resources().await.map(Ok),
                Action::Utility(Utility::ReadResource) => {
                    let uri = arguments["uri"].as_str().unwrap_or_default();
                    session.read_resource(uri).await.map(Ok)
                }
                Action::Utility(Utility::ListPrompts) => session.list_prompts().await.map(Ok),
                Action::Utility(Utility::GetPrompt) => {
                    let name = arguments["name"].as_str().unwrap_or_default();
                    let args = arguments.get("arguments").cloned().unwrap_or_default();
                    session.get_prompt(name, &args).await.map(Ok)
                }
            }
        };
        let result = tokio::time::timeout(timeout, call).await;
        let ok = matches!(result, Ok(Ok(_)));
        sync::lock(&self.breaker).record(ok, Instant::now());
        match result {
            Ok(Ok(Ok(text))) => Ok(text),
            Ok(Ok(Err(tool_error))) => Err(ToolError::Refused(redact(&tool_error, &self.secrets))),
            Ok(Err(e)) => Err(ToolError::Failed(redact(
                &format!("MCP server {}: {e}", self.name),
                &self.secrets,
            ))),
            Err(_) => Err(ToolError::Timeout(format!(
                "the MCP server {} did not answer within {:?}",
                self.name, timeout
            ))),
        }
    }
}
