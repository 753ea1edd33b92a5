//! The one place that speaks rmcp: connecting to a server over stdio or streamable HTTP,
//! and the requests the tools stage makes. Everything above this file sees only our types
//! (`McpConnection`, `RemoteTool`, `McpError`), so an rmcp upgrade touches this file alone.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;

use hermes_config::{McpServerSettings, McpTransportKind};
// Sampling is deprecated by SEP-2577 in newer protocol versions, but servers of the
// versions we speak still use it and the seed requires serving it.
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, GetPromptRequestParams,
    ReadResourceRequestParams, Role, SamplingCapability, ToolChoiceMode,
};
#[allow(deprecated)]
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, SamplingMessage, SamplingMessageContentBlock,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use secrecy::ExposeSecret;
use tokio::sync::mpsc;

use super::env::child_env;
use super::sampling::{Sampler, SamplingAnswer, SamplingError, SamplingRequest, ToolChoice};
use hermes_types::model::{ChatMessage, ToolCall, ToolSpec};

/// Why an MCP request failed.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("cannot start the server: {0}")]
    Spawn(String),
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    #[error("{0}")]
    Request(String),
    #[error("bad configuration: {0}")]
    Config(String),
}

/// A tool as the server describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// What the server can do besides tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub resources: bool,
    pub prompts: bool,
}

/// The answer of a tool call: its text, and whether the server flagged it as an error.
#[derive(Clone, Debug)]
pub struct CallOutcome {
    pub text: String,
    pub is_error: bool,
}

/// Receives the server's notifications and requests: `notifications/tools/list_changed`
/// becomes one message on `tools_changed` (the supervisor coalesces bursts), and
/// `sampling/createMessage` goes to the sampler when the server may sample.
struct Events {
    tools_changed: mpsc::UnboundedSender<()>,
    sampler: Option<Arc<Sampler>>,
}

#[allow(deprecated)] // sampling, see the imports
impl ClientHandler for Events {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.tools_changed.send(());
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, rmcp::ErrorData> {
        let Some(sampler) = self.sampler.as_ref().filter(|s| s.enabled()) else {
            return Err(rmcp::ErrorData::invalid_request(
                SamplingError::Disabled.to_string(),
                None,
            ));
        };
        let answer = sampler
            .sample(sampling_request(&params))
            .await
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
        Ok(sampling_result(answer))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if let Some(sampler) = self.sampler.as_ref().filter(|s| s.enabled()) {
            let mut sampling = SamplingCapability::default();
            // `sampling.tools`: the server may offer tools (docs/tools-and-mcp.md).
            if sampler.offers_tools() {
                sampling.tools = Some(serde_json::Map::new());
            }
            capabilities.sampling = Some(sampling);
        }
        let mut config = ClientConfig::default();
        config.capabilities = capabilities;
        config
    }
}

/// The `_meta` key of a `tool_use` block that carries the provider's opaque state of the call
/// (Gemini's thought signature), which the provider wants back on the next turn: servers send
/// the model's `tool_use` blocks back as they got them.
const SIGNATURE_META: &str = "hermes/signature";

/// A `sampling/createMessage` request in our terms: text as text, `tool_use` blocks as the
/// assistant's tool calls, `tool_result` blocks as tool turns, other content as JSON text.
#[allow(deprecated)] // sampling, see the imports
fn sampling_request(params: &CreateMessageRequestParams) -> SamplingRequest {
    let mut messages = Vec::new();
    for m in &params.messages {
        let role = if m.role == Role::Assistant {
            hermes_types::model::Role::Assistant
        } else {
            hermes_types::model::Role::User
        };
        let (mut texts, mut calls) = (Vec::new(), Vec::new());
        for block in m.content.iter() {
            match block {
                SamplingMessageContentBlock::Text(t) => texts.push(t.text.clone()),
                SamplingMessageContentBlock::ToolUse(u) => calls.push(ToolCall {
                    id: u.id.clone(),
                    name: u.name.clone(),
                    arguments: serde_json::Value::Object(u.input.clone()),
                    signature: u
                        .meta
                        .as_ref()
                        .and_then(|m| m.0.get(SIGNATURE_META))
                        .and_then(|s| s.as_str())
                        .map(str::to_owned),
                }),
                SamplingMessageContentBlock::ToolResult(r) => {
                    let content = serde_json::to_value(&r.content).unwrap_or_default();
                    let mut text = content_text(&content);
                    if text.is_empty()
                        && let Some(structured) = &r.structured_content
                    {
                        text = structured.to_string();
                    }
                    if r.is_error == Some(true) {
                        text = format!("error: {text}");
                    }
                    messages.push(ChatMessage::tool_result(r.tool_use_id.clone(), text));
                }
                other => texts.push(serde_json::to_value(other).unwrap_or_default().to_string()),
            }
        }
        if !texts.is_empty() || !calls.is_empty() {
            let mut message = ChatMessage::text(role, texts.join("\n"));
            if texts.is_empty() {
                message.content = None;
            }
            message.tool_calls = calls;
            messages.push(message);
        }
    }
    let hints = params
        .model_preferences
        .as_ref()
        .and_then(|p| p.hints.as_ref())
        .map(|hints| hints.iter().filter_map(|h| h.name.clone()).collect())
        .unwrap_or_default();
    let tools = params
        .tools
        .iter()
        .flatten()
        .map(|t| ToolSpec {
            name: t.name.to_string(),
            description: t.description.as_deref().unwrap_or_default().to_owned(),
            parameters: serde_json::Value::Object((*t.input_schema).clone()),
            toolset: String::new(),
        })
        .collect();
    let tool_choice = match params.tool_choice.as_ref().and_then(|c| c.mode.as_ref()) {
        Some(ToolChoiceMode::Required) => ToolChoice::Required,
        Some(ToolChoiceMode::None) => ToolChoice::None,
        _ => ToolChoice::Auto,
    };
    SamplingRequest {
        messages,
        system: params.system_prompt.clone(),
        max_tokens: params.max_tokens,
        temperature: params.temperature,
        hints,
        tools,
        tool_choice,
    }
}

