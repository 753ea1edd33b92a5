//! `hermes tools reload`: every tools replica of a namespace re-reads its configuration file
//! and reconnects its MCP servers.
//!
//! The request is a PostgreSQL `NOTIFY hermes_tools_reload` with the namespace as payload;
//! each replica keeps a `LISTEN` connection. A notification is not stored, and need not be:
//! a replica that was down reads the file when it starts, and a replica whose `LISTEN`
//! connection dropped reloads once when it is back (it may have missed a request).

use hermes_db::{Client, Db, DbError, ListenEvent};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The notification channel.
pub const CHANNEL: &str = "hermes_tools_reload";

/// Ask every tools replica of namespace `ns` to reload.
pub async fn request(client: &Client, ns: &str) -> Result<(), DbError> {
    client
        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &ns])
        .await?;
    Ok(())
}

/// Listen for reload requests of namespace `ns` until `stop`; each is one message on
/// `requests`.
pub fn spawn_listener(db: &Db, ns: String, requests: mpsc::Sender<()>, stop: CancellationToken) {
    hermes_db::listen(db, CHANNEL, stop, move |event| match event {
        // Requests made while we were not listening are lost: reload once.
        ListenEvent::Listening { resumed: true } => {
            let _ = requests.try_send(());
        }
        ListenEvent::Notification(payload) if payload == ns => {
            let _ = requests.try_send(());
        }
        _ => {}
    });
}
