//! `[channels.whatsapp]`: WhatsApp's approved message templates, and which one a send
//! outside Meta's 24-hour customer-service window goes as (docs/channels.md, "WhatsApp's
//! window and templates").

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[channels.whatsapp]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WhatsappFile {
    /// Approved templates by a name of this file's own (`[channels.whatsapp.templates.<name>]`).
    pub templates: BTreeMap<String, TemplateSpec>,
    /// The template (a key of `templates`) a reply or proactive send goes as once the chat's
    /// window has closed; none: such sends are parked as `outside_window`.
    pub outside_window_template: Option<String>,
    /// What `{user_name}` becomes when the user's profile name is not known.
    pub unknown_user_name: String,
}

impl Default for WhatsappFile {
    fn default() -> Self {
        Self {
            templates: BTreeMap::new(),
            outside_window_template: None,
            unknown_user_name: "there".into(),
        }
    }
}

impl WhatsappFile {
    /// The template sends outside the window go as, if one is configured.
    pub fn outside_window(&self) -> Option<&TemplateSpec> {
        self.outside_window_template
            .as_ref()
            .and_then(|name| self.templates.get(name))
    }

    pub(crate) fn validate(&self, problems: &mut Vec<String>) {
        if let Some(name) = &self.outside_window_template
            && !self.templates.contains_key(name)
        {
            problems.push(format!(
                "channels.whatsapp: outside_window_template names {name:?}, which is not in [channels.whatsapp.templates]"
            ));
        }
        if self.unknown_user_name.trim().is_empty() {
            // Meta refuses an empty template parameter.
            problems.push("channels.whatsapp: unknown_user_name must not be empty".into());
        }
        for (key, t) in &self.templates {
            if t.name.trim().is_empty() || t.language.trim().is_empty() {
                problems.push(format!(
                    "channels.whatsapp.templates.{key}: name and language must not be empty"
                ));
            }
        }
    }
}

/// One approved template as Meta knows it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TemplateSpec {
    /// The template's name at Meta.
    pub name: String,
    /// Its language code (`en_US`, `de`).
    pub language: String,
    /// The body's parameters, in order (`{{1}}`, `{{2}}`, …).
    #[serde(default)]
    pub parameters: Vec<TemplateText>,
}

/// A template parameter: text in which `{reply}` stands for the reply's text and
/// `{user_name}` for the user's profile name; any other `{…}` is refused at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateText(Vec<Piece>);

/// A piece of a [`TemplateText`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Reply,
    UserName,
}

impl TemplateText {
    /// `s` read into its pieces.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut rest = s;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_string()));
            }
            let Some(close) = rest[open..].find('}') else {
                return Err(format!("{s:?} has an unclosed '{{'"));
            };
            pieces.push(match &rest[open + 1..open + close] {
                "reply" => Piece::Reply,
                "user_name" => Piece::UserName,
                other => {
                    return Err(format!(
                        "{s:?} names {{{other}}}; only {{reply}} and {{user_name}} are known"
                    ));
                }
            });
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_string()));
        }
        Ok(Self(pieces))
    }

    /// The parameter's text for a reply `reply` to a user named `user_name`.
    pub fn render(&self, reply: &str, user_name: &str) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.as_str(),
                Piece::Reply => reply,
                Piece::UserName => user_name,
            })
            .collect()
    }
}

impl<'de> Deserialize<'de> for TemplateText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_names_the_reply_and_the_user_and_nothing_else() {
        let t = TemplateText::parse("Hi {user_name}, {reply}!").unwrap();
        assert_eq!(
            t.render("the table is booked", "Ada"),
            "Hi Ada, the table is booked!"
        );
        assert_eq!(
            TemplateText::parse("plain").unwrap().render("x", "y"),
            "plain"
        );
        assert!(TemplateText::parse("{phone}").is_err());
        assert!(TemplateText::parse("{reply").is_err());
    }

    #[test]
    fn the_outside_window_template_must_be_defined() {
        let file: WhatsappFile = toml::from_str(
            r#"
            outside_window_template = "follow_up"
            [templates.follow_up]
            name = "hermes_follow_up"
            language = "en_US"
            parameters = ["{user_name}", "{reply}"]
            "#,
        )
        .unwrap();
        let mut problems = Vec::new();
        file.validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(file.outside_window().unwrap().name, "hermes_follow_up");
        let missing: WhatsappFile = toml::from_str(r#"outside_window_template = "nope""#).unwrap();
        missing.validate(&mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(toml::from_str::<WhatsappFile>("[templates.x]\nname = \"x\"").is_err());
    }
}
