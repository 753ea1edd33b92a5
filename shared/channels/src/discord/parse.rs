//! One interaction, as Discord POSTs it to the endpoint
//! (<https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object>):
//! a `PING` (type 1), which is answered with a `PONG`, or an `APPLICATION_COMMAND` (type 2),
//! a slash command such as `/ask question:…`, which is routed as a message from the user who
//! ran it. Other types (components, autocomplete, modals) are acknowledged without a run.

use serde::Deserialize;

use crate::decode::{ParseError, decode};
use crate::limits::short_field;

/// An interaction's type (`type`), of the ones read here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `PING`: Discord checking the endpoint.
    Ping,
    /// `APPLICATION_COMMAND`: a slash command, user or message command.
    Command,
    /// Any other type, by its number.
    Other(u8),
}

impl From<u8> for Kind {
    fn from(n: u8) -> Self {
        match n {
            1 => Kind::Ping,
            2 => Kind::Command,
            n => Kind::Other(n),
        }
    }
}

/// What one interaction asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Interaction {
    /// Answer `{"type":1}`.
    Ping,
    /// A command to run and answer by follow-up.
    Command(Box<Command>),
    /// Another type: acknowledged, not routed.
    Other(Kind),
}

/// A command someone ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// The interaction's id, unique per interaction: the dedupe key.
    pub id: String,
    /// The application's id, part of the follow-up URL.
    pub application_id: String,
    /// The interaction token, valid for 15 minutes, for the follow-ups.
    pub token: String,
    /// The user who ran it (`member.user` in a guild, `user` in a DM).
    pub user_id: String,
    /// Their username, when sent.
    pub user_name: Option<String>,
    /// The channel it was run in.
    pub channel_id: String,
    /// The guild, absent in a DM.
    pub guild_id: Option<String>,
    /// The command's name (`ask`).
    pub name: String,
    /// The text to route: its string options' values, in order, joined by a blank line;
    /// `/name` when it has none.
    pub text: String,
}

#[derive(Deserialize)]
struct Raw {
    id: String,
    application_id: String,
    #[serde(rename = "type")]
    kind: u8,
    #[serde(default)]
    token: String,
    data: Option<Data>,
    guild_id: Option<String>,
    channel_id: Option<String>,
    channel: Option<Channel>,
    member: Option<Member>,
    user: Option<User>,
}

#[derive(Deserialize)]
struct Data {
    name: String,
    #[serde(default)]
    options: Vec<Opt>,
}

/// A command option; subcommands (types 1 and 2) nest their own.
#[derive(Deserialize)]
struct Opt {
    #[serde(rename = "type")]
    kind: u8,
    value: Option<serde_json::Value>,
    #[serde(default)]
    options: Vec<Opt>,
}

/// Option type 3: a string.
const STRING_OPTION: u8 = 3;

#[derive(Deserialize)]
struct Channel {
    id: String,
}

#[derive(Deserialize)]
struct Member {
    user: Option<User>,
}

#[derive(Deserialize)]
struct User {
    id: String,
    username: Option<String>,
}

/// Reads one interaction body.
pub fn parse(body: &[u8]) -> Result<Interaction, ParseError> {
    let raw: Raw = decode(body)?;
    let command = match Kind::from(raw.kind) {
        Kind::Ping => return Ok(Interaction::Ping),
        Kind::Command => raw,
        other => return Ok(Interaction::Other(other)),
    };
    let shape = |what: &str| ParseError::Shape(format!("a command interaction without {what}"));
    let user = (command.member.and_then(|m| m.user))
        .or(command.user)
        .ok_or_else(|| shape("a user"))?;
    let channel_id = (command.channel.map(|c| c.id))
        .or(command.channel_id)
        .ok_or_else(|| shape("a channel"))?;
    let data = command.data.ok_or_else(|| shape("data"))?;
    if !token_shaped(&command.token) {
        return Err(shape("a token of URL-safe characters"));
    }
    let ids = [&command.id, &command.application_id, &user.id, &channel_id];
    if !ids
        .into_iter()
        .chain(command.guild_id.as_ref())
        .all(|id| snowflake(id))
    {
        return Err(ParseError::Shape("an id that is not a snowflake".into()));
    }
    let mut values = Vec::new();
    strings(&data.options, &mut values);
    let text = if values.is_empty() {
        format!("/{}", data.name)
    } else {
        values.join("\n\n")
    };
    Ok(Interaction::Command(Box::new(Command {
        id: command.id,
        application_id: command.application_id,
        token: command.token,
        user_id: user.id,
        user_name: short_field(user.username),
        channel_id,
        guild_id: command.guild_id,
        name: data.name,
        text,
    })))
}

/// Whether `id` is a Discord id, a snowflake: a 64-bit unsigned integer in decimal
/// (<https://discord.com/developers/docs/reference#snowflakes>). Anything else is refused
/// whole rather than cut, so that an id can never alias another.
pub(crate) fn snowflake(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 20
        && id.bytes().all(|b| b.is_ascii_digit())
        && id.parse::<u64>().is_ok()
}

/// The longest interaction token kept: Discord's are a few hundred characters.
const MAX_TOKEN_CHARS: usize = 1024;

/// Whether `token` can be an interaction token: it goes into the follow-up URL's path, so
/// only base64url's characters and `.` are taken, and a bounded length.
fn token_shaped(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_TOKEN_CHARS
        && (token.bytes()).all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The string options' values, depth first through subcommands.
fn strings(options: &[Opt], out: &mut Vec<String>) {
    for o in options {
        match (&o.value, o.kind) {
            (Some(serde_json::Value::String(s)), STRING_OPTION) => out.push(s.clone()),
            _ => strings(&o.options, out),
        }
    }
}

#[cfg(test)]
mod tests;
