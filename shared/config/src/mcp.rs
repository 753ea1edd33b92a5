//! MCP servers the tools stage connects to (`[mcp_servers.<name>]` in the TOML file), with
//! the keys of the MCP seed: `command`/`args`/`env` for a stdio child process,
//! `url`/`headers` for streamable HTTP, timeouts, `enabled`, the `tools` filter and the
//! `sampling` limits.

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

/// One `[mcp_servers.<name>]` table.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSettings {
    /// Executable of a stdio server (exclusive with `url`).
    #[serde(default)]
    pub command: Option<String>,
    /// Arguments of `command`.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables given to the child on top of the safe baseline; nothing else of the tools
    /// service's environment reaches it.
    #[serde(default)]
    pub env: BTreeMap<String, SecretString>,
    /// Endpoint of a streamable-HTTP server (exclusive with `command`).
    #[serde(default)]
    pub url: Option<String>,
    /// Headers sent with every request to `url` (often a credential, hence secret).
    #[serde(default)]
    pub headers: BTreeMap<String, SecretString>,
    /// Seconds one tool call may take.
    #[serde(default = "default_timeout")]
    pub timeout: f64,
    /// Seconds the connection and the MCP handshake may take.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: f64,
    /// `false`: the server is skipped entirely, never connected.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Whether the server's tools act on the host the tools service runs on (terminal,
    /// file patching, code execution, desktop): such toolsets are disabled in REVIEW,
    /// RESEARCH and DISCUSS runs.
    #[serde(default)]
    pub local_host: bool,
    /// `true`: every tool of the server waits for an operator's approval before it runs
    /// (docs/operator-mcp.md, approvals); `tools.require_approval` names single tools.
    #[serde(default)]
    pub requires_approval: bool,
    /// Which tools and utilities are registered, and which wait for approval.
    #[serde(default)]
    pub tools: McpToolFilter,
    /// Limits of `sampling/createMessage` requests from this server.
    #[serde(default)]
    pub sampling: McpSamplingSettings,
}

fn default_timeout() -> f64 {
    120.0
}

fn default_connect_timeout() -> f64 {
    60.0
}

fn yes() -> bool {
    true
}

/// The toolset of the MCP server `server`'s tools (`mcp-<server>`).
pub fn mcp_toolset(server: &str) -> String {
    format!("mcp-{server}")
}

/// The toolsets of the servers declared `local_host`: never offered to, nor run by, a run
/// in a restricted engagement mode.
pub fn local_host_toolsets(servers: &BTreeMap<String, McpServerSettings>) -> Vec<String> {
    servers
        .iter()
        .filter(|(_, s)| s.local_host)
        .map(|(name, _)| mcp_toolset(name))
        .collect()
}

/// How a server is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpTransportKind {
    Stdio,
    Http,
}

impl McpServerSettings {
    /// Stdio or HTTP (validation has checked that exactly one of `command`/`url` is set).
    pub fn transport(&self) -> McpTransportKind {
        if self.command.is_some() {
            McpTransportKind::Stdio
        } else {
            McpTransportKind::Http
        }
    }

    /// Deadline of one tool call.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout)
    }

    /// Deadline of connecting and the handshake.
    pub fn connect_deadline(&self) -> Duration {
        Duration::from_secs_f64(self.connect_timeout)
    }

    /// Append one line per problem to `problems`.
    pub fn validate(&self, name: &str, problems: &mut Vec<String>) {
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => problems.push(format!(
                "mcp_servers.{name}: set either command (stdio) or url (HTTP), not both"
            )),
            (None, None) => problems.push(format!(
                "mcp_servers.{name}: needs command (stdio) or url (HTTP)"
            )),
            (Some(c), None) if c.trim().is_empty() => {
                problems.push(format!("mcp_servers.{name}.command is empty"))
            }
            (None, Some(u)) => match url::Url::parse(u) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
                _ => problems.push(format!(
                    "mcp_servers.{name}.url must be an http(s) URL, got {u:?}"
                )),
            },
            _ => {}
        }
        if self.command.is_some() && !self.headers.is_empty() {
            problems.push(format!(
                "mcp_servers.{name}.headers only applies to HTTP servers"
            ));
        }
        if self.url.is_some() && (!self.env.is_empty() || !self.args.is_empty()) {
            problems.push(format!(
                "mcp_servers.{name}: env and args only apply to stdio servers"
            ));
        }
        for (key, value) in [
            ("timeout", self.timeout),
            ("connect_timeout", self.connect_timeout),
            ("sampling.timeout", self.sampling.timeout),
        ] {
            if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
                problems.push(format!(
                    "mcp_servers.{name}.{key} must be seconds above 0 (at most a day)"
                ));
            }
        }
        for tool in &self.tools.require_approval {
            if !self.tools.admits(tool) {
                problems.push(format!(
                    "mcp_servers.{name}.tools.require_approval names {tool:?}, which the tools filter does not register"
                ));
            }
        }
        if self.sampling.max_tokens_cap == 0 {
            problems.push(format!(
                "mcp_servers.{name}.sampling.max_tokens_cap must be above 0"
            ));
        }
        if let Some(model) = &self.sampling.model
            && !self.sampling.allowed_models.is_empty()
            && !self.sampling.allowed_models.contains(model)
        {
            problems.push(format!(
                "mcp_servers.{name}.sampling.model {model:?} is not in allowed_models"
            ));
        }
    }
}

