//! Microsoft Teams through the Bot Framework (docs/channels.md, "Microsoft Teams"): the bot's
//! Microsoft App ID and password, where the keys that sign Teams' requests are, where the
//! bot's own token comes from, and which hosts replies may go to.

use secrecy::SecretString;
use url::Url;

use super::Unset::{Means, Value};
use super::{kinds, settings};

settings! {
    /// The Bot Framework's Connector service.
    SETTINGS = [
        TEAMS_APP_ID: String {
            kind: kinds::TEXT,
            unset: Means("(none: route off, Teams replies parked)"),
            secret: false,
            help: "the bot's Microsoft App ID: the audience of Teams' tokens and the client id of its own; enables `POST /webhooks/teams`",
        },
        TEAMS_APP_PASSWORD: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: Teams replies parked)"),
            secret: true,
            help: "the bot's client secret (app password), exchanged for a Connector token; with TEAMS_APP_ID, enables Teams replies",
        },
        TEAMS_OPENID_KEYS: String {
            kind: kinds::TEXT,
            unset: Value("https://login.botframework.com/v1/.well-known/keys"),
            secret: false,
            help: "where the keys that sign Teams' tokens are: an `https://` JWKS URL (read at start and daily) or a file path",
        },
        TEAMS_TOKEN_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token"),
            secret: false,
            help: "OAuth 2.0 token endpoint of the bot's client-credentials grant (a single-tenant bot names its tenant here)",
        },
        TEAMS_SERVICE_HOSTS: String {
            kind: kinds::TEXT,
            unset: Value("smba.trafficmanager.net,smba.infra.gcc.teams.microsoft.com,smba.infra.gov.teams.microsoft.us"),
            secret: false,
            help: "comma-separated hosts (and their subdomains) a conversation's `serviceUrl` may name; replies carry the bot's token there and nowhere else",
        },
    ]
}
