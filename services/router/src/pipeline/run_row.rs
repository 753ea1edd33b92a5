//! The run row a message creates, and what is written with it: the one place a `NewRun` is
//! built, and the WhatsApp window a person's message opens (docs/channels.md, "WhatsApp's
//! window and templates").

use hermes_db::{Transaction, messenger_windows, runs, whatsapp_windows};
use hermes_runtime::stage::StageError;
use hermes_types::envelope::Envelope;
use hermes_types::model::{Inbound, Platform, Tier};

use crate::Router;

/// The run row of a message as first written; the one place a `NewRun` is built.
pub(crate) fn new_run<'a>(
    env: &'a Envelope,
    inbound: &'a Inbound,
    tier: Tier,
    input_text: Option<&'a str>,
) -> runs::NewRun<'a> {
    let event = &inbound.event;
    runs::NewRun {
        id: env.run_id,
        platform: event.platform,
        sender_id: &event.sender_id,
        chat_id: &event.chat_id,
        external_message_id: event.external_message_id.as_deref(),
        tier,
        input_text,
        metadata: event.metadata.as_ref(),
        api_key_id: inbound.api_key_id,
        traceparent: env.traceparent.as_ref().map(|t| t.as_str()),
    }
}

/// The 24-hour windows a person's message opens (or extends), recorded with the run it
/// creates: delivery sends free text only inside them (docs/channels.md, "WhatsApp's window
/// and templates", "Facebook Messenger"). Also what proxy mode records, since the edge's
/// own delivery sends the answer.
pub(crate) async fn open_windows(
    inbound: &Inbound,
    tx: &Transaction<'_>,
) -> Result<(), StageError> {
    open_whatsapp_window(inbound, tx).await?;
    open_messenger_window(inbound, tx).await
}

/// A person's WhatsApp message opens (or extends) their chat's 24-hour window. A job's run
/// is not the person writing.
async fn open_whatsapp_window(inbound: &Inbound, tx: &Transaction<'_>) -> Result<(), StageError> {
    let event = &inbound.event;
    if event.platform != Platform::Whatsapp || inbound.user_message_id().is_none() {
        return Ok(());
    }
    whatsapp_windows::record(
        tx,
        &event.chat_id,
        event.received_at,
        event.sender_name.as_deref(),
    )
    .await?;
    Ok(())
}

/// A person's Messenger message opens (or extends) the 24-hour window in which replies go
/// as `RESPONSE`.
async fn open_messenger_window(inbound: &Inbound, tx: &Transaction<'_>) -> Result<(), StageError> {
    let event = &inbound.event;
    if event.platform != Platform::Messenger || inbound.user_message_id().is_none() {
        return Ok(());
    }
    messenger_windows::record(tx, &event.chat_id, event.received_at).await?;
    Ok(())
}

impl Router {
    /// Create the run row; false when it exists already (a redelivery, or a duplicate
    /// webhook that slipped past ingest's fast check).
    pub(super) async fn create_run(
        &self,
        env: &Envelope,
        inbound: &Inbound,
        tier: Tier,
        input_text: Option<&str>,
        tx: &Transaction<'_>,
    ) -> Result<bool, StageError> {
        let created = runs::create(tx, &new_run(env, inbound, tier, input_text)).await?;
        if !created {
            tracing::info!("run already exists for this message; nothing to route");
        }
        Ok(created)
    }
}
