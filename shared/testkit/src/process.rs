//! The real `hermes` binary and what it runs next to it (ports, MCP servers).

use std::path::PathBuf;

/// The `hermes` binary built next to this test binary.
pub fn hermes_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("hermes");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p hermes`",
        bin.display()
    );
    bin
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `[mcp_servers.everything]`: the MCP reference server (`@modelcontextprotocol/server-everything`,
/// installed in `tests/mcp/` by `scripts/test`) over stdio, with `extra` keys.
pub fn everything_server_toml(extra: &str) -> String {
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        server.exists(),
        "{} is missing: run `npm ci` in tests/mcp",
        server.display()
    );
    format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n{extra}\n",
        server.display().to_string()
    )
}
