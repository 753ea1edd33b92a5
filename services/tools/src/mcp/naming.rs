//! How MCP tools are named in our registry: `mcp_<server>_<tool>`, with every character
//! outside `[A-Za-z0-9_]` turned into `_`, and each server's toolset `mcp-<server>`.

/// The registered name of `tool` of `server` (the seed's table: `my-api` + `query.data` →
/// `mcp_my_api_query_data`).
pub fn tool_name(server: &str, tool: &str) -> String {
    let mut name = String::with_capacity(5 + server.len() + tool.len());
    name.push_str("mcp_");
    push_sanitized(&mut name, server);
    name.push('_');
    push_sanitized(&mut name, tool);
    name
}

/// The toolset of `server`'s tools (defined in shared, where the router reads it too).
pub fn toolset(server: &str) -> String {
    hermes_config::mcp_toolset(server)
}

fn push_sanitized(out: &mut String, part: &str) {
    out.extend(part.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_seed_table() {
        assert_eq!(
            tool_name("filesystem", "read_file"),
            "mcp_filesystem_read_file"
        );
        assert_eq!(
            tool_name("github", "create-issue"),
            "mcp_github_create_issue"
        );
        assert_eq!(tool_name("my-api", "query.data"), "mcp_my_api_query_data");
        assert_eq!(tool_name("é x", "a/b"), "mcp___x_a_b");
        assert_eq!(toolset("my-api"), "mcp-my-api");
    }
}
