//! Step 6, the messages: the user's turn from a normalized event (text, caption, image
//! blocks, or a chat platform's photos as references the llm stage fetches), and the API
//! caller's own conversation.

use hermes_types::intent::{ImageIntent, Intent};
use hermes_types::model::{
    ChatMessage, ImageRef, Inbound, MediaKind, MediaRef, MessageEvent, Role,
};

/// The text of the user's turn: the message text or caption, with a note for each
/// attachment the model cannot see (documents, voice, locations without text).
pub fn user_text(event: &MessageEvent) -> String {
    let mut text = event.text.clone().unwrap_or_default();
    for media in event.media.iter().filter(|m| !is_visible_image(m)) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!("[{:?} attached]", media.kind).to_lowercase());
    }
    text
}

/// An image the model can be shown: one with a URL, or a chat platform's file id.
fn is_visible_image(m: &hermes_types::model::Media) -> bool {
    m.kind == MediaKind::Image && (m.url.is_some() || m.platform_id.is_some())
}

/// Does the message carry an image the model can be shown?
pub fn has_image(event: &MessageEvent) -> bool {
    event.media.iter().any(is_visible_image)
}

/// The toolsets an image intent is gated like.
pub fn intent_of_image(i: ImageIntent) -> Intent {
    match i {
        ImageIntent::CalorieScan => Intent::Nutrition,
        ImageIntent::DupeSearch => Intent::Search,
        ImageIntent::General => Intent::General,
    }
}

/// A chat platform's photos, as references for the llm stage (docs/channels.md, media):
/// their bytes are fetched with the platform's credentials right before the model call.
pub fn platform_images(event: &MessageEvent) -> Vec<MediaRef> {
    if !event.platform.is_chat() {
        return Vec::new();
    }
    event
        .media
        .iter()
        .filter(|m| is_visible_image(m))
        .map(|m| MediaRef {
            platform: event.platform,
            media: m.clone(),
        })
        .collect()
}

/// The user's turn, with the images of a caller's URLs as image blocks (a chat
/// platform's photos are [`platform_images`] instead).
pub fn user_turn(event: &MessageEvent, text: &str) -> ChatMessage {
    let mut turn = ChatMessage::text(Role::User, text);
    if event.platform.is_chat() {
        return turn;
    }
    turn.images = event
        .media
        .iter()
        .filter(|m| is_visible_image(m))
        .filter_map(|m| {
            Some(ImageRef {
                url: m.url.clone()?,
                mime_type: m.mime_type.clone(),
            })
        })
        .collect();
    turn
}

/// The model's conversation for a routed message: the system blocks, then the session's
/// history, then the user's turn.
pub fn conversation(
    system: Vec<String>,
    history: Vec<ChatMessage>,
    user_turn: ChatMessage,
) -> Vec<ChatMessage> {
    let mut messages = Vec::with_capacity(history.len() + system.len() + 1);
    messages.extend(
        system
            .into_iter()
            .map(|block| ChatMessage::text(Role::System, block)),
    );
    messages.extend(history);
    messages.push(user_turn);
    messages
}

/// The turns of an API caller: its own conversation, or the one message as a user turn.
pub fn api_turns(inbound: &Inbound) -> Vec<ChatMessage> {
    if !inbound.conversation.is_empty() {
        return inbound.conversation.clone();
    }
    vec![user_turn(&inbound.event, &user_text(&inbound.event))]
}

/// An API conversation under the operator's core prompt (`[api] core_prompt`): the prompt
/// comes first, as a system turn, and the caller's own system turns (or the responses API's
/// `instructions`) follow it, adding to it rather than replacing it (docs/api.md).
pub fn under_core_prompt(core_prompt: Option<&str>, turns: Vec<ChatMessage>) -> Vec<ChatMessage> {
    match core_prompt {
        Some(core) => {
            let mut out = Vec::with_capacity(turns.len() + 1);
            out.push(ChatMessage::text(Role::System, core));
            out.extend(turns);
            out
        }
        None => turns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_types::model::{Media, Platform};

    fn event(text: Option<&str>, media: Vec<Media>) -> MessageEvent {
        serde_json::from_value(serde_json::json!({
            "platform": "rest", "sender_id": "1", "chat_id": "1",
            "received_at": "2026-11-22T00:00:00Z",
        }))
        .map(|mut e: MessageEvent| {
            e.text = text.map(str::to_string);
            e.media = media;
            e
        })
        .unwrap()
    }

    fn media(kind: MediaKind, url: Option<&str>) -> Media {
        Media {
            kind,
            platform_id: None,
            url: url.map(str::to_string),
            mime_type: Some("image/jpeg".into()),
        }
    }

    #[test]
    fn images_become_blocks_and_other_media_notes() {
        let e = event(
            Some("how many calories"),
            vec![
                media(MediaKind::Image, Some("https://x/meal.jpg")),
                media(MediaKind::Document, Some("https://x/menu.pdf")),
            ],
        );
        assert_eq!(e.platform, Platform::Rest);
        assert!(has_image(&e));
        assert!(platform_images(&e).is_empty());
        let text = user_text(&e);
        assert_eq!(text, "how many calories\n[document attached]");
        let turn = user_turn(&e, &text);
        assert_eq!(turn.images.len(), 1);
        assert_eq!(turn.images[0].url, "https://x/meal.jpg");
    }

    #[test]
    fn an_image_without_a_url_is_a_note_not_a_block() {
        let e = event(None, vec![media(MediaKind::Image, None)]);
        assert!(!has_image(&e));
        assert_eq!(user_text(&e), "[image attached]");
    }

    #[test]
    fn a_chat_platforms_photo_is_a_reference_not_a_block() {
        let mut e = event(
            Some("how many calories?"),
            vec![media(MediaKind::Image, None)],
        );
        e.platform = Platform::Telegram;
        e.media[0].platform_id = Some("AgACAgQAAxkBAAIB".into());
        assert!(has_image(&e));
        assert!(user_turn(&e, "how many calories?").images.is_empty());
        let refs = platform_images(&e);
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].platform, Platform::Telegram);
        assert_eq!(
            refs[0].media.platform_id.as_deref(),
            Some("AgACAgQAAxkBAAIB")
        );
    }

    #[test]
    fn the_conversation_is_system_then_history_then_the_users_turn() {
        let history = vec![
            ChatMessage::text(Role::User, "earlier"),
            ChatMessage::text(Role::Assistant, "reply"),
        ];
        let turn = ChatMessage::text(Role::User, "now");
        let all = conversation(vec!["persona".into(), "base".into()], history, turn);
        let roles: Vec<Role> = all.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::System,
                Role::User,
                Role::Assistant,
                Role::User
            ]
        );
        assert_eq!(all[0].content.as_deref(), Some("persona"));
        assert_eq!(all[4].content.as_deref(), Some("now"));
    }

    #[test]
    fn the_core_prompt_comes_before_the_callers_system_turns() {
        let turns = vec![
            ChatMessage::text(Role::System, "be brief"),
            ChatMessage::text(Role::User, "hi"),
        ];
        let out = under_core_prompt(Some("You are Hermes."), turns.clone());
        assert_eq!(out[0], ChatMessage::text(Role::System, "You are Hermes."));
        assert_eq!(&out[1..], &turns[..]);
        assert_eq!(under_core_prompt(None, turns.clone()), turns);
    }
}
