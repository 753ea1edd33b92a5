//! The Discord Gateway's wire format, as the spec writes it
//! (<https://discord.com/developers/docs/events/gateway>): the payload `{op, d, s, t}`, its
//! opcodes, the frames a client sends (Identify, Resume, Heartbeat), and the close codes
//! after which a client must not reconnect
//! (<https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes>).

use std::fmt;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The Gateway API version and encoding asked for in the URL.
pub const QUERY: &str = "v=10&encoding=json";

/// Intents asked for at Identify
/// (<https://discord.com/developers/docs/events/gateway#gateway-intents>): `GUILD_MESSAGES`
/// (1 << 9), `DIRECT_MESSAGES` (1 << 12) and the privileged `MESSAGE_CONTENT` (1 << 15).
pub const INTENTS: u64 = (1 << 9) | (1 << 12) | (1 << 15);

/// A Gateway opcode (`op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    /// 0: an event (`t`, `s`, `d`).
    Dispatch,
    /// 1: both ways; from the server, "heartbeat now".
    Heartbeat,
    /// 2: start a new session.
    Identify,
    /// 6: resume a session after a reconnect.
    Resume,
    /// 7: the server asks the client to reconnect and resume.
    Reconnect,
    /// 9: the session is invalid; `d` says whether it can be resumed.
    InvalidSession,
    /// 10: the first frame, with `heartbeat_interval`.
    Hello,
    /// 11: a heartbeat acknowledged.
    HeartbeatAck,
    /// Any other opcode (presence and voice updates, which this client never sends).
    Other(u8),
}

impl From<u8> for Opcode {
    fn from(n: u8) -> Self {
        match n {
            0 => Opcode::Dispatch,
            1 => Opcode::Heartbeat,
            2 => Opcode::Identify,
            6 => Opcode::Resume,
            7 => Opcode::Reconnect,
            9 => Opcode::InvalidSession,
            10 => Opcode::Hello,
            11 => Opcode::HeartbeatAck,
            n => Opcode::Other(n),
        }
    }
}

impl Opcode {
    /// The opcode's number on the wire.
    pub fn number(self) -> u8 {
        match self {
            Opcode::Dispatch => 0,
            Opcode::Heartbeat => 1,
            Opcode::Identify => 2,
            Opcode::Resume => 6,
            Opcode::Reconnect => 7,
            Opcode::InvalidSession => 9,
            Opcode::Hello => 10,
            Opcode::HeartbeatAck => 11,
            Opcode::Other(n) => n,
        }
    }
}

/// One shard of the bot's guilds: `[id, count]` at Identify.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shard {
    /// This shard's number, below `count` (private: [`Shard::new`] keeps it so).
    id: u32,
    /// How many shards there are.
    count: u32,
}

impl Shard {
    /// Shard `id` of `count`, if `id` is one of them.
    pub fn new(id: u32, count: u32) -> Option<Self> {
        (id < count).then_some(Self { id, count })
    }

    /// The name of the shard's lease in PostgreSQL: `discord-shard-<id>/<count>`. The count
    /// is in the name, so replicas that disagree about it never hold one shard's guilds
    /// under two names at once without it showing.
    pub fn lease_name(self) -> String {
        format!("discord-shard-{}/{}", self.id, self.count)
    }

    /// The name of the lease that says the shard's session is connected (identified or
    /// resumed): `discord-ready-<id>/<count>`. A re-shard closes the old shards once every
    /// new one's is held.
    pub fn ready_name(self) -> String {
        format!("discord-ready-{}/{}", self.id, self.count)
    }

    /// How many shards there are.
    pub fn count(self) -> u32 {
        self.count
    }

    /// The shard's Identify bucket when Discord allows `max_concurrency` Identifies per 5 s:
    /// `id % max_concurrency` (<https://discord.com/developers/docs/events/gateway#sharding-max-concurrency>).
    pub fn bucket(self, max_concurrency: u32) -> u32 {
        self.id % max_concurrency.max(1)
    }

    /// The metric label, `<id>/<count>`: a re-shard runs two counts side by side a while.
    pub fn label(self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.id, self.count)
    }
}

/// The id of a Gateway session (READY's `session_id`), needed to resume it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionId(pub String);

/// A dispatch's sequence number (`s`): what a Heartbeat and a Resume carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seq(pub u64);

/// One payload received.
#[derive(Debug, Deserialize)]
pub struct Payload {
    /// The opcode's number.
    pub op: u8,
    /// Its data, kept raw: a `MESSAGE_CREATE`'s is parsed by its own parser.
    #[serde(default)]
    pub d: Option<Box<RawValue>>,
    /// A dispatch's sequence number.
    #[serde(default)]
    pub s: Option<u64>,
    /// A dispatch's event name.
    #[serde(default)]
    pub t: Option<String>,
}

impl Payload {
    /// Reads one text frame.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The opcode.
    pub fn opcode(&self) -> Opcode {
        Opcode::from(self.op)
    }

    /// The data as JSON text (`null` when absent).
    pub fn data(&self) -> &str {
        self.d.as_deref().map_or("null", RawValue::get)
    }
}

/// Hello's data.
#[derive(Debug, Deserialize)]
pub struct Hello {
    /// Milliseconds between heartbeats.
    pub heartbeat_interval: u64,
}

/// READY's data, of what is kept.
#[derive(Debug, Deserialize)]
pub struct Ready {
    /// The session's id, for a Resume.
    pub session_id: String,
    /// Where to reconnect to resume.
    pub resume_gateway_url: String,
    /// The bot's own user.
    pub user: ReadyUser,
}

