//! The declarations hold together: every variable the reader asks for is declared (and every
//! declared one is read), defaults parse, secrets never show, and the reference table in
//! `docs/configuration.md` is the one the declarations generate.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use super::{ReadBy, Unset, all, find, markdown_table, providers};
use crate::{BackendKind, Config};

/// The names `Config::from_lookup` asks for with `vars` set.
fn names_read(vars: &[(&str, &str)]) -> BTreeSet<String> {
    let map: HashMap<&str, &str> = vars.iter().copied().collect();
    let asked = RefCell::new(BTreeSet::new());
    let lookup = |name: &str| {
        asked.borrow_mut().insert(name.to_string());
        map.get(name).map(|v| v.to_string())
    };
    let _ = Config::from_lookup(&lookup, None);
    asked.into_inner()
}

#[test]
fn every_variable_read_is_declared_and_every_declared_one_is_read() {
    let mut read = names_read(&[]);
    // Base URLs of senders are read only with their credentials; the WhatsApp Cloud API is
    // one path, 360dialog the other.
    read.extend(names_read(&[
        ("TELEGRAM_BOT_TOKEN", "t"),
        ("INSTAGRAM_ACCESS_TOKEN", "i"),
        ("SLACK_BOT_TOKEN", "s"),
        ("WHATSAPP_ACCESS_TOKEN", "w"),
        ("WHATSAPP_PHONE_NUMBER_ID", "1"),
    ]));
    read.extend(names_read(&[("D360_API_KEY", "d")]));
    read.extend(names_read(&[
        ("TWILIO_ACCOUNT_SID", "AC1"),
        ("TWILIO_AUTH_TOKEN", "t"),
        ("TWILIO_FROM_NUMBER", "+1"),
        ("MESSENGER_PAGE_ACCESS_TOKEN", "m"),
    ]));
    for name in &read {
        let declared = find(name);
        assert!(declared.is_some(), "{name} is read but not declared");
        assert_eq!(declared.map(|s| s.read_by), Some(ReadBy::Config), "{name}");
    }
    for s in all().filter(|s| s.read_by == ReadBy::Config) {
        assert!(
            read.contains(s.name),
            "{} is declared but never read",
            s.name
        );
    }
}

#[test]
fn names_are_declared_once() {
    let mut seen = BTreeSet::new();
    for s in all() {
        assert!(seen.insert(s.name), "{} is declared twice", s.name);
    }
}

#[test]
fn backend_variables_match_the_backend_names() {
    for kind in BackendKind::ALL {
        let (key, base_url) = providers::backend_vars(kind);
        assert_eq!(key.map(|v| v.name()), kind.key_var());
        assert_eq!(base_url.map(|v| v.name()), kind.base_url_var());
    }
}

#[test]
fn every_default_is_valid() {
    // Each default set explicitly, with the credentials that make the senders' base URLs read.
    let defaults: Vec<(&str, &str)> = all()
        .filter(|s| s.read_by == ReadBy::Config)
        .filter_map(|s| match s.unset {
            Unset::Value(v) => Some((s.name, v)),
            Unset::Means(_) => None,
        })
        .collect();
    let senders: [&[(&str, &str)]; 2] = [
        &[
            ("TELEGRAM_BOT_TOKEN", "t"),
            ("INSTAGRAM_ACCESS_TOKEN", "i"),
            ("SLACK_BOT_TOKEN", "s"),
            ("WHATSAPP_ACCESS_TOKEN", "w"),
            ("WHATSAPP_PHONE_NUMBER_ID", "1"),
            ("TWILIO_ACCOUNT_SID", "AC1"),
            ("TWILIO_AUTH_TOKEN", "t"),
            ("TWILIO_FROM_NUMBER", "+1"),
            ("MESSENGER_PAGE_ACCESS_TOKEN", "m"),
            ("TEAMS_APP_ID", "a"),
            ("TEAMS_APP_PASSWORD", "p"),
        ],
        &[("D360_API_KEY", "d")],
    ];
    for credentials in senders {
        let map: HashMap<&str, &str> = defaults.iter().chain(credentials).copied().collect();
        let loaded = Config::from_lookup(&|n| map.get(n).map(|v| v.to_string()), None);
        assert!(loaded.is_ok(), "{:?}", loaded.err());
    }
}