/// `[mcp_servers.<name>.tools]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpToolFilter {
    /// Only these server tools are registered (wins over `exclude`).
    pub include: Option<Vec<String>>,
    /// These server tools are not registered (ignored when `include` is set).
    pub exclude: Vec<String>,
    /// `list_resources`/`read_resource` when the server supports resources.
    pub resources: bool,
    /// `list_prompts`/`get_prompt` when the server supports prompts.
    pub prompts: bool,
    /// These server tools (by the server's own names) wait for an operator's approval.
    pub require_approval: Vec<String>,
}

impl Default for McpToolFilter {
    fn default() -> Self {
        Self {
            include: None,
            exclude: Vec::new(),
            resources: true,
            prompts: true,
            require_approval: Vec::new(),
        }
    }
}

impl McpToolFilter {
    /// Whether the server tool `tool` is registered: `include` wins over `exclude`.
    pub fn admits(&self, tool: &str) -> bool {
        match &self.include {
            Some(include) => include.iter().any(|t| t == tool),
            None => !self.exclude.iter().any(|t| t == tool),
        }
    }
}

/// Level of the audit line written for each sampling request.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AuditLevel {
    Debug,
    #[default]
    Info,
    Warning,
}

/// `[mcp_servers.<name>.sampling]`: what a server may ask of our models.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpSamplingSettings {
    /// Serve `sampling/createMessage` at all.
    pub enabled: bool,
    /// Logical model (from `[models]`) used instead of what the server hints.
    pub model: Option<String>,
    /// Upper bound of `maxTokens` of one request.
    pub max_tokens_cap: u32,
    /// Seconds one request may take.
    pub timeout: f64,
    /// Requests per sliding minute.
    pub max_rpm: u32,
    /// Tool-use answers in a row a server's sampling loop may get; the next one is refused
    /// (docs/tools-and-mcp.md, "Tools in sampling"). 0: no tools in sampling, and no
    /// `sampling.tools` capability.
    pub max_tool_rounds: u32,
    /// Model names the server may request; empty: any configured model.
    pub allowed_models: Vec<String>,
    /// Level of the audit log line of each request.
    pub log_level: AuditLevel,
}

impl Default for McpSamplingSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            model: None,
            max_tokens_cap: 4096,
            timeout: 30.0,
            max_rpm: 10,
            max_tool_rounds: 5,
            allowed_models: Vec::new(),
            log_level: AuditLevel::Info,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<BTreeMap<String, McpServerSettings>, toml::de::Error> {
        #[derive(Deserialize)]
        struct File {
            mcp_servers: BTreeMap<String, McpServerSettings>,
        }
        toml::from_str::<File>(toml_text).map(|f| f.mcp_servers)
    }

    #[test]
    fn reads_the_seed_keys_and_defaults() {
        let servers = parse(
            r#"
            [mcp_servers.github]
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-github"]
            env = { GITHUB_PERSONAL_ACCESS_TOKEN = "ghp_x" }
            tools = { include = ["create_issue"], exclude = ["create_issue"], prompts = false, require_approval = ["create_issue"] }

            [mcp_servers.stripe]
            url = "https://mcp.stripe.com"
            headers = { Authorization = "Bearer x" }
            timeout = 5
            connect_timeout = 2.5
            sampling = { enabled = false, max_rpm = 3, log_level = "warning" }
            requires_approval = true
            "#,
        )
        .unwrap();
        let gh = &servers["github"];
        assert_eq!(gh.transport(), McpTransportKind::Stdio);
        assert!(gh.tools.admits("create_issue"), "include wins over exclude");
        assert!(!gh.tools.admits("list_issues"));
        assert!(!gh.tools.prompts && gh.tools.resources);
        assert_eq!(gh.tools.require_approval, ["create_issue"]);
        assert!(!gh.requires_approval);
        assert_eq!(gh.call_timeout(), Duration::from_secs(120));
        let st = &servers["stripe"];
        assert_eq!(st.transport(), McpTransportKind::Http);
        assert_eq!(st.connect_deadline(), Duration::from_millis(2500));
        assert!(!st.sampling.enabled);
        assert!(st.requires_approval);
        assert_eq!(st.sampling.max_rpm, 3);
        assert_eq!(st.sampling.max_tokens_cap, 4096);
        assert_eq!(st.sampling.max_tool_rounds, 5);
        assert_eq!(st.sampling.log_level, AuditLevel::Warning);
        let mut problems = Vec::new();
        gh.validate("github", &mut problems);
        st.validate("stripe", &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn refuses_unknown_keys_and_bad_shapes() {
        assert!(parse("[mcp_servers.a]\ncommand = \"x\"\ncomand = \"y\"\n").is_err());
        assert!(parse("[mcp_servers.a]\ncommand = \"x\"\ntools = { inclde = [] }\n").is_err());
        let servers = parse(
            "[mcp_servers.both]\ncommand = \"x\"\nurl = \"http://h\"\n\
             [mcp_servers.none]\ntimeout = 0\n\
             [mcp_servers.ftp]\nurl = \"ftp://h\"\n\
             [mcp_servers.gated]\ncommand = \"x\"\ntools = { exclude = [\"rm\"], require_approval = [\"rm\"] }\n",
        )
        .unwrap();
        let mut problems = Vec::new();
        for (name, s) in &servers {
            s.validate(name, &mut problems);
        }
        let all = problems.join("\n");
        assert!(all.contains("mcp_servers.both: set either"), "{all}");
        assert!(all.contains("mcp_servers.none: needs command"), "{all}");
        assert!(all.contains("mcp_servers.none.timeout"), "{all}");
        assert!(all.contains("mcp_servers.ftp.url"), "{all}");
        assert!(
            all.contains("mcp_servers.gated.tools.require_approval names \"rm\""),
            "{all}"
        );
    }
}
