//! The parser on Twilio's published webhook shapes (fixtures in
//! `tests/fixtures/twilio/`, form bodies as Twilio posts them).

use hermes_types::model::MediaKind;

use super::*;
use crate::twilio::verify::form_params;

fn parsed(body: &str, help: Option<&str>) -> Received {
    parse(&form_params(body.as_bytes()), help)
}

#[test]
fn an_sms_is_one_message_from_its_number() {
    let r = parsed(include_str!("../../../tests/fixtures/twilio/sms.txt"), None);
    assert_eq!((r.messages.len(), r.statuses.len()), (1, 0));
    let e = &r.messages[0].event;
    assert_eq!(e.platform, Platform::Sms);
    assert_eq!(
        (e.sender_id.as_str(), e.chat_id.as_str()),
        ("+14155550100", "+14155550100")
    );
    assert_eq!(e.text.as_deref(), Some("Hello from Twilio 👋"));
    assert_eq!(
        e.external_message_id.as_deref(),
        Some("SM1234567890abcdef1234567890abcdef")
    );
    assert!(e.media.is_empty());
    let answer = r.answer.unwrap();
    assert_eq!(answer.content_type, TWIML);
    assert!(answer.body.ends_with("<Response/>"));
}

#[test]
fn an_mms_image_is_named_by_its_twilio_url() {
    let r = parsed(include_str!("../../../tests/fixtures/twilio/mms.txt"), None);
    let e = &r.messages[0].event;
    assert_eq!(e.text.as_deref(), Some("What is this?"));
    assert_eq!(e.media.len(), 1);
    assert_eq!(e.media[0].kind, MediaKind::Image);
    assert_eq!(e.media[0].mime_type.as_deref(), Some("image/jpeg"));
    assert!(
        e.media[0]
            .platform_id
            .as_deref()
            .unwrap()
            .starts_with("https://api.twilio.com/")
    );
    assert_eq!(
        e.media[0].url, None,
        "fetched with credentials, never as a bare URL"
    );
}

#[test]
fn a_status_callback_reports_the_send_it_names() {
    let r = parsed(
        include_str!("../../../tests/fixtures/twilio/status_undelivered.txt"),
        None,
    );
    assert!(r.messages.is_empty());
    let s = &r.statuses[0];
    assert_eq!(s.platform_message_id, "SM1234567890abcdef1234567890abcdef");
    assert_eq!(s.status, DeliveryStatus::Failed);
    assert_eq!(s.error_code, Some(30003));
    assert_eq!(s.recipient_id.as_deref(), Some("+14155550100"));
    let delivered = parsed("MessageSid=SMx&MessageStatus=delivered&To=%2B1", None);
    assert_eq!(delivered.statuses[0].status, DeliveryStatus::Delivered);
    let queued = parsed("MessageSid=SMx&MessageStatus=queued", None);
    assert_eq!(queued.statuses[0].status, DeliveryStatus::Other);
}

#[test]
fn keywords_change_consent_and_start_no_run() {
    let r = parsed(
        include_str!("../../../tests/fixtures/twilio/stop.txt"),
        None,
    );
    assert!(r.messages.is_empty());
    assert_eq!(r.skipped, vec![(Skip::Keyword, 1)]);
    assert_eq!(r.consents.len(), 1);
    assert!(r.consents[0].opted_out);
    assert_eq!(r.consents[0].sender_id, "+14155550100");
    let start = parsed("MessageSid=SM1&From=%2B1555&Body=start", None);
    assert!(!start.consents[0].opted_out);
    let help = parsed(
        "MessageSid=SM2&From=%2B1555&Body=HELP",
        Some("Hermes <bot> & co"),
    );
    assert!(help.consents.is_empty() && help.messages.is_empty());
    assert!(
        help.answer
            .unwrap()
            .body
            .ends_with("<Response><Message>Hermes &lt;bot&gt; &amp; co</Message></Response>")
    );
}

#[test]
fn anything_else_is_acknowledged_and_ignored() {
    for body in [
        "",
        "garbage",
        "From=%2B1",
        "MessageSid=SM1",
        "MessageSid=SM1&From=%2B1&NumMedia=x",
        "%ZZ=%&&==",
    ] {
        let r = parsed(body, None);
        assert!(r.messages.is_empty(), "{body}");
        assert_eq!(r.skipped, vec![(Skip::Ignored, 1)], "{body}");
    }
    let many = format!(
        "MessageSid=SM1&From=%2B1&NumMedia=99999{}",
        (0..200)
            .map(|i| format!(
                "&MediaUrl{i}=https%3A%2F%2Fapi.twilio.com%2F{i}&MediaContentType{i}=image%2Fpng"
            ))
            .collect::<String>()
    );
    let r = parsed(&many, None);
    assert_eq!(r.messages[0].event.media.len(), MAX_ATTACHMENTS);
}
