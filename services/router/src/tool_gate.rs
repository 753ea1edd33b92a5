//! Tool gating (docs/models-and-budgets.md, step 7 of the routing pipeline): prunes the tool schemas offered to the model to the
//! toolsets the message's intent needs, and estimates the prompt tokens that saves (the
//! seed's "~2,100 tokens saved per trivial message"). The rules come from
//! `[router.tool_gate]` ([`ToolGateSettings`]): `"*"` means every toolset, an intent not
//! listed gets every toolset, and [`Intent::Trivial`] gets none whatever is listed.

use std::io;

use hermes_config::ToolGateSettings;
use hermes_types::agent::EngagementMode;
use hermes_types::intent::Intent;
use hermes_types::model::ToolSpec;

/// The toolset name that stands for every toolset.
pub const ALL_TOOLSETS: &str = "*";

/// Tokens a tool costs beyond its name, description and parameters: the wrapping object
/// and its keys (`"type": "function"`, `"name"`, `"description"`, `"parameters"` or
/// `"input_schema"`), which every provider's tool format adds around each tool.
pub const PER_TOOL_OVERHEAD_TOKENS: u64 = 8;

/// Characters per token of the estimate: the usual rule of thumb for English and JSON.
const BYTES_PER_TOKEN: u64 = 4;

/// The tools offered for one message, and what the removed ones would have cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Gated {
    /// The tools kept, in the order they were given.
    pub tools: Vec<ToolSpec>,
    /// Sum of [`schema_tokens`] over the tools removed.
    pub schema_tokens_saved: u64,
}

/// Keeps the tools whose toolset `intent` is offered under `settings` (see the module
/// documentation for the rules).
pub fn gate(intent: Intent, tools: &[ToolSpec], settings: &ToolGateSettings) -> Gated {
    match (intent, settings.intents.get(&intent)) {
        (Intent::Trivial, _) => gate_to(Some(&[]), tools),
        (_, None) => gate_to(None, tools),
        (_, Some(sets)) => gate_to(Some(sets), tools),
    }
}

/// Keeps the tools of the toolsets `sets` names (`"*"` or `None`: every tool): how an image
/// intent's configured toolsets (`[router.vision]`) gate a vision call.
pub fn gate_to(sets: Option<&[String]>, tools: &[ToolSpec]) -> Gated {
    let allowed = sets.filter(|sets| !sets.iter().any(|s| s == ALL_TOOLSETS));
    let Some(allowed) = allowed else {
        return Gated {
            tools: tools.to_vec(),
            schema_tokens_saved: 0,
        };
    };
    let mut kept = Vec::with_capacity(tools.len());
    let mut saved = 0;
    for tool in tools {
        if allowed.contains(&tool.toolset) {
            kept.push(tool.clone());
        } else {
            saved += schema_tokens(tool);
        }
    }
    Gated {
        tools: kept,
        schema_tokens_saved: saved,
    }
}

/// The gated tools a run is offered once its agent is known: only the agent's toolsets
/// when it names any (`agent_toolsets` empty: no restriction), no `local_host` toolset
/// outside [`EngagementMode::Execute`], and, under the agent's `allowlist`, only the
/// local-host tools it names (by toolset or by tool). What is not offered the tools stage
/// refuses, whatever the model asks for (docs/tools-and-mcp.md, "What a run may call").
pub fn offered_to(
    tools: Vec<ToolSpec>,
    agent_toolsets: &[String],
    mode: EngagementMode,
    local_host: &[String],
    allowlist: Option<&[String]>,
) -> Vec<ToolSpec> {
    let host_allowed = |t: &ToolSpec| {
        mode == EngagementMode::Execute
            && allowlist.is_none_or(|l| l.contains(&t.toolset) || l.contains(&t.name))
    };
    tools
        .into_iter()
        .filter(|t| agent_toolsets.is_empty() || agent_toolsets.contains(&t.toolset))
        .filter(|t| !local_host.contains(&t.toolset) || host_allowed(t))
        .collect()
}

