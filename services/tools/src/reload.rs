//! `hermes tools reload`: every tools replica of a namespace re-reads its configuration file
//! and reconnects its MCP servers.
//!
//! The request is a PostgreSQL `NOTIFY hermes_tools_reload` with the namespace as payload;
//! each replica keeps a `LISTEN` connection. A notification is not stored, and need not be:
//! a replica that was down reads the file when it starts, and a replica whose `LISTEN`
//! connection dropped reloads once when it is back (it may have missed a request).

use std::time::Duration;

use futures_util::StreamExt;
use hermes_db::{Client, Db, DbError};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, NoTls};
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
    let cfg = db.pg_config().clone();
    tokio::spawn(async move {
        let mut first = true;
        while !stop.is_cancelled() {
            match cfg.connect(NoTls).await {
                Ok((client, mut conn)) => {
                    let mut messages =
                        futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
                    let statement = format!("LISTEN {CHANNEL}");
                    let listen = client.batch_execute(&statement);
                    // The connection must be driven for LISTEN to complete.
                    let mut listen = std::pin::pin!(listen);
                    let ok = loop {
                        tokio::select! {
                            r = &mut listen => break r.is_ok(),
                            m = messages.next() => if m.is_none() { break false },
                        }
                    };
                    if ok {
                        if !first {
                            // Requests made while we were not listening are lost: reload once.
                            let _ = requests.try_send(());
                        }
                        first = false;
                        loop {
                            tokio::select! {
                                _ = stop.cancelled() => return,
                                m = messages.next() => match m {
                                    Some(Ok(AsyncMessage::Notification(n))) if n.payload() == ns => {
                                        let _ = requests.try_send(());
                                    }
                                    Some(Ok(_)) => {}
                                    Some(Err(e)) => {
                                        tracing::warn!(error = %e, "tools reload LISTEN connection failed");
                                        break;
                                    }
                                    None => break,
                                }
                            }
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot open the tools reload LISTEN connection")
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    });
}
