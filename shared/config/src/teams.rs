//! The settings of Microsoft Teams that come from the environment (docs/channels.md,
//! "Microsoft Teams"): what verifies the Bot Framework's requests (ingest) and what the bot
//! replies with (delivery).

use std::path::PathBuf;

use secrecy::SecretString;
use url::Url;

use crate::env::Reader;
use crate::env::teams;

/// Where the keys that sign the Bot Framework's tokens are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// A JWKS document at an `https://` URL (the Bot Framework's OpenID keys), read at start
    /// and again daily, since Microsoft rolls its keys.
    Url(Url),
    /// A JWKS document in a file, read again when it changes.
    File(PathBuf),
}

/// What verifies Teams' webhook: the bot's app id (the tokens' audience) and the signing keys.
#[derive(Clone, Debug, Default)]
pub struct TeamsWebhook {
    /// `TEAMS_APP_ID`: unset, the route is off.
    pub app_id: Option<String>,
    /// `TEAMS_OPENID_KEYS`.
    pub keys: Option<KeySource>,
}

/// The Bot Framework Connector, as the bot replies through it.
#[derive(Clone, Debug)]
pub struct TeamsSender {
    pub app_id: String,
    pub app_password: SecretString,
    /// The client-credentials token endpoint.
    pub token_url: Url,
    /// The hosts (and their subdomains) a conversation's `serviceUrl` may name.
    pub service_hosts: Vec<String>,
}

impl TeamsSender {
    /// Whether `url` is one the bot's token may be sent to: `http` or `https` on a listed host
    /// or a subdomain of one.
    pub fn serves(&self, url: &Url) -> bool {
        let Some(host) = url.host_str() else {
            return false;
        };
        matches!(url.scheme(), "https" | "http")
            && self.service_hosts.iter().any(|h| {
                host.eq_ignore_ascii_case(h)
                    || (host.len() > h.len()
                        && host[host.len() - h.len()..].eq_ignore_ascii_case(h)
                        && host.as_bytes()[host.len() - h.len() - 1] == b'.')
            })
    }
}

/// Teams' webhook settings (ingest).
pub(crate) fn read_teams_webhook(r: &mut Reader<'_>) -> TeamsWebhook {
    let app_id = r
        .get(&teams::TEAMS_APP_ID)
        .filter(|id| !id.trim().is_empty());
    let keys = r.get(&teams::TEAMS_OPENID_KEYS).and_then(|at| {
        let source = key_source(&at);
        if source.is_none() {
            r.problem(format!(
                "TEAMS_OPENID_KEYS: {at:?} is neither an https:// URL nor a file path"
            ));
        }
        source
    });
    TeamsWebhook { app_id, keys }
}

/// The Teams sender, when the app id and password are both set; one without the other is a
/// problem, not a silently parked channel.
pub(crate) fn read_teams_sender(r: &mut Reader<'_>) -> Option<TeamsSender> {
    let app_id = r
        .get(&teams::TEAMS_APP_ID)
        .filter(|id| !id.trim().is_empty());
    let password = r.get(&teams::TEAMS_APP_PASSWORD);
    let token_url = r.get(&teams::TEAMS_TOKEN_URL);
    let hosts = r.get(&teams::TEAMS_SERVICE_HOSTS);
    let app_password = match (&app_id, password) {
        (Some(_), Some(p)) => p,
        (None, Some(_)) => {
            r.problem("TEAMS_APP_PASSWORD is set without TEAMS_APP_ID");
            return None;
        }
        (_, None) => return None,
    };
    let service_hosts: Vec<String> = hosts?
        .split(',')
        .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect();
    if service_hosts.is_empty() {
        r.problem("TEAMS_SERVICE_HOSTS names no host: no Teams reply could be sent");
        return None;
    }
    Some(TeamsSender {
        app_id: app_id?,
        app_password,
        token_url: token_url?,
        service_hosts,
    })
}

/// `https://…` as a URL; anything else without a scheme as a file path.
fn key_source(at: &str) -> Option<KeySource> {
    let at = at.trim();
    if at.is_empty() {
        return None;
    }
    match Url::parse(at) {
        Ok(url) if url.scheme() == "https" || url.scheme() == "http" => Some(KeySource::Url(url)),
        Ok(_) => None,
        Err(_) => Some(KeySource::File(PathBuf::from(at))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender(hosts: &[&str]) -> TeamsSender {
        TeamsSender {
            app_id: "app".into(),
            app_password: SecretString::from("pw"),
            token_url: "https://login.example/token".parse().unwrap(),
            service_hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    #[test]
    fn replies_go_only_to_listed_hosts_and_their_subdomains() {
        let s = sender(&["smba.trafficmanager.net", "127.0.0.1"]);
        for ok in [
            "https://smba.trafficmanager.net/amer/",
            "https://SMBA.trafficmanager.net/emea/",
            "https://eu.smba.trafficmanager.net/",
            "http://127.0.0.1:8080/",
        ] {
            assert!(s.serves(&ok.parse().unwrap()), "{ok}");
        }
        for bad in [
            "https://evilsmba.trafficmanager.net/",
            "https://smba.trafficmanager.net.evil.com/",
            "ftp://smba.trafficmanager.net/",
            "https://169.254.169.254/",
        ] {
            assert!(!s.serves(&bad.parse().unwrap()), "{bad}");
        }
    }

    #[test]
    fn the_keys_are_a_url_or_a_file() {
        assert_eq!(
            key_source("https://login.botframework.com/v1/.well-known/keys"),
            Some(KeySource::Url(
                "https://login.botframework.com/v1/.well-known/keys"
                    .parse()
                    .unwrap()
            ))
        );
        assert_eq!(
            key_source("/etc/hermes/teams-keys.json"),
            Some(KeySource::File("/etc/hermes/teams-keys.json".into()))
        );
        assert_eq!(key_source("mailto:x@y"), None);
        assert_eq!(key_source(" "), None);
    }
}