/// Estimated prompt tokens of one tool's schema: the bytes of its name, description and
/// compact JSON parameters divided by 4, rounded up, plus [`PER_TOOL_OVERHEAD_TOKENS`].
/// Bytes rather than chars because non-ASCII text costs more tokens per char, which bytes
/// approximate better.
pub fn schema_tokens(tool: &ToolSpec) -> u64 {
    let mut json = ByteCount(0);
    // Writing a `Value` into a sink that never fails cannot fail: a `Value` has only
    // string keys and finite numbers.
    let _ = serde_json::to_writer(&mut json, &tool.parameters);
    let bytes = (tool.name.len() + tool.description.len()) as u64 + json.0;
    bytes.div_ceil(BYTES_PER_TOKEN) + PER_TOOL_OVERHEAD_TOKENS
}

/// Counts bytes written, so the schema's JSON length is known without building it.
struct ByteCount(u64);

impl io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn tool(name: &str, toolset: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: format!("Does {name} things for the user."),
            parameters: json!({
                "type": "object",
                "properties": { "query": { "type": "string", "description": "what to look for" } },
                "required": ["query"],
            }),
            toolset: toolset.into(),
        }
    }

    fn catalog() -> Vec<ToolSpec> {
        vec![
            tool("current_time", "builtin"),
            tool("venue_search", "venues"),
            tool("directions", "maps"),
            tool("web_search", "search"),
            tool("book_table", "booking"),
            tool("calorie_scan", "nutrition"),
            tool("log_workout", "fitness"),
            tool("fetch_page", "web"),
        ]
    }

    fn no_rules() -> ToolGateSettings {
        ToolGateSettings {
            intents: BTreeMap::new(),
        }
    }

    fn names(gated: &Gated) -> Vec<&str> {
        gated.tools.iter().map(|t| t.name.as_str()).collect()
    }

    fn total(tools: &[ToolSpec]) -> u64 {
        tools.iter().map(schema_tokens).sum()
    }

    #[test]
    fn trivial_gets_none_and_saves_all() {
        let tools = catalog();
        let gated = gate(Intent::Trivial, &tools, &ToolGateSettings::default());
        assert!(gated.tools.is_empty());
        assert_eq!(gated.schema_tokens_saved, total(&tools));

        // Even when the configuration lists toolsets for it.
        let settings = ToolGateSettings {
            intents: BTreeMap::from([(Intent::Trivial, vec!["*".to_string()])]),
        };
        let gated = gate(Intent::Trivial, &tools, &settings);
        assert!(gated.tools.is_empty());
        assert_eq!(gated.schema_tokens_saved, total(&tools));

        // And when it is not listed at all.
        let gated = gate(Intent::Trivial, &tools, &no_rules());
        assert!(gated.tools.is_empty());
    }

    #[test]
    fn star_keeps_all() {
        let tools = catalog();
        let gated = gate(Intent::General, &tools, &ToolGateSettings::default());
        assert_eq!(gated.tools, tools);
        assert_eq!(gated.schema_tokens_saved, 0);

        let settings = ToolGateSettings {
            intents: BTreeMap::from([(Intent::Venue, vec!["venues".into(), "*".into()])]),
        };
        assert_eq!(gate(Intent::Venue, &tools, &settings).tools, tools);
    }

    #[test]
    fn listed_intent_keeps_only_its_toolsets_in_order() {
        let tools = catalog();
        let settings = ToolGateSettings::default();
        let gated = gate(Intent::Venue, &tools, &settings);
        assert_eq!(names(&gated), ["venue_search", "directions", "web_search"]);
        let gated = gate(Intent::Booking, &tools, &settings);
        assert_eq!(
            names(&gated),
            ["current_time", "venue_search", "book_table"]
        );
        let gated = gate(Intent::Time, &tools, &settings);
        assert_eq!(names(&gated), ["current_time"]);
        let gated = gate(Intent::Fitness, &tools, &settings);
        assert_eq!(names(&gated), ["calorie_scan", "log_workout"]);
    }

    #[test]
    fn listed_with_nothing_keeps_nothing() {
        let tools = catalog();
        let settings = ToolGateSettings {
            intents: BTreeMap::from([(Intent::Search, Vec::new())]),
        };
        let gated = gate(Intent::Search, &tools, &settings);
        assert!(gated.tools.is_empty());
        assert_eq!(gated.schema_tokens_saved, total(&tools));
    }

    #[test]
    fn unlisted_intent_keeps_all() {
        let tools = catalog();
        let gated = gate(Intent::Venue, &tools, &no_rules());
        assert_eq!(gated.tools, tools);
        assert_eq!(gated.schema_tokens_saved, 0);
    }

    #[test]
    fn saved_is_the_sum_over_removed_tools() {
        let tools = catalog();
        let gated = gate(Intent::Nutrition, &tools, &ToolGateSettings::default());
        assert_eq!(names(&gated), ["calorie_scan"]);
        let removed: u64 = tools
            .iter()
            .filter(|t| t.toolset != "nutrition")
            .map(schema_tokens)
            .sum();
        assert_eq!(gated.schema_tokens_saved, removed);
        assert_eq!(
            gated.schema_tokens_saved + total(&gated.tools),
            total(&tools)
        );
    }

    #[test]
    fn schema_tokens_estimate() {
        let t = ToolSpec {
            name: "abcd".into(),          // 4 bytes
            description: "efghij".into(), // 6 bytes
            parameters: json!({"a": 1}),  // `{"a":1}`: 7 bytes
            toolset: "ignored-toolset".into(),
        };
        // 17 bytes / 4 = 4.25 → 5, plus the overhead.
        assert_eq!(schema_tokens(&t), 5 + PER_TOOL_OVERHEAD_TOKENS);

        let empty = ToolSpec {
            name: String::new(),
            description: String::new(),
            parameters: serde_json::Value::Null, // `null`: 4 bytes
            toolset: String::new(),
        };
        assert_eq!(schema_tokens(&empty), 1 + PER_TOOL_OVERHEAD_TOKENS);

        // Multi-byte text counts by bytes: "é" is 2.
        let accented = ToolSpec {
            name: "éé".into(),
            description: String::new(),
            parameters: json!({}), // 2 bytes
            toolset: String::new(),
        };
        assert_eq!(schema_tokens(&accented), 2 + PER_TOOL_OVERHEAD_TOKENS);
    }

    #[test]
    fn an_agent_and_a_restricted_mode_narrow_the_offered_tools() {
        let tools = vec![tool("a", "web"), tool("b", "files"), tool("c", "shell")];
        let names = |t: Vec<ToolSpec>| t.into_iter().map(|t| t.name).collect::<Vec<_>>();
        let local = vec!["shell".to_string()];
        assert_eq!(
            names(offered_to(
                tools.clone(),
                &[],
                EngagementMode::Execute,
                &local,
                None
            )),
            ["a", "b", "c"],
            "no agent toolsets and EXECUTE: everything gated in"
        );
        assert_eq!(
            names(offered_to(
                tools.clone(),
                &[],
                EngagementMode::Review,
                &local,
                None
            )),
            ["a", "b"],
            "local-host toolsets only in EXECUTE"
        );
        let only = ["files".to_string(), "shell".to_string()];
        assert_eq!(
            names(offered_to(
                tools.clone(),
                &only,
                EngagementMode::Execute,
                &local,
                None
            )),
            ["b", "c"]
        );
        // An allowlist narrows the local-host tools only, by tool or by toolset.
        let shell = vec![tool("d", "shell")];
        let listed = ["d".to_string()];
        let all = [tools, shell].concat();
        assert_eq!(
            names(offered_to(
                all.clone(),
                &[],
                EngagementMode::Execute,
                &local,
                Some(&listed)
            )),
            ["a", "b", "d"]
        );
        let toolset = ["shell".to_string()];
        assert_eq!(
            names(offered_to(
                all.clone(),
                &[],
                EngagementMode::Execute,
                &local,
                Some(&toolset)
            )),
            ["a", "b", "c", "d"]
        );
        assert_eq!(
            names(offered_to(
                all,
                &[],
                EngagementMode::Execute,
                &local,
                Some(&[])
            )),
            ["a", "b"],
            "an empty allowlist: no local-host tool"
        );
    }
}
