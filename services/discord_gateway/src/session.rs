//! One shard's Gateway session as a state machine, without I/O, so every rule of the
//! protocol is tested on its own: what to send after Hello (Identify, or Resume when a
//! session is held), heartbeats and their acknowledgements (a heartbeat due while the last
//! is unacknowledged is a zombied connection), and what each opcode and close asks for.
//!
//! The sequence number kept is that of the last event *handled*: a message counts only once
//! the broker confirmed it, so a Resume after a failed publish gets it replayed.

use std::time::Duration;

use hermes_channels::discord::BotId;
use url::Url;

use crate::protocol::{
    self, CloseKind, Hello, Opcode, Payload, Ready, Seq, SessionId, Shard, close_kind,
};

/// A session that can be resumed: its id and where to reconnect for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumable {
    /// READY's `session_id`.
    pub id: SessionId,
    /// READY's `resume_gateway_url`.
    pub url: Url,
}

/// What to send once Hello arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opening {
    /// A new session (op 2).
    Identify,
    /// Resume this session from this sequence number (op 6).
    Resume(SessionId, Option<Seq>),
}

/// What one payload asks of the connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Hello: heartbeat every this long, then Identify or Resume.
    Hello(Duration),
    /// The server asks for a heartbeat now (op 1).
    HeartbeatNow,
    /// A heartbeat was acknowledged (op 11).
    Ack,
    /// READY: the session is established, as this bot.
    Ready(BotId),
    /// RESUMED: the session resumed; missed events follow.
    Resumed,
    /// Another event: handle it, then call [`Session::handled`] with its sequence number.
    Dispatch { event: String, seq: Option<Seq> },
    /// Op 7: reconnect and resume.
    Reconnect,
    /// Op 9: the session is invalid; resume (true) or identify anew (false; it is forgotten).
    InvalidSession { resumable: bool },
    /// A payload of no use here (an unknown opcode, one only clients send).
    Ignored,
    /// A payload that could not be read.
    Malformed(String),
}

/// The heartbeat due while the previous one is unacknowledged: the connection is zombied.
#[derive(Debug, PartialEq, Eq)]
pub struct Zombie;

/// One shard's session, across its connections.
#[derive(Debug)]
pub struct Session {
    shard: Shard,
    resumable: Option<Resumable>,
    seq: Option<Seq>,
    awaiting_ack: bool,
    /// The bot's user (READY's), kept across resumes.
    bot: Option<BotId>,
}

impl Session {
    /// No session yet for `shard`.
    pub fn new(shard: Shard) -> Self {
        Self {
            shard,
            resumable: None,
            seq: None,
            awaiting_ack: false,
            bot: None,
        }
    }

    /// The shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// The session that can be resumed, if any.
    pub fn resumable(&self) -> Option<&Resumable> {
        self.resumable.as_ref()
    }

    /// The bot's user id, once a READY said it.
    pub fn bot(&self) -> Option<&BotId> {
        self.bot.as_ref()
    }

    /// The last sequence number handled.
    pub fn seq(&self) -> Option<Seq> {
        self.seq
    }

    /// Where to connect: the session's `resume_gateway_url` when resuming, else `gateway`;
    /// either with the version and encoding asked for. A resume URL is taken only over TLS,
    /// or in the gateway's own scheme, so the token is never sent in clear to a host READY
    /// named when the gateway itself is reached over TLS.
    pub fn connect_url(&self, gateway: &Url) -> Url {
        let resume = (self.resumable.as_ref())
            .map(|r| &r.url)
            .filter(|u| u.scheme() == "wss" || u.scheme() == gateway.scheme());
        let mut url = resume.unwrap_or(gateway).clone();
        url.set_query(Some(protocol::QUERY));
        url
    }

    /// A new connection starts: no heartbeat is outstanding on it.
    pub fn connected(&mut self) {
        self.awaiting_ack = false;
    }

    /// What to send after Hello.
    pub fn opening(&self) -> Opening {
        match &self.resumable {
            Some(r) => Opening::Resume(r.id.clone(), self.seq),
            None => Opening::Identify,
        }
    }

    /// A heartbeat is due: the sequence number to send, or [`Zombie`] when the last one was
    /// never acknowledged.
    pub fn heartbeat_due(&mut self) -> Result<Option<Seq>, Zombie> {
        if self.awaiting_ack {
            return Err(Zombie);
        }
        self.awaiting_ack = true;
        Ok(self.seq)
    }

    /// The event with sequence number `seq` is handled (for a message: the broker
    /// confirmed it): a Resume starts after it.
    pub fn handled(&mut self, seq: Option<Seq>) {
        if let Some(s) = seq {
            self.seq = Some(self.seq.map_or(s, |old| old.max(s)));
        }
    }

    /// Forget the session: the next connection identifies.
    pub fn forget(&mut self) {
        self.resumable = None;
        self.seq = None;
    }

    /// What Discord's close `code` asks for; a close that ends the session forgets it.
    pub fn on_close(&mut self, code: u16) -> CloseKind {
        let kind = close_kind(code);
        if kind != CloseKind::Resume {
            self.forget();
        }
        kind
    }

    /// Read one payload.
    pub fn on_payload(&mut self, p: &Payload) -> Step {
        match p.opcode() {
            Opcode::Hello => match serde_json::from_str::<Hello>(p.data()) {
                Ok(h) if h.heartbeat_interval > 0 => {
                    Step::Hello(Duration::from_millis(h.heartbeat_interval))
                }
                _ => Step::Malformed("a Hello without a heartbeat_interval".into()),
            },
            Opcode::Heartbeat => Step::HeartbeatNow,
            Opcode::HeartbeatAck => {
                self.awaiting_ack = false;
                Step::Ack
            }
            Opcode::Reconnect => Step::Reconnect,
            Opcode::InvalidSession => {
                let resumable = protocol::resumable(p.data()) && self.resumable.is_some();
                if !resumable {
                    self.forget();
                }
                Step::InvalidSession { resumable }
            }
            Opcode::Dispatch => self.dispatch(p),
            Opcode::Identify | Opcode::Resume | Opcode::Other(_) => Step::Ignored,
        }
    }

    fn dispatch(&mut self, p: &Payload) -> Step {
        let seq = p.s.map(Seq);
        match p.t.as_deref() {
            Some("READY") => {
                let Ok(ready) = serde_json::from_str::<Ready>(p.data()) else {
                    return Step::Malformed(
                        "a READY without session_id, resume_gateway_url or user".into(),
                    );
                };
                let (Ok(url), Some(bot)) = (
                    Url::parse(&ready.resume_gateway_url),
                    BotId::new(ready.user.id),
                ) else {
                    return Step::Malformed("a READY with a bad resume URL or user id".into());
                };
                if !matches!(url.scheme(), "ws" | "wss") {
                    return Step::Malformed("a READY whose resume URL is not ws(s)".into());
                }
                self.resumable = Some(Resumable {
                    id: SessionId(ready.session_id),
                    url,
                });
                // A new session's sequence starts again.
                self.seq = None;
                self.handled(seq);
                self.bot = Some(bot.clone());
                Step::Ready(bot)
            }
            Some("RESUMED") => {
                self.handled(seq);
                Step::Resumed
            }
            Some(event) => Step::Dispatch {
                event: event.to_owned(),
                seq,
            },
            None => Step::Malformed("a dispatch without an event name".into()),
        }
    }
}

#[cfg(test)]
mod tests;
