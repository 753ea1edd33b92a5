//! The existing configuration tests, moved out of `lib.rs` unchanged.

use super::*;
use std::collections::HashMap;
use std::time::Duration;

use hermes_types::model::Tier;
use secrecy::ExposeSecret;

fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(&move |k| map.get(k).cloned(), None)
}

#[test]
fn defaults_point_at_local_servers() {
    let c = load(&[]).unwrap();
    assert_eq!(c.namespace.as_str(), "hermes");
    assert_eq!(c.ingest.http_addr.to_string(), "0.0.0.0:8080");
    assert_eq!(c.admin_addr.to_string(), "0.0.0.0:9090");
    assert_eq!(
        c.amqp_url.expose_secret(),
        "amqp://guest:guest@127.0.0.1:5672/%2f"
    );
    assert_eq!(c.redis_url.expose_secret(), "redis://127.0.0.1:6379");
    assert_eq!(c.log_format, LogFormat::Json);
    assert_eq!(c.llm.call_timeout, Duration::from_secs(45));
    assert_eq!(c.tiers[&Tier::Starter], vec!["claude-haiku", "ollama"]);
}

#[test]
fn every_problem_is_reported_on_its_own_line() {
    let err = load(&[
        ("HERMES_NAMESPACE", "Bad Name"),
        ("HERMES_HTTP_ADDR", "nowhere"),
        ("HERMES_LOG_FORMAT", "xml"),
        ("API_SERVER_KEY", "k3y-x"),
        ("HERMES_PROVIDER", "telepathy"),
        ("AMQP_URL", "http://x"),
    ])
    .unwrap_err();
    assert_eq!(err.problems.len(), 6, "{err}");
    let text = err.to_string();
    assert!(text.contains("HERMES_NAMESPACE"));
    assert!(text.contains("HERMES_HTTP_ADDR"));
    assert!(text.contains("telepathy"));
    assert!(!text.contains("k3y-x"), "secret values never print: {text}");
}

#[test]
fn the_webhook_allowlist_takes_hosts_and_ranges() {
    let c = load(&[(
        "HERMES_WEBHOOK_ALLOW",
        " agents.internal, 10.20.0.0/16 ,127.0.0.1",
    )])
    .unwrap();
    let shown: Vec<String> = c
        .delivery
        .webhook_allow
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(shown, ["agents.internal", "10.20.0.0/16", "127.0.0.1/32"]);
    assert!(load(&[]).unwrap().delivery.webhook_allow.is_empty());
    let err = load(&[("HERMES_WEBHOOK_ALLOW", "10.0.0.1/8")]).unwrap_err();
    assert!(err.to_string().contains("HERMES_WEBHOOK_ALLOW"), "{err}");
}

#[test]
fn ingest_needs_a_key_unless_on_loopback() {
    let c = load(&[]).unwrap();
    assert!(c.ingest.check().is_err());
    let c = load(&[("HERMES_HTTP_ADDR", "127.0.0.1:8080")]).unwrap();
    assert!(c.ingest.check().is_ok());
    let c = load(&[("API_SERVER_KEY", "0123456789abcdef")]).unwrap();
    assert!(c.ingest.check().is_ok());
    // The address actually bound counts, not only the one configured.
    let c = load(&[("HERMES_HTTP_ADDR", "127.0.0.1:8080")]).unwrap();
    assert!(c.ingest.check_at("0.0.0.0:8080".parse().unwrap()).is_err());
    assert!(c.ingest.check_at("[::1]:8080".parse().unwrap()).is_ok());
}

