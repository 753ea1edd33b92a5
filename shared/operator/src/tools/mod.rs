//! The operator tools, one file per group, and their dispatch. A new group adds its file
//! here, its variants to [`crate::catalog::Tool`], and one line per tool to [`call`].

pub mod channels;
pub mod conversations;
pub mod events;
pub mod messages;
pub mod permissions;
pub mod send;

use serde_json::Value;

use crate::Operator;
use crate::args::Args;
use crate::catalog::Tool;
use crate::error::ToolError;

/// The default page of the list tools.
pub const DEFAULT_LIST: i64 = 50;
/// The largest page of the list tools.
pub const MAX_LIST: i64 = 200;
/// The longest search text.
pub const MAX_SEARCH: usize = 200;
/// The longest id-like argument (a sender, a chat, a cursor).
pub const MAX_ID: usize = 200;

/// Run `tool` with `args` (checked against the tool's argument names first).
pub async fn call(op: &Operator, tool: Tool, args: Value) -> Result<Value, ToolError> {
    let params = tool.params();
    let known: Vec<&str> = params.iter().map(String::as_str).collect();
    let args = Args::parse(tool.name(), &known, args)?;
    match tool {
        Tool::ConversationsList => conversations::list(op, &args).await,
        Tool::ConversationGet => conversations::get(op, &args).await,
        Tool::MessagesRead => messages::read(op, &args).await,
        Tool::AttachmentsFetch => messages::attachments(op, &args).await,
        Tool::ChannelsList => channels::list(op, &args).await,
        Tool::EventsPoll => events::poll(op, &args).await,
        Tool::EventsWait => events::wait(op, &args).await,
        Tool::MessagesSend => send::send(op, &args).await,
        Tool::PermissionsListOpen => permissions::list_open(op, &args).await,
        Tool::PermissionsRespond => permissions::respond(op, &args).await,
    }
}

/// `text` as an ILIKE pattern matching it anywhere, its wildcards escaped (the statement
/// says `ESCAPE '\'`), so a search for `50%` finds "50%" and not "500".
pub fn contains_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_are_escaped() {
        assert_eq!(contains_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
        assert_eq!(contains_pattern(""), "%%");
    }
}