#[test]
fn doctor_lists_every_variable_and_never_a_secret_value() {
    let sentinel = "Sentinel0123456789";
    // A valid value of each kind of secret, each carrying the sentinel.
    let value = |name: &str| match name {
        "DATABASE_URL" => format!("postgres://u:{sentinel}@db/hermes"),
        "AMQP_URL" => format!("amqp://u:{sentinel}@mq/%2f"),
        "REDIS_URL" => format!("redis://u:{sentinel}@cache"),
        "HERMES_ALERT_SLACK_URL" | "HERMES_ALERT_DISCORD_URL" => {
            format!("https://hooks.example/{sentinel}")
        }
        // Fernet keys cannot hold a sentinel: check them by their own value.
        "HERMES_SESSION_KEYS" | "HERMES_SECRET_KEYS" => {
            "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=".into()
        }
        // Forge secrets are at least 32 characters.
        "HERMES_FORGE_WEBHOOK_SECRETS" => format!("{sentinel}{sentinel}"),
        // OTLP headers are `key=value` pairs.
        "OTEL_EXPORTER_OTLP_HEADERS" => format!("api-key={sentinel}"),
        // `kid:alg:key`, an HS256 secret of at least 32 characters.
        "HERMES_MCP_JWT_KEYS" => format!("k1:HS256:{sentinel}{sentinel}"),
        // A Standard Webhooks secret.
        "GATEWAY_PROXY_SECRET" => format!("whsec_{sentinel}"),
        _ => sentinel.to_string(),
    };
    let secrets: Vec<(&str, String)> = all()
        .filter(|s| s.secret && s.read_by == ReadBy::Config)
        // One WhatsApp sender at a time.
        .filter(|s| s.name != "D360_API_KEY")
        .map(|s| (s.name, value(s.name)))
        .collect();
    let mut vars: Vec<(&str, &str)> = secrets.iter().map(|(n, v)| (*n, v.as_str())).collect();
    vars.push(("WHATSAPP_PHONE_NUMBER_ID", "123"));
    vars.push(("TEAMS_APP_ID", "00000000-0000-0000-0000-000000000001"));
    vars.push(("GATEWAY_PROXY_URL", "https://upstream.example"));
    let map: HashMap<&str, &str> = vars.into_iter().collect();
    let config =
        Config::from_lookup(&|n| map.get(n).map(|v| v.to_string()), None).expect("valid secrets");
    let rows = config.describe();
    let text = format!("{rows:?}");
    for (name, value) in &secrets {
        assert!(!text.contains(value.as_str()), "{name} leaked: {text}");
    }
    assert!(!text.contains(sentinel), "{text}");
    for s in all().filter(|s| s.read_by == ReadBy::Config) {
        assert!(rows.iter().any(|(n, _)| n == s.name), "{} missing", s.name);
    }
}

const BEGIN: &str = "<!-- BEGIN GENERATED: settings -->\n";
const END: &str = "<!-- END GENERATED: settings -->";

#[test]
fn the_configuration_reference_is_generated_from_the_declarations() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let text = std::fs::read_to_string(&path).expect("docs/configuration.md is readable");
    let start = text.find(BEGIN).expect("the BEGIN marker is present") + BEGIN.len();
    let end = text[start..].find(END).expect("the END marker is present") + start;
    let generated = markdown_table();
    if text[start..end] == generated {
        return;
    }
    if std::env::var("HERMES_UPDATE_DOCS").as_deref() == Ok("1") {
        let updated = format!("{}{generated}{}", &text[..start], &text[end..]);
        std::fs::write(&path, updated).expect("docs/configuration.md is writable");
        return;
    }
    panic!(
        "the settings table of docs/configuration.md differs from the declarations in \
         shared/config/src/env; regenerate it with \
         `HERMES_UPDATE_DOCS=1 cargo nextest run -p hermes-config -E 'test(/configuration_reference/)'`"
    );
}
