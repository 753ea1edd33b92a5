//! A PostgreSQL `LISTEN` connection kept open for the life of a task.
//!
//! Notifications are not stored by PostgreSQL: whatever is sent while no connection listens is
//! lost. So besides each notification the listener reports every time it is (again) listening,
//! and says whether that is a reconnection, so a caller can resync what it may have missed
//! (the outbox relay polls, `hermes tools reload` reloads once).

use std::time::Duration;

use futures_util::StreamExt;
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::CancellationToken;

use super::Db;

/// The pause before opening the connection again after it failed or dropped.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// What a [`listen`] task reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenEvent {
    /// `LISTEN` succeeded. `resumed` is true when an earlier connection was lost, so
    /// notifications sent in between were missed.
    Listening { resumed: bool },
    /// A notification on the channel, with its payload.
    Notification(String),
}

/// Listen on `channel` (an identifier the code chooses, never user input) until `stop`,
/// reconnecting after [`RECONNECT_PAUSE`] whenever the connection fails, and hand each event to
/// `on_event`. The callback runs on the connection's task, so it must not block.
pub fn listen(
    db: &Db,
    channel: impl Into<String>,
    stop: CancellationToken,
    mut on_event: impl FnMut(ListenEvent) + Send + 'static,
) -> JoinHandle<()> {
    let cfg = db.pg_config().clone();
    let tls = db.tls();
    let channel = channel.into();
    tokio::spawn(async move {
        let statement = format!("LISTEN {channel}");
        let mut resumed = false;
        while !stop.is_cancelled() {
            match cfg.connect(tls.clone()).await {
                Ok((client, mut conn)) => {
                    let mut messages =
                        futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
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
                        on_event(ListenEvent::Listening { resumed });
                        resumed = true;
                        loop {
                            tokio::select! {
                                _ = stop.cancelled() => return,
                                m = messages.next() => match m {
                                    Some(Ok(AsyncMessage::Notification(n))) => {
                                        on_event(ListenEvent::Notification(n.payload().to_owned()));
                                    }
                                    Some(Ok(_)) => {}
                                    Some(Err(e)) => {
                                        tracing::warn!(channel, error = %e, "LISTEN connection failed");
                                        break;
                                    }
                                    None => break,
                                }
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!(channel, error = %e, "cannot open a LISTEN connection"),
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(RECONNECT_PAUSE) => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::server_from_env;
    use tokio::sync::mpsc;

    async fn next(rx: &mut mpsc::UnboundedReceiver<ListenEvent>) -> ListenEvent {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("an event within 10 s")
            .expect("the listener is running")
    }

    #[tokio::test]
    async fn notifications_arrive_and_a_lost_connection_is_reported_as_resumed() {
        let db = Db::new(&server_from_env(), 2).unwrap();
        let channel = format!("hermes_listen_test_{}", uuid::Uuid::now_v7().simple());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let task = listen(&db, channel.clone(), stop.clone(), move |e| {
            let _ = tx.send(e);
        });
        assert_eq!(
            next(&mut rx).await,
            ListenEvent::Listening { resumed: false }
        );

        let client = db.get().await.unwrap();
        client
            .execute("SELECT pg_notify($1, 'hello')", &[&channel])
            .await
            .unwrap();
        assert_eq!(
            next(&mut rx).await,
            ListenEvent::Notification("hello".into())
        );

        // Kill the listening backend: the listener must come back and say so.
        let killed = client
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE query = $1 AND pid <> pg_backend_pid()",
                &[&format!("LISTEN {channel}")],
            )
            .await
            .unwrap()
            .get::<_, i64>(0);
        assert_eq!(killed, 1);
        assert_eq!(
            next(&mut rx).await,
            ListenEvent::Listening { resumed: true }
        );

        stop.cancel();
        task.await.unwrap();
    }
}
