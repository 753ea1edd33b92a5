//! The settings of SMS through Twilio and of Facebook Messenger that come from the
//! environment (docs/channels.md, "SMS through Twilio" and "Facebook Messenger"): who sends,
//! from where, and what verifies their webhooks. Their behaviour is `[channels.sms]` and
//! `[channels.messenger]` of the file.

use secrecy::SecretString;
use url::Url;

use crate::env::Reader;
use crate::env::{messenger, sms};

/// Where SMS replies are sent from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TwilioFrom {
    /// A Twilio number (`From`, E.164).
    Number(String),
    /// A Messaging Service (`MessagingServiceSid`), which picks the number.
    MessagingService(String),
}

impl TwilioFrom {
    /// The name of the rate gate's bucket: the number or the service, shared by every replica
    /// sending from it.
    pub fn as_str(&self) -> &str {
        match self {
            TwilioFrom::Number(n) | TwilioFrom::MessagingService(n) => n,
        }
    }
}

/// Twilio's Messages API.
#[derive(Clone, Debug)]
pub struct SmsSender {
    /// The account (`AC…`): the path of the API and the user of its basic auth.
    pub account_sid: String,
    /// The auth token: the password of the basic auth.
    pub auth_token: SecretString,
    pub from: TwilioFrom,
    pub base_url: Url,
    /// Where Twilio reports each message's status: the webhook's public URL.
    pub status_callback: Option<Url>,
    /// Segments per second from one number (`HERMES_SMS_PER_SEC`).
    pub per_sec: f64,
}

/// Facebook Messenger's Send API.
#[derive(Clone, Debug)]
pub struct MessengerSender {
    pub page_access_token: SecretString,
    pub base_url: Url,
}

/// What verifies Twilio's webhooks: the auth token and the public URL it signs with.
#[derive(Clone, Debug, Default)]
pub struct TwilioWebhook {
    pub auth_token: Option<SecretString>,
    pub public_url: Option<Url>,
}

/// What verifies Messenger's webhooks: a Meta app's secret and verify token.
#[derive(Clone, Debug, Default)]
pub struct MessengerWebhook {
    pub app_secret: Option<SecretString>,
    pub verify_token: Option<SecretString>,
}

/// Twilio's webhook secrets (ingest).
pub(crate) fn read_twilio_webhook(r: &mut Reader<'_>) -> TwilioWebhook {
    TwilioWebhook {
        auth_token: r.get(&sms::TWILIO_AUTH_TOKEN),
        public_url: r.get(&sms::TWILIO_WEBHOOK_URL),
    }
}

/// Messenger's webhook secrets (ingest).
pub(crate) fn read_messenger_webhook(r: &mut Reader<'_>) -> MessengerWebhook {
    MessengerWebhook {
        app_secret: r.get(&messenger::MESSENGER_APP_SECRET),
        verify_token: r.get(&messenger::MESSENGER_VERIFY_TOKEN),
    }
}

/// The SMS sender, when its account, token and a sender are set; a half-configured one is a
/// problem, not a silently parked channel.
pub(crate) fn read_sms_sender(r: &mut Reader<'_>) -> Option<SmsSender> {
    let sid = r.get(&sms::TWILIO_ACCOUNT_SID);
    let number = r.get(&sms::TWILIO_FROM_NUMBER);
    let service = r.get(&sms::TWILIO_MESSAGING_SERVICE_SID);
    let per_sec = r.get(&sms::HERMES_SMS_PER_SEC);
    let account_sid = sid?;
    let Some(auth_token) = r.get(&sms::TWILIO_AUTH_TOKEN) else {
        r.problem("TWILIO_ACCOUNT_SID is set without TWILIO_AUTH_TOKEN");
        return None;
    };
    let from = match (number, service) {
        (Some(n), None) => TwilioFrom::Number(n),
        (None, Some(s)) => TwilioFrom::MessagingService(s),
        (Some(_), Some(_)) => {
            r.problem("set one of TWILIO_FROM_NUMBER and TWILIO_MESSAGING_SERVICE_SID, not both");
            return None;
        }
        (None, None) => {
            r.problem(
                "TWILIO_ACCOUNT_SID needs TWILIO_FROM_NUMBER or TWILIO_MESSAGING_SERVICE_SID to send from",
            );
            return None;
        }
    };
    Some(SmsSender {
        account_sid,
        auth_token,
        from,
        base_url: r.get(&sms::TWILIO_API_BASE_URL)?,
        status_callback: r.get(&sms::TWILIO_WEBHOOK_URL),
        per_sec: per_sec?,
    })
}

/// The Messenger sender, when the Page's token is set.
pub(crate) fn read_messenger_sender(r: &mut Reader<'_>) -> Option<MessengerSender> {
    let page_access_token = r.get(&messenger::MESSENGER_PAGE_ACCESS_TOKEN)?;
    Some(MessengerSender {
        page_access_token,
        base_url: r.get(&messenger::MESSENGER_API_BASE_URL)?,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::{Config, TwilioFrom};

    fn load(vars: &[(&str, &str)]) -> Result<Config, String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(&move |k| map.get(k).cloned(), None).map_err(|e| e.to_string())
    }

    #[test]
    fn sms_sends_need_the_account_the_token_and_one_sender() {
        let c = load(&[
            ("TWILIO_ACCOUNT_SID", "AC1"),
            ("TWILIO_AUTH_TOKEN", "t"),
            ("TWILIO_MESSAGING_SERVICE_SID", "MG1"),
        ])
        .unwrap();
        assert!(c.delivery.configured().contains(&"sms (twilio)"));
        let sms = c.delivery.sms.unwrap();
        assert_eq!(sms.from, TwilioFrom::MessagingService("MG1".into()));
        assert_eq!((sms.per_sec, sms.status_callback), (1.0, None));
        let half = load(&[("TWILIO_ACCOUNT_SID", "AC1"), ("TWILIO_AUTH_TOKEN", "t")]);
        assert!(half.unwrap_err().contains("TWILIO_FROM_NUMBER"));
        let both = load(&[
            ("TWILIO_ACCOUNT_SID", "AC1"),
            ("TWILIO_AUTH_TOKEN", "t"),
            ("TWILIO_FROM_NUMBER", "+1"),
            ("TWILIO_MESSAGING_SERVICE_SID", "MG1"),
        ]);
        assert!(both.unwrap_err().contains("not both"));
        assert!(
            load(&[("TWILIO_ACCOUNT_SID", "AC1")])
                .unwrap_err()
                .contains("TWILIO_AUTH_TOKEN")
        );
        let off = load(&[]).unwrap();
        assert!(off.delivery.sms.is_none() && off.ingest.webhooks.twilio.public_url.is_none());
    }
}
