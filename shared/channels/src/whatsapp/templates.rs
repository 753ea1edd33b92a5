//! WhatsApp's message templates
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-message-templates>):
//! outside the 24-hour customer-service window Meta takes only an approved template
//! (docs/channels.md, "WhatsApp's window and templates"). A reply sent late goes as the
//! configured template (`[channels.whatsapp] outside_window_template`), its parameters filled
//! with the reply's text and the user's name within Meta's rules for a parameter.

use hermes_config::TemplateSpec;
use serde_json::json;

/// The most characters of the reply a template parameter carries (Meta caps a template's
/// body at 1,024 characters, the template's own words included).
pub const REPLY_PARAM_CHARS: usize = 700;

/// An approved template with its body parameters filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateMessage {
    /// The template's name at Meta.
    pub name: String,
    /// Its language code.
    pub language: String,
    /// The body's parameters in order, as text.
    pub parameters: Vec<String>,
}

impl TemplateMessage {
    /// The `template` object of a message: name, language and the body's text parameters
    /// (no components when it has none).
    pub fn body(&self) -> serde_json::Value {
        let mut t = json!({
            "name": self.name,
            "language": {"code": self.language},
        });
        if !self.parameters.is_empty() {
            let params: Vec<_> = self
                .parameters
                .iter()
                .map(|p| json!({"type": "text", "text": p}))
                .collect();
            t["components"] = json!([{"type": "body", "parameters": params}]);
        }
        t
    }
}

/// `spec` with its parameters filled for a reply `reply` to `user_name`. Meta refuses a
/// parameter with a line break, a tab or more than four spaces in a row, so each is one
/// line of single spaces; the reply is cut to [`REPLY_PARAM_CHARS`].
pub fn template_message(spec: &TemplateSpec, reply: &str, user_name: &str) -> TemplateMessage {
    let reply = cut(&one_line(reply), REPLY_PARAM_CHARS);
    let user_name = one_line(user_name);
    TemplateMessage {
        name: spec.name.clone(),
        language: spec.language.clone(),
        parameters: spec
            .parameters
            .iter()
            .map(|p| one_line(&p.render(&reply, &user_name)))
            .collect(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use hermes_config::TemplateText;

    use super::*;

    fn spec(params: &[&str]) -> TemplateSpec {
        TemplateSpec {
            name: "follow_up".into(),
            language: "en_US".into(),
            parameters: params
                .iter()
                .map(|p| TemplateText::parse(p).unwrap())
                .collect(),
        }
    }

    #[test]
    fn parameters_carry_the_reply_and_the_name_on_one_line() {
        let t = template_message(
            &spec(&["{user_name}", "Re: {reply}"]),
            "Your table\n\nis booked.\tSee you     at 8.",
            "Ada\nL.",
        );
        assert_eq!(t.name, "follow_up");
        assert_eq!(t.language, "en_US");
        assert_eq!(
            t.parameters,
            ["Ada L.", "Re: Your table is booked. See you at 8."]
        );
        assert_eq!(
            t.body(),
            serde_json::json!({
                "name": "follow_up", "language": {"code": "en_US"},
                "components": [{"type": "body", "parameters": [
                    {"type": "text", "text": "Ada L."},
                    {"type": "text", "text": "Re: Your table is booked. See you at 8."}
                ]}]
            })
        );
    }

    #[test]
    fn a_long_reply_is_cut_and_a_template_without_parameters_has_no_components() {
        let t = template_message(&spec(&["{reply}"]), &"é".repeat(2000), "x");
        assert_eq!(t.parameters[0].chars().count(), REPLY_PARAM_CHARS);
        assert!(t.parameters[0].ends_with('…'));
        let bare = template_message(&spec(&[]), "hi", "x");
        assert_eq!(
            bare.body(),
            serde_json::json!({"name": "follow_up", "language": {"code": "en_US"}})
        );
    }
}