/// The model's answer as a `sampling/createMessage` result: its text, then a `tool_use`
/// block per tool call (stop reason `toolUse`).
#[allow(deprecated)] // sampling, see the imports
fn sampling_result(answer: SamplingAnswer) -> CreateMessageResult {
    if answer.tool_calls.is_empty() {
        let message = SamplingMessage::assistant_text(answer.text);
        return CreateMessageResult::new(message, answer.model)
            .with_stop_reason(answer.stop_reason);
    }
    let mut blocks = Vec::new();
    if !answer.text.is_empty() {
        blocks.push(SamplingMessageContentBlock::text(answer.text));
    }
    for call in answer.tool_calls {
        let input = match call.arguments {
            serde_json::Value::Object(map) => map,
            serde_json::Value::Null => serde_json::Map::new(),
            other => serde_json::Map::from_iter([("_raw".to_owned(), other)]),
        };
        let mut block = SamplingMessageContentBlock::tool_use(call.id, call.name, input);
        if let (SamplingMessageContentBlock::ToolUse(u), Some(signature)) =
            (&mut block, call.signature)
        {
            let meta = serde_json::Map::from_iter([(SIGNATURE_META.to_owned(), signature.into())]);
            u.meta = Some(rmcp::model::MetaObject(meta));
        }
        blocks.push(block);
    }
    let message = SamplingMessage::new_multiple(Role::Assistant, blocks);
    CreateMessageResult::new(message, answer.model)
        .with_stop_reason(CreateMessageResult::STOP_REASON_TOOL_USE)
}

/// A live session with one server.
pub struct McpConnection {
    service: RunningService<RoleClient, Events>,
}

/// Connect to the server of `settings` (no deadline here: the caller bounds it), announcing
/// tool-list changes on `tools_changed` and serving sampling with `sampler`.
pub async fn connect(
    name: &str,
    settings: &McpServerSettings,
    tools_changed: mpsc::UnboundedSender<()>,
    sampler: Option<Arc<Sampler>>,
) -> Result<McpConnection, McpError> {
    let events = Events {
        tools_changed,
        sampler,
    };
    let service = match settings.transport() {
        McpTransportKind::Stdio => {
            let program = settings.command.as_deref().unwrap_or_default();
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(&settings.args)
                .env_clear()
                .envs(child_env(std::env::vars(), &settings.env))
                .kill_on_drop(true);
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| McpError::Spawn(format!("{program}: {e}")))?;
            if let Some(stderr) = stderr {
                forward_stderr(name.to_owned(), stderr);
            }
            events
                .serve(transport)
                .await
                .map_err(|e| McpError::Handshake(e.to_string()))?
        }
        McpTransportKind::Http => {
            let url = settings.url.as_deref().unwrap_or_default();
            let mut headers = HashMap::new();
            for (k, v) in &settings.headers {
                let name = http::HeaderName::try_from(k.as_str())
                    .map_err(|_| McpError::Config(format!("header name {k:?}")))?;
                let value = http::HeaderValue::try_from(v.expose_secret())
                    .map_err(|_| McpError::Config(format!("value of header {k:?}")))?;
                headers.insert(name, value);
            }
            let client = hermes_net::http::client_builder(hermes_net::http::USER_AGENT)
                .connect_timeout(settings.connect_deadline())
                .build()
                .map_err(|e| McpError::Spawn(e.to_string()))?;
            let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            events
                .serve(transport)
                .await
                .map_err(|e| McpError::Handshake(e.to_string()))?
        }
    };
    Ok(McpConnection { service })
}

/// The child's stderr as debug lines of our log (it may hold what its env held, hence not
/// above debug); read to the end so a chatty child never blocks on a full pipe.
fn forward_stderr(server: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(server, line, "MCP server stderr");
        }
    });
}

fn request_error(e: impl std::fmt::Display) -> McpError {
    McpError::Request(e.to_string())
}