#[test]
fn the_documents_api_server_settings_map_onto_the_one_listener() {
    let c = load(&[]).unwrap();
    assert!(
        c.ingest.api_enabled,
        "on by default here (the document says off)"
    );
    let c = load(&[
        ("API_SERVER_HOST", "127.0.0.1"),
        ("API_SERVER_PORT", "8642"),
    ])
    .unwrap();
    assert_eq!(c.ingest.http_addr.to_string(), "127.0.0.1:8642");
    // Each replaces its part of HERMES_HTTP_ADDR, whichever is set.
    let c = load(&[
        ("HERMES_HTTP_ADDR", "127.0.0.1:9000"),
        ("API_SERVER_PORT", "8643"),
    ])
    .unwrap();
    assert_eq!(c.ingest.http_addr.to_string(), "127.0.0.1:8643");
    let c = load(&[
        ("HERMES_HTTP_ADDR", "0.0.0.0:9000"),
        ("API_SERVER_HOST", "::1"),
    ])
    .unwrap();
    assert_eq!(c.ingest.http_addr.to_string(), "[::1]:9000");
    assert!(
        c.ingest.check().is_ok(),
        "loopback from API_SERVER_HOST needs no key"
    );
    let c = load(&[("API_SERVER_ENABLED", "false")]).unwrap();
    assert!(!c.ingest.api_enabled);
    let e = load(&[
        ("API_SERVER_ENABLED", "maybe"),
        ("API_SERVER_HOST", "localhost"),
        ("API_SERVER_PORT", "70000"),
    ])
    .unwrap_err()
    .to_string();
    for name in ["API_SERVER_ENABLED", "API_SERVER_HOST", "API_SERVER_PORT"] {
        assert!(e.contains(name), "{name}: {e}");
    }
}

