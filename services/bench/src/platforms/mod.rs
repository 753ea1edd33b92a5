//! The eight chat platforms as the benches see them, one file each: the platform's webhook
//! as it sends it (signed with the platform's own scheme, through the channels crate's
//! signers), and a fake of its send API on loopback that tells the bench which chat got
//! which text. `hermes bench fleet` measures one platform at a time through them; the fault
//! harness (`hermes bench faults`) spreads its load over all of them.
//!
//! Every seeded user is member `n` (a Telegram sender number) on each platform, with an id of
//! that platform's shape ([`member`]). A send the fakes see is told to the bench's [`Sink`]
//! as a chat number of the platform's own range ([`chat`]), so that one ledger serves all.

mod discord;
mod fake;
mod instagram;
mod messenger;
mod meta;
mod slack;
mod sms;
mod teams;
mod telegram;
mod whatsapp;

use std::path::Path;
use std::sync::Arc;

use hermes_types::model::Platform;

pub use telegram::SECRET as TELEGRAM_SECRET;
pub use telegram::update as telegram_update;

/// The chat platforms, in the order a mixed load takes them.
pub const CHAT: [Platform; 8] = [
    Platform::Telegram,
    Platform::Whatsapp,
    Platform::Instagram,
    Platform::Messenger,
    Platform::Slack,
    Platform::Discord,
    Platform::Teams,
    Platform::Sms,
];

/// Where the fakes tell what the fleet sent: `text` to the chat numbered `chat` ([`chat`]).
pub trait Sink: Send + Sync + 'static {
    fn sent(&self, chat: i64, text: &str);
}

/// Where `platform`'s chats sit among the ledger's chat numbers, apart from the others'
/// (Telegram's are its own chat ids).
fn chats_from(platform: Platform) -> i64 {
    match platform {
        Platform::Slack => 10_000_000,
        Platform::Sms => 20_000_000,
        Platform::Messenger => messenger::FROM,
        Platform::Teams => 40_000_000,
        Platform::Discord => 50_000_000,
        Platform::Instagram => instagram::FROM,
        Platform::Whatsapp => 70_000_000,
        _ => 0,
    }
}

/// The ledger's chat number of member `n`'s private chat on `platform`.
pub fn chat(platform: Platform, n: i64) -> i64 {
    chats_from(platform) + n
}

/// Member `n`'s id on `platform`, as `hermes channels link` links it (`None`: not a chat
/// platform).
pub fn member(platform: Platform, n: i64) -> Option<String> {
    Some(match platform {
        Platform::Telegram => n.to_string(),
        Platform::Whatsapp => whatsapp::member(n),
        Platform::Instagram => instagram::member(n),
        Platform::Messenger => messenger::member(n),
        Platform::Slack => slack::member(n),
        Platform::Discord => discord::member(n),
        Platform::Teams => teams::member(n),
        Platform::Sms => sms::member(n),
        _ => return None,
    })
}

/// The member number in an id of the shape `{prefix}{n}`.
fn member_after(prefix: &str, id: &str) -> Option<i64> {
    id.strip_prefix(prefix)?.parse().ok()
}

/// One message to send: the `i`th of its run (its platform ids derive from it, so a message
/// sent again is the same message), from member `n`, saying `text`.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    pub i: usize,
    pub n: i64,
    pub text: &'a str,
}

/// The fake platform APIs of one run, and what the webhooks need to be signed.
pub struct Fakes {
    telegram: String,
    whatsapp: String,
    instagram: String,
    messenger: String,
    slack: String,
    sms: String,
    teams: teams::Connector,
    discord: String,
}

impl Fakes {
    /// Serve every fake, each telling `sink`; Teams' signing keys go to a file in `dir`.
    pub async fn serve<S: Sink>(sink: Arc<S>, dir: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            telegram: telegram::serve(sink.clone()).await?,
            whatsapp: whatsapp::serve(sink.clone()).await?,
            instagram: instagram::serve(sink.clone()).await?,
            messenger: messenger::serve(sink.clone()).await?,
            slack: slack::serve(sink.clone()).await?,
            sms: sms::serve(sink.clone()).await?,
            teams: teams::serve(sink.clone(), &dir.join("teams-keys.json")).await?,
            discord: discord::serve(sink).await?,
        })
    }

    /// The fleet's settings for every platform, its ingest at `ingest` (`http://host:port`):
    /// secrets, tokens, the fakes' addresses, and no pacing of its own (the fakes have no
    /// limits, and what a bench measures is the fleet, not the pacing).
    pub fn env(&self, ingest: &str) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("HERMES_DELIVERY_BOT_PER_SEC", "100000".to_string()),
            ("HERMES_DELIVERY_CHAT_PER_SEC", "100000".to_string()),
            ("HERMES_SMS_PER_SEC", "100000".to_string()),
            ("HERMES_WHATSAPP_PER_SEC", "100000".to_string()),
        ];
        env.extend(telegram::env(&self.telegram));
        env.extend(whatsapp::env(&self.whatsapp));
        env.extend(instagram::env(&self.instagram));
        env.extend(messenger::env(&self.messenger));
        env.extend(slack::env(&self.slack));
        env.extend(sms::env(&self.sms, ingest));
        env.extend(self.teams.env());
        env.extend(discord::env(&self.discord));
        env
    }

    /// `message` as `platform` posts it to ingest at `base`, signed. `platform` is one of
    /// [`CHAT`]; the others, which have no webhook of a chat platform, post as Telegram.
    pub fn webhook(
        &self,
        platform: Platform,
        client: &reqwest::Client,
        base: &str,
        message: Message<'_>,
    ) -> reqwest::RequestBuilder {
        let post = |route: &str| client.post(format!("{base}/webhooks/{route}"));
        match platform {
            Platform::Whatsapp => whatsapp::webhook(post("whatsapp"), message),
            Platform::Instagram => instagram::webhook(post("instagram"), message),
            Platform::Messenger => messenger::webhook(post("messenger"), message),
            Platform::Slack => slack::webhook(post("slack"), message),
            Platform::Discord => discord::webhook(post("discord"), message),
            Platform::Teams => self.teams.webhook(post("teams"), message),
            Platform::Sms => sms::webhook(client, base, message),
            _ => telegram::webhook(post("telegram"), message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_platforms_chats_are_a_range_of_their_own() {
        let n = 900_001;
        let mut chats: Vec<i64> = CHAT.iter().map(|p| chat(*p, n)).collect();
        chats.sort_unstable();
        chats.dedup();
        assert_eq!(chats.len(), CHAT.len());
        assert!(CHAT.iter().all(|p| member(*p, n).is_some() && p.is_chat()));
        assert_eq!(member(Platform::Api, n), None);
    }
}