impl McpConnection {
    /// What the server announced in the handshake.
    pub fn capabilities(&self) -> Capabilities {
        self.service
            .peer_info()
            .map(|info| Capabilities {
                resources: info.capabilities.resources.is_some(),
                prompts: info.capabilities.prompts.is_some(),
            })
            .unwrap_or_default()
    }

    /// Whether the session has ended (the child exited, the connection dropped).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Every tool of the server (all pages).
    pub async fn list_tools(&self) -> Result<Vec<RemoteTool>, McpError> {
        let tools = self
            .service
            .peer()
            .list_all_tools()
            .await
            .map_err(request_error)?;
        Ok(tools
            .into_iter()
            .map(|t| RemoteTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            })
            .collect())
    }

    /// Call `tool` with `arguments` (a JSON object, or null for none).
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
    ) -> Result<CallOutcome, McpError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = object(arguments)?;
        let result = self
            .service
            .peer()
            .call_tool(params)
            .await
            .map_err(request_error)?;
        let value = serde_json::to_value(&result).map_err(request_error)?;
        let mut text = content_text(&value["content"]);
        if text.is_empty()
            && let Some(structured) = value.get("structuredContent")
        {
            text = structured.to_string();
        }
        Ok(CallOutcome {
            text,
            is_error: result.is_error == Some(true),
        })
    }

    /// `resources/list` as JSON text.
    pub async fn list_resources(&self) -> Result<String, McpError> {
        let resources = self
            .service
            .peer()
            .list_all_resources()
            .await
            .map_err(request_error)?;
        serde_json::to_string(&resources).map_err(request_error)
    }

    /// `resources/read` of `uri` as JSON text.
    pub async fn read_resource(&self, uri: &str) -> Result<String, McpError> {
        let mut params = ReadResourceRequestParams::new(uri.to_owned());
        params.meta = None;
        let result = self
            .service
            .peer()
            .read_resource(params)
            .await
            .map_err(request_error)?;
        serde_json::to_string(&result.contents).map_err(request_error)
    }

    /// `prompts/list` as JSON text.
    pub async fn list_prompts(&self) -> Result<String, McpError> {
        let prompts = self
            .service
            .peer()
            .list_all_prompts()
            .await
            .map_err(request_error)?;
        serde_json::to_string(&prompts).map_err(request_error)
    }

    /// `prompts/get` of `name` with `arguments`, as JSON text of its messages.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: &serde_json::Value,
    ) -> Result<String, McpError> {
        let mut params = GetPromptRequestParams::new(name.to_owned());
        params.arguments = object(arguments)?;
        let result = self
            .service
            .peer()
            .get_prompt(params)
            .await
            .map_err(request_error)?;
        serde_json::to_string(&result.messages).map_err(request_error)
    }

    /// End the session (the child is killed).
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

fn object(
    arguments: &serde_json::Value,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>, McpError> {
    match arguments {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Object(map) => Ok(Some(map.clone())),
        other => Err(McpError::Request(format!(
            "arguments must be a JSON object, got {other}"
        ))),
    }
}

/// The text of a result's content blocks: text blocks as they are, others as JSON.
fn content_text(content: &serde_json::Value) -> String {
    let Some(blocks) = content.as_array() else {
        return String::new();
    };
    blocks
        .iter()
        .map(|b| match (b["type"].as_str(), b["text"].as_str()) {
            (Some("text"), Some(text)) => text.to_owned(),
            _ => b.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool call's provider state leaves in the `tool_use` block's `_meta` and comes back
    /// with it when the server sends the block in its next request.
    #[test]
    #[allow(deprecated)] // sampling, see the imports
    fn a_tool_calls_signature_survives_the_servers_round_trip() {
        let call = |signature: Option<&str>| ToolCall {
            id: "c1".into(),
            name: "get_weather".into(),
            arguments: serde_json::json!({"city": "Oslo"}),
            signature: signature.map(str::to_owned),
        };
        let answer = SamplingAnswer {
            tool_calls: vec![call(Some("sig-1"))],
            model: "m".into(),
            ..SamplingAnswer::default()
        };
        let result = sampling_result(answer);
        assert_eq!(result.stop_reason.as_deref(), Some("toolUse"));
        let wire = serde_json::to_value(&result).unwrap();
        assert_eq!(wire["content"][0]["_meta"]["hermes/signature"], "sig-1");
        // The server's next request: our block, then its result.
        let result_block = SamplingMessageContentBlock::tool_result(
            "c1",
            vec![rmcp::model::ContentBlock::text("sunny in Oslo")],
        );
        let params = CreateMessageRequestParams::new(
            vec![
                result.message,
                SamplingMessage::new_multiple(Role::User, vec![result_block]),
            ],
            100,
        );
        let request = sampling_request(&params);
        assert_eq!(request.messages[0].tool_calls, [call(Some("sig-1"))]);
        let tool = &request.messages[1];
        assert_eq!(tool.tool_call_id.as_deref(), Some("c1"));
        assert_eq!(tool.content.as_deref(), Some("sunny in Oslo"));
    }
}