/// The bot's user in READY.
#[derive(Debug, Deserialize)]
pub struct ReadyUser {
    /// The bot's user id.
    pub id: String,
}

/// A Heartbeat (op 1) carrying the last sequence number handled (`null` before any).
pub fn heartbeat(seq: Option<Seq>) -> String {
    json!({"op": Opcode::Heartbeat.number(), "d": seq.map(|s| s.0)}).to_string()
}

/// An Identify (op 2) for `shard`, asking for [`INTENTS`]. Holds the token: never logged.
pub fn identify(token: &SecretString, shard: Shard) -> String {
    json!({
        "op": Opcode::Identify.number(),
        "d": {
            "token": token.expose_secret(),
            "intents": INTENTS,
            "shard": [shard.id, shard.count],
            "properties": {"os": std::env::consts::OS, "browser": "hermes", "device": "hermes"},
        }
    })
    .to_string()
}

/// A Resume (op 6) of `session` from `seq`. Holds the token: never logged.
pub fn resume(token: &SecretString, session: &SessionId, seq: Option<Seq>) -> String {
    json!({
        "op": Opcode::Resume.number(),
        "d": {"token": token.expose_secret(), "session_id": session.0, "seq": seq.map(|s| s.0)}
    })
    .to_string()
}

/// What a close code from Discord means for the shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseKind {
    /// Reconnect and resume the session.
    Resume,
    /// Reconnect with a new session (4007 invalid seq, 4009 session timed out).
    Identify,
    /// Never reconnect: the configuration must change (4004 authentication failed, 4010
    /// invalid shard, 4011 sharding required, 4012 invalid API version, 4013 invalid
    /// intents, 4014 disallowed intents, such as `MESSAGE_CONTENT` not enabled).
    Fatal,
}

/// What Discord's close `code` asks for.
pub fn close_kind(code: u16) -> CloseKind {
    match code {
        4004 | 4010..=4014 => CloseKind::Fatal,
        4007 | 4009 => CloseKind::Identify,
        _ => CloseKind::Resume,
    }
}

/// Why a fatal close code stops the shard, for the operator.
pub fn fatal_reason(code: u16) -> &'static str {
    match code {
        4004 => "authentication failed: DISCORD_BOT_TOKEN is wrong or revoked",
        4010 => "invalid shard: DISCORD_SHARD_COUNT does not fit the bot",
        4011 => "sharding required: the bot is in too many guilds for DISCORD_SHARD_COUNT",
        4012 => "invalid API version",
        4013 => "invalid intents",
        4014 => {
            "disallowed intents: enable the MESSAGE CONTENT intent for the bot in the Developer Portal"
        }
        _ => "closed by Discord",
    }
}

/// `d` of an Invalid Session (op 9): whether the session may be resumed.
pub fn resumable(d: &str) -> bool {
    matches!(serde_json::from_str::<Value>(d), Ok(Value::Bool(true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_identifies_in_the_bucket_of_its_id_modulo_the_concurrency() {
        let shard = |id, count| Shard::new(id, count).unwrap();
        assert_eq!(shard(5, 8).bucket(4), 1);
        assert_eq!(shard(5, 8).bucket(16), 5);
        assert_eq!(shard(5, 8).bucket(0), 0, "no concurrency is one bucket");
        assert_eq!(shard(1, 2).label(), "1/2");
        assert_eq!(shard(1, 2).ready_name(), "discord-ready-1/2");
    }

    #[test]
    fn opcodes_round_trip_and_unknown_ones_are_kept() {
        for n in [0, 1, 2, 6, 7, 9, 10, 11, 3, 8] {
            assert_eq!(Opcode::from(n).number(), n);
        }
        assert_eq!(Opcode::from(3), Opcode::Other(3));
    }

    #[test]
    fn identify_asks_for_message_intents_and_the_shard() {
        let token = SecretString::from("tok".to_string());
        let v: Value = serde_json::from_str(&identify(&token, Shard::new(1, 4).unwrap())).unwrap();
        assert_eq!(v["op"], 2);
        assert_eq!(v["d"]["intents"], 37376);
        assert_eq!(v["d"]["shard"], json!([1, 4]));
        let r: Value =
            serde_json::from_str(&resume(&token, &SessionId("abc".into()), Some(Seq(42)))).unwrap();
        assert_eq!(
            r,
            json!({"op": 6, "d": {"token": "tok", "session_id": "abc", "seq": 42}})
        );
        assert_eq!(heartbeat(None), r#"{"d":null,"op":1}"#);
    }

    #[test]
    fn close_codes_that_must_not_reconnect_are_fatal() {
        for code in [4004, 4010, 4011, 4012, 4013, 4014] {
            assert_eq!(close_kind(code), CloseKind::Fatal, "{code}");
        }
        assert_eq!(close_kind(4007), CloseKind::Identify);
        assert_eq!(close_kind(4009), CloseKind::Identify);
        for code in [1000, 1001, 1006, 4000, 4008] {
            assert_eq!(close_kind(code), CloseKind::Resume, "{code}");
        }
    }

    #[test]
    fn a_shard_is_below_its_count_and_names_its_lease() {
        assert!(Shard::new(2, 2).is_none());
        assert_eq!(Shard::new(0, 2).unwrap().lease_name(), "discord-shard-0/2");
        assert!(resumable("true") && !resumable("false") && !resumable("null"));
    }
}