#[test]
fn provider_resolution_refuses_to_guess() {
    let c = load(&[]).unwrap();
    assert!(
        c.check_llm()
            .unwrap_err()
            .to_string()
            .contains("OPENAI_API_KEY")
    );
    let c = load(&[("HERMES_PROVIDER", "mock")]).unwrap();
    assert_eq!(
        c.llm.provider.resolve(None).unwrap().kind,
        BackendKind::Mock
    );
    let c = load(&[("OPENAI_API_KEY", "sk-test")]).unwrap();
    assert_eq!(
        c.llm.provider.resolve(None).unwrap().kind,
        BackendKind::Openai
    );
    let c = load(&[("HERMES_PROVIDER", "openai")]).unwrap();
    assert!(c.check_llm().is_err());
    let c = load(&[("HERMES_PROVIDER", "claude")]).unwrap_err();
    assert!(c.to_string().contains("HERMES_PROVIDER"), "{c}");
    // Key priority across the environment, and every base URL overridable.
    let c = load(&[
        ("OPENAI_API_KEY", "sk-o"),
        ("GEMINI_API_KEY", "g"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/anthropic"),
    ])
    .unwrap();
    assert_eq!(
        c.llm.provider.resolve(None).unwrap().kind,
        BackendKind::Gemini
    );
    assert_eq!(
        c.llm.provider.base_url(BackendKind::Anthropic).as_str(),
        "http://127.0.0.1:9/anthropic"
    );
    assert!(load(&[("GEMINI_BASE_URL", "ftp://x")]).is_err());
}

#[test]
fn discord_answers_interactions_without_a_token_and_channels_with_one() {
    let c = load(&[]).unwrap();
    assert_eq!(
        c.delivery.discord.api_url.as_str(),
        "https://discord.com/api/v10"
    );
    assert!(c.delivery.discord.bot_token.is_none());
    let c = load(&[
        ("DISCORD_BOT_TOKEN", "bot"),
        ("DISCORD_API_URL", "http://127.0.0.1:9/api/v10"),
    ])
    .unwrap();
    assert!(c.delivery.discord.bot_token.is_some());
    assert_eq!(
        c.delivery.discord.api_url.as_str(),
        "http://127.0.0.1:9/api/v10"
    );
    assert!((c.delivery.configured()).contains(&"discord (interactions and channels)"));
    assert!(load(&[("DISCORD_API_URL", "ftp://x")]).is_err());
}

#[test]
fn whatsapp_is_sent_through_the_configured_api() {
    let c = load(&[]).unwrap();
    // Discord's interaction answers need no credential: its sender is always there.
    assert_eq!(c.delivery.configured(), ["discord (interactions)"]);
    let c = load(&[("D360_API_KEY", "k")]).unwrap();
    assert!(matches!(
        c.delivery.whatsapp,
        Some(WhatsappSender::Dialog360 { .. })
    ));
    let c = load(&[
        ("WHATSAPP_ACCESS_TOKEN", "t"),
        ("WHATSAPP_PHONE_NUMBER_ID", "123"),
    ])
    .unwrap();
    assert!(matches!(
        c.delivery.whatsapp,
        Some(WhatsappSender::Cloud { ref phone_number_id, .. }) if phone_number_id == "123"
    ));
    assert!(load(&[("WHATSAPP_ACCESS_TOKEN", "t")]).is_err());
    let both = [
        ("D360_API_KEY", "k"),
        ("WHATSAPP_ACCESS_TOKEN", "t"),
        ("WHATSAPP_PHONE_NUMBER_ID", "123"),
    ];
    assert!(load(&both).is_err());
    let mut chosen = both.to_vec();
    chosen.push(("WHATSAPP_SENDER", "cloud"));
    assert!(matches!(
        load(&chosen).unwrap().delivery.whatsapp,
        Some(WhatsappSender::Cloud { .. })
    ));
    let c = load(&[
        ("TELEGRAM_BOT_TOKEN", "123:abc"),
        ("INSTAGRAM_ACCESS_TOKEN", "x"),
    ])
    .unwrap();
    assert_eq!(
        c.delivery.configured(),
        ["telegram", "instagram", "discord (interactions)"]
    );
    let text = format!("{:?}", c.describe());
    assert!(!text.contains("123:abc"));
}

#[test]
fn retry_delays_are_whole_seconds() {
    let c = load(&[]).unwrap();
    let secs: Vec<u64> = c.bus.retry_delays.iter().map(|d| d.as_secs()).collect();
    assert_eq!(secs, [60, 300, 1500]);
    let c = load(&[("HERMES_DELIVERY_RETRY_DELAYS", "1, 2")]).unwrap();
    assert_eq!(c.bus.retry_delays.len(), 2);
    for bad in ["0", "1,x", "-5", "1,,2"] {
        assert!(
            load(&[("HERMES_DELIVERY_RETRY_DELAYS", bad)]).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn the_re_wake_schedule_takes_units_or_none_and_presence_is_seconds() {
    let c = load(&[]).unwrap();
    let secs = |c: &Config| -> Vec<u64> {
        c.router
            .agent_rewake_delays
            .iter()
            .map(|d| d.as_secs())
            .collect()
    };
    assert_eq!(secs(&c), [60, 300]);
    assert_eq!(c.router.agent_presence.as_secs(), 900);
    let c = load(&[("HERMES_AGENT_REWAKE_DELAYS", "30s, 2m,1h,45")]).unwrap();
    assert_eq!(secs(&c), [30, 120, 3600, 45]);
    let c = load(&[("HERMES_AGENT_REWAKE_DELAYS", "none")]).unwrap();
    assert!(c.router.agent_rewake_delays.is_empty());
    for bad in ["0s", "1m,x", "-5", "1m,,2m", "3d"] {
        let e = load(&[("HERMES_AGENT_REWAKE_DELAYS", bad)]).unwrap_err();
        assert!(
            e.to_string().contains("HERMES_AGENT_REWAKE_DELAYS"),
            "{bad}: {e}"
        );
    }
    assert!(load(&[("HERMES_AGENT_PRESENCE_SECS", "0")]).is_err());
}

#[test]
fn the_global_budget_is_exact_money() {
    let c = load(&[("LLM_GLOBAL_DAILY_BUDGET_USD", "250.05")]).unwrap();
    assert_eq!(c.llm.global_daily_budget_micro_usd, Some(250_050_000));
    assert!(load(&[("LLM_GLOBAL_DAILY_BUDGET_USD", "-1")]).is_err());
}

#[test]
fn secrets_are_masked_in_descriptions_and_debug() {
    let c = load(&[
        ("DATABASE_URL", "postgres://app:hunter2@db:5432/hermes"),
        ("API_SERVER_KEY", "super-secret-key-123"),
        ("OPENAI_API_KEY", "sk-live-abcdef"),
    ])
    .unwrap();
    let text = format!("{:?}{:?}", c.describe(), c);
    for secret in ["hunter2", "super-secret-key-123", "sk-live-abcdef"] {
        assert!(!text.contains(secret), "{secret} leaked");
    }
    assert!(text.contains("postgres://app:***@db:5432/hermes"));
}

#[test]
fn the_toml_file_is_validated() {
    let dir = std::env::temp_dir().join(format!("hermes-cfg-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hermes.toml");
    std::fs::write(
            &path,
            "[tiers]\nfree=['tiny']\nstarter=['tiny']\npro=['nope']\nvenue-growth=['tiny']\n[models.tiny]\nid='t'\nmax_output_tokens=10\n[router]\nvision_model='tiny'\n",
        )
        .unwrap();
    let err = Config::from_lookup(&|_| None, Some(&path)).unwrap_err();
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(err.problems[0].contains("\"nope\""));

    std::fs::write(&path, "[tiers]\ngold=['x']\n").unwrap();
    let err = Config::from_lookup(&|_| None, Some(&path)).unwrap_err();
    assert!(err.to_string().contains("gold"), "{err}");

    let err = Config::from_lookup(&|_| None, Some(&dir.join("missing.toml"))).unwrap_err();
    assert!(err.to_string().contains("cannot read config file"));
}

#[test]
fn prices_are_exact_decimals_and_costs_round_half_up() {
    assert_eq!(Price::parse("0.80"), Ok(Price(800_000)));
    assert_eq!(Price::parse("15"), Ok(Price(15_000_000)));
    assert_eq!(Price::parse(".5"), Ok(Price(500_000)));
    for bad in ["", ".", "-1", "1e3", "0.1234567", "abc", "1.2.3"] {
        assert!(Price::parse(bad).is_err(), "{bad}");
    }
    let haiku = &FileConfig::default().models["claude-haiku"];
    // 20 input and 2 output tokens: 20 × $0.80 + 2 × $4.00 per million = 24 micro-dollars.
    assert_eq!(haiku.cost_micro_usd(20, 2), 24);
    assert_eq!(haiku.cost_micro_usd(1, 0), 1); // 0.8 rounds up
    assert_eq!(haiku.cost_micro_usd(1_000_000, 1_000_000), 4_800_000);
}

#[test]
fn the_api_surface_takes_exact_origins_and_a_model_name_that_wins() {
    let c = load(&[]).unwrap();
    assert!(c.ingest.api.cors_origins.is_empty());
    assert_eq!(c.ingest.api.model_name, "hermes");
    assert_eq!(c.ingest.api.image_max_bytes, 5 * 1024 * 1024);
    let c = load(&[
        (
            "API_SERVER_CORS_ORIGINS",
            "http://localhost:3000, HTTPS://App.Example:443,",
        ),
        ("API_SERVER_MODEL_NAME", "hermes-agent"),
    ])
    .unwrap();
    // As browsers send them: lower-case host, no default port.
    assert_eq!(
        c.ingest.api.cors_origins,
        ["http://localhost:3000", "https://app.example"]
    );
    assert_eq!(c.ingest.api.model_name, "hermes-agent");
    for bad in [
        "https://app.example/",
        "app.example",
        "https://app.example/path",
        "*",
    ] {
        let err = load(&[("API_SERVER_CORS_ORIGINS", bad)]).unwrap_err();
        assert!(
            err.problems[0].contains("API_SERVER_CORS_ORIGINS"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn the_core_prompt_comes_from_the_file_or_a_file_beside_it() {
    let dir = std::env::temp_dir().join(format!("hermes-cfg-{}", uuid_like()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hermes.toml");
    std::fs::write(&path, "[api]\ncore_prompt = \"Be Hermes.\"\n").unwrap();
    let c = Config::from_lookup(&|_| None, Some(&path)).unwrap();
    assert_eq!(c.api.core_prompt(), Some("Be Hermes."));
    std::fs::write(dir.join("core.md"), "From a file.").unwrap();
    std::fs::write(&path, "[api]\ncore_prompt_file = \"core.md\"\n").unwrap();
    let c = Config::from_lookup(&|_| None, Some(&path)).unwrap();
    assert_eq!(c.api.core_prompt(), Some("From a file."));
    assert_eq!(
        FileConfig::reread(&path).unwrap().api.core_prompt(),
        Some("From a file.")
    );
    std::fs::write(
        &path,
        "[api]\ncore_prompt = \"a\"\ncore_prompt_file = \"core.md\"\n",
    )
    .unwrap();
    let err = Config::from_lookup(&|_| None, Some(&path)).unwrap_err();
    assert!(err.problems[0].contains("not both"), "{err}");
    std::fs::write(&path, "[api]\ncore_prompt_file = \"missing.md\"\n").unwrap();
    let err = Config::from_lookup(&|_| None, Some(&path)).unwrap_err();
    assert!(err.problems[0].contains("core_prompt_file"), "{err}");
    assert_eq!(load(&[]).unwrap().api.core_prompt(), None);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A name no other test run uses at the same time.
fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{}-{nanos}", std::process::id())
}

#[test]
fn the_forge_route_is_off_without_secrets_and_its_settings_are_checked() {
    let off = load(&[]).unwrap().forge;
    assert!(!off.enabled());
    assert_eq!(off.path, "/agents/forge");
    assert!(!off.body_signature);
    assert_eq!(off.workspace, "default");
    let (new, old) = (
        "new-secret-0123456789abcdef0123456789",
        "old-secret-0123456789abcdef0123456789",
    );
    let c = load(&[
        (
            "HERMES_FORGE_WEBHOOK_SECRETS",
            format!(" {new} , ,{old}").as_str(),
        ),
        ("HERMES_FORGE_PATH", "/hooks/forge-wake"),
        ("HERMES_FORGE_BODY_SIGNATURE", "true"),
    ])
    .unwrap();
    let secrets: Vec<&str> = c.forge.secrets.iter().map(|s| s.expose_secret()).collect();
    assert_eq!(secrets, [new, old]);
    assert!(c.forge.enabled() && c.forge.body_signature);
    assert_eq!(c.forge.path, "/hooks/forge-wake");
    let shown = c
        .describe()
        .into_iter()
        .find(|(k, _)| k == "HERMES_FORGE_WEBHOOK_SECRETS")
        .unwrap()
        .1;
    assert_eq!(shown, "******** (2 secrets)");
    for (name, bad) in [
        ("HERMES_FORGE_PATH", "agents/forge"),
        ("HERMES_FORGE_PATH", "/v1/forge"),
        ("HERMES_FORGE_PATH", "/webhooks/forge"),
        ("HERMES_FORGE_PATH", "/agents/{key}"),
        ("HERMES_FORGE_BODY_SIGNATURE", "maybe"),
        ("HERMES_FORGE_WEBHOOK_SECRETS", ", ,"),
    ] {
        let err = load(&[(name, bad)]).unwrap_err();
        assert!(err.to_string().contains(name), "{name}={bad}: {err}");
    }
}

#[test]
fn a_forge_secret_shorter_than_32_characters_stops_the_start_without_being_shown() {
    let short = "forge-secret-of-31-characters!!";
    assert_eq!(short.len(), 31);
    let long = "forge-secret-of-32-characters!!!";
    let both = format!("{long},{short}");
    let err = load(&[("HERMES_FORGE_WEBHOOK_SECRETS", both.as_str())])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("HERMES_FORGE_WEBHOOK_SECRETS: secret 2 is shorter than 32 characters"),
        "{err}"
    );
    assert!(!err.contains(short) && !err.contains(long), "{err}");
    let c = load(&[("HERMES_FORGE_WEBHOOK_SECRETS", long)]).unwrap();
    assert!(c.forge.enabled());
}

#[test]
fn the_forge_rate_and_budget_default_on_and_0_lifts_a_budget() {
    let c = load(&[]).unwrap().forge;
    assert_eq!(c.wakes_per_minute, 120);
    assert_eq!(c.budget.daily_tokens, Some(5_000_000));
    assert_eq!(c.budget.daily_micro_usd, Some(50_000_000));
    let c = load(&[
        ("HERMES_FORGE_DAILY_TOKENS", "0"),
        ("HERMES_FORGE_DAILY_USD", "0.25"),
    ])
    .unwrap()
    .forge;
    assert_eq!(c.budget.daily_tokens, None);
    assert_eq!(c.budget.daily_micro_usd, Some(250_000));
    assert!(c.budget.is_limited());
}

#[test]
fn the_front_door_bounds_default_small() {
    let c = load(&[]).unwrap().ingest.front_door;
    assert_eq!(c.unverified_bodies, 32);
    assert_eq!(c.unverified_body_timeout, Duration::from_secs(5));
    assert_eq!(c.key_misses_per_minute, 30);
    assert_eq!(c.trusted_proxy_hops, 0);
}

#[test]
fn vision_intents_keep_their_defaults_for_what_is_not_set() {
    use hermes_types::intent::ImageIntent;
    let file: FileConfig = toml::from_str(
        "[router.vision.intents.calorie_scan]\ninstruction = 'Count the calories.'\n\
         [router.vision.intents.dupe_search]\ntoolsets = []\n",
    )
    .unwrap();
    let vision = &file.router.vision;
    assert_eq!(
        vision.instruction(ImageIntent::CalorieScan),
        "Count the calories."
    );
    assert_eq!(vision.toolsets(ImageIntent::CalorieScan), ["nutrition"]);
    assert!(vision.toolsets(ImageIntent::DupeSearch).is_empty());
    assert!(vision.instruction(ImageIntent::DupeSearch).contains("dupe"));
    assert_eq!(vision.toolsets(ImageIntent::General), ["*"]);
    let err = toml::from_str::<FileConfig>("[router.vision.intents.selfie]\ntoolsets = []\n");
    assert!(err.is_err());
}

#[test]
fn transcription_is_off_without_its_url() {
    let c = load(&[]).unwrap();
    assert!(c.media.transcribe.is_none());
    assert_eq!(c.media.deadline, Duration::from_secs(20));
    let c = load(&[
        ("HERMES_TRANSCRIBE_URL", "https://api.openai.com/v1"),
        ("HERMES_TRANSCRIBE_KEY", "sk-transcribe"),
    ])
    .unwrap();
    let t = c.media.transcribe.as_ref().unwrap();
    assert_eq!(t.model, "whisper-1");
    assert_eq!(t.key.as_ref().unwrap().expose_secret(), "sk-transcribe");
    assert!(!format!("{:?}", c.describe()).contains("sk-transcribe"));
}

#[test]
fn dispatcher_settings_read_paused_assignments_and_jwt_keys_and_name_bad_entries() {
    let c = load(&[]).unwrap();
    assert_eq!(c.dispatcher.paused_assignments, PausedAssignments::Wait);
    assert!(c.dispatcher.jwt.keys.is_empty());
    let ed = "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg";
    let keys = format!("old:HS256:0123456789abcdef0123456789abcdef,ed:EdDSA:{ed}");
    let c = load(&[
        ("HERMES_AGENT_PAUSED_ASSIGNMENTS", "fallback"),
        ("HERMES_MCP_JWT_KEYS", &keys),
    ])
    .unwrap();
    assert_eq!(c.dispatcher.paused_assignments, PausedAssignments::Fallback);
    let listed: Vec<(&str, JwtAlg)> = c
        .dispatcher
        .jwt
        .keys
        .iter()
        .map(|k| (k.kid.as_str(), k.alg))
        .collect();
    assert_eq!(listed, [("old", JwtAlg::Hs256), ("ed", JwtAlg::EdDsa)]);
    for bad in [
        "k:HS256:short",
        "k:none:0123456789abcdef0123456789abcdef",
        "k:RS256:0123456789abcdef0123456789abcdef",
        "k:EdDSA:not-a-key",
        "nokey",
    ] {
        let e = load(&[("HERMES_MCP_JWT_KEYS", bad)]).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("HERMES_MCP_JWT_KEYS"), "{bad}: {text}");
        assert!(
            !text.contains("0123456789abcdef"),
            "a key is never shown: {text}"
        );
    }
    assert!(load(&[("HERMES_MCP_JWT_LEEWAY_SECS", "600")]).is_err());
}

#[test]
fn the_discord_public_key_is_64_hex_digits() {
    let key = "e4b1fc4a3dd2e0b9b6c2f0a9a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9";
    let config = load(&[("DISCORD_PUBLIC_KEY", key)]).expect("a key");
    assert_eq!(
        config.ingest.webhooks.discord_public_key.as_deref(),
        Some(key)
    );
    let err = load(&[("DISCORD_PUBLIC_KEY", "not-a-key")]).expect_err("refused");
    assert!(err.problems[0].contains("DISCORD_PUBLIC_KEY"), "{err}");
}
