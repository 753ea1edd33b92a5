//! The router's settings, one struct whatever the source: prompts of the pipeline's
//! fallbacks, the built-in persona, sessions, semantic recall, vision and tool gating
//! (`[router]` in the TOML file), plus what it reads from the environment (the recall
//! endpoint, the Fernet keys, the sweeper's bound, external agents' re-wakes and presence,
//! bursts, how long old rows are kept).

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

use hermes_types::agent::Tone;
use hermes_types::intent::{ImageIntent, Intent};

use crate::Retention;
use crate::env::{retention, router as env};

/// Everything the router reads (`ctx.config.router`). The fields without `#[serde(skip)]`
/// are `[router]` in the TOML file, each with the seed's value as its default; the skipped
/// ones come from the environment (`crate::env::router`, `crate::env::retention`) and are
/// set by `Config::from_lookup`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterSettings {
    /// Sent to a sender with no activated channel; `{signup_url}` is filled in.
    pub signup_prompt: String,
    pub signup_url: String,
    /// Sent when the user has no credit left; `{referral_code}` and `{upgrade_url}` are filled in.
    pub upgrade_prompt: String,
    pub upgrade_url: String,
    /// Credits one answered message costs.
    pub credits_per_message: u32,
    /// A session with no message for this long is closed; the next message opens a new one.
    pub session_idle_hours: u64,
    /// Most turns of history sent to the model.
    pub history_max_turns: usize,
    /// The persona that answers when no internal agent is configured.
    pub persona: PersonaSettings,
    /// Logical model (in `[models]`) that answers messages with images.
    pub vision_model: String,
    /// `[router.vision]`: each image intent's instruction and toolsets.
    pub vision: VisionSettings,
    pub recall: RecallSettings,
    pub tool_gate: ToolGateSettings,
    /// `HERMES_EMBEDDINGS_URL`: base URL of an OpenAI-compatible embeddings endpoint
    /// (`{url}/embeddings`); recall is off without it.
    #[serde(skip)]
    pub embeddings_url: Option<Url>,
    /// `HERMES_EMBEDDINGS_API_KEY`.
    #[serde(skip)]
    pub embeddings_api_key: Option<SecretString>,
    /// `HERMES_SESSION_KEYS`: Fernet keys of the session-history cache, newest first (the
    /// first encrypts, all decrypt). Without them history is read from PostgreSQL on every
    /// message.
    #[serde(skip)]
    pub session_keys: Vec<SecretString>,
    /// `HERMES_SECRET_KEYS`: Fernet keys that encrypt agent webhook secrets at rest, newest
    /// first.
    #[serde(skip)]
    pub secret_keys: Vec<SecretString>,
    /// `HERMES_RUN_STUCK_AFTER_SECS`: how long a run may stay open before the router's
    /// sweeper ends it.
    #[serde(skip)]
    pub run_stuck_after: Duration,
    /// `HERMES_AGENT_REWAKE_DELAYS`: delays of the re-wakes of an unacknowledged external
    /// run, each after the previous wake.
    #[serde(skip)]
    pub agent_rewake_delays: Vec<Duration>,
    /// `HERMES_AGENT_PRESENCE_SECS`: how long an external agent may be silent (no 2xx, no
    /// heartbeat) before it is OFFLINE.
    #[serde(skip)]
    pub agent_presence: Duration,
    /// Bursts of chat messages answered as one turn (docs/channels.md, bursts).
    #[serde(skip)]
    pub bursts: BurstSettings,
    /// The weekly dreaming engine (`HERMES_DREAMING*`, docs/models-and-budgets.md).
    #[serde(skip)]
    pub dreaming: DreamingSettings,
    /// How long each family of tables keeps its rows, swept by the router
    /// (`HERMES_RETENTION_*`).
    #[serde(skip)]
    pub retention: Retention,
}

impl Default for RouterSettings {
    fn default() -> Self {
        Self {
            signup_prompt: "Hi! I don't know this number yet. Sign up at {signup_url} and link \
                            this chat to start talking to your agent."
                .into(),
            signup_url: "https://example.com/signup".into(),
            upgrade_prompt: "You're out of credits. Upgrade at {upgrade_url}, or share your \
                             referral code {referral_code} with a friend to earn more."
                .into(),
            upgrade_url: "https://example.com/upgrade".into(),
            credits_per_message: 1,
            session_idle_hours: 12,
            history_max_turns: 20,
            persona: PersonaSettings::default(),
            vision_model: "claude-sonnet".into(),
            vision: VisionSettings::default(),
            recall: RecallSettings::default(),
            tool_gate: ToolGateSettings::default(),
            embeddings_url: None,
            embeddings_api_key: None,
            session_keys: Vec::new(),
            secret_keys: Vec::new(),
            run_stuck_after: env::HERMES_RUN_STUCK_AFTER_SECS.unset_value(),
            agent_rewake_delays: env::HERMES_AGENT_REWAKE_DELAYS.unset_value(),
            agent_presence: env::HERMES_AGENT_PRESENCE_SECS.unset_value(),
            bursts: BurstSettings {
                quiet: env::HERMES_BURST_QUIET_MS.unset_value(),
                max_wait: env::HERMES_BURST_MAX_WAIT_MS.unset_value(),
            },
            dreaming: DreamingSettings {
                on: env::HERMES_DREAMING.unset_value(),
                tier: None,
                check_every: env::HERMES_DREAMING_CHECK_SECS.unset_value(),
                timeout: env::HERMES_DREAMING_TIMEOUT_SECS.unset_value(),
                max_turns: env::HERMES_DREAMING_MAX_TURNS.unset_value(),
                max_chars: env::HERMES_DREAMING_MAX_CHARS.unset_value(),
            },
            retention: Retention {
                runs_days: retention::HERMES_RETENTION_RUNS_DAYS.unset_value(),
                conversations_days: retention::HERMES_RETENTION_CONVERSATIONS_DAYS.unset_value(),
                statuses_days: retention::HERMES_RETENTION_STATUSES_DAYS.unset_value(),
                facts_days: retention::HERMES_RETENTION_FACTS_DAYS.unset_value(),
                ledger_days: retention::HERMES_RETENTION_LEDGER_DAYS.unset_value(),
                responses_days: retention::HERMES_RETENTION_RESPONSES_DAYS.unset_value(),
                forge_deliveries_days: retention::HERMES_RETENTION_FORGE_DELIVERIES_DAYS
                    .unset_value(),
                sweep_every: retention::HERMES_RETENTION_SWEEP_SECS.unset_value(),
            },
        }
    }
}

impl RouterSettings {
    pub fn session_idle(&self) -> Duration {
        Duration::from_secs(self.session_idle_hours * 3600)
    }

    pub(super) fn validate(
        &self,
        models: &BTreeMap<String, super::ModelSpec>,
        problems: &mut Vec<String>,
    ) {
        if !models.contains_key(&self.vision_model) {
            problems.push(format!(
                "router.vision_model: {:?} is not in [models]",
                self.vision_model
            ));
        }
        if self.session_idle_hours == 0 {
            problems.push("router.session_idle_hours must be above 0".into());
        }
        if self.recall.top_k == 0 {
            problems.push("router.recall.top_k must be above 0".into());
        }
        self.vision.validate(problems);
        if self.persona.name.trim().is_empty() {
            problems.push("router.persona.name must not be empty".into());
        }
    }
}

/// The built-in persona (base layer of the soul) used when no internal agent is configured.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PersonaSettings {
    pub name: String,
    pub tone: Tone,
    pub role_instructions: String,
}

impl Default for PersonaSettings {
    fn default() -> Self {
        Self {
            name: "Hermes".into(),
            tone: Tone::Friendly,
            role_instructions: "You are a personal concierge: help the user find places, plan \
                                bookings and keep track of their goals."
                .into(),
        }
    }
}

/// `[router.vision]`: what the vision model is told, and which toolsets it is offered, for
/// each image intent (docs/configuration.md, vision). An intent not set, or a key of it not
/// set, keeps the built-in default.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VisionSettings {
    pub intents: VisionIntents,
}

/// `[router.vision.intents.<intent>]`, one table per image intent.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VisionIntents {
    pub calorie_scan: VisionIntent,
    pub dupe_search: VisionIntent,
    pub general: VisionIntent,
}

/// One image intent's settings; unset keys keep the defaults.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VisionIntent {
    /// A system block added to the vision call.
    pub instruction: Option<String>,
    /// The toolsets offered (`"*"`: every toolset; empty: none).
    pub toolsets: Option<Vec<String>>,
}

impl VisionSettings {
    fn set(&self, intent: ImageIntent) -> &VisionIntent {
        match intent {
            ImageIntent::CalorieScan => &self.intents.calorie_scan,
            ImageIntent::DupeSearch => &self.intents.dupe_search,
            ImageIntent::General => &self.intents.general,
        }
    }

    /// The system block the vision call gets for `intent`.
    pub fn instruction(&self, intent: ImageIntent) -> &str {
        self.set(intent)
            .instruction
            .as_deref()
            .unwrap_or(default_instruction(intent))
    }

    /// The toolsets the vision call is offered for `intent` (`"*"`: every toolset).
    pub fn toolsets(&self, intent: ImageIntent) -> Vec<String> {
        match &self.set(intent).toolsets {
            Some(sets) => sets.clone(),
            None => default_toolsets(intent)
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }

    fn validate(&self, problems: &mut Vec<String>) {
        for intent in [
            ImageIntent::CalorieScan,
            ImageIntent::DupeSearch,
            ImageIntent::General,
        ] {
            if self.instruction(intent).trim().is_empty() {
                problems.push(format!(
                    "router.vision.intents.{}.instruction must not be empty",
                    intent.as_str()
                ));
            }
        }
    }
}

/// The seed's meaning of each image intent, as an instruction to the vision model.
fn default_instruction(intent: ImageIntent) -> &'static str {
    match intent {
        ImageIntent::CalorieScan => {
            "The user sent a photo of food and wants a calorie scan. Name each item you can \
             see with its estimated portion, then give the estimated calories of each and the \
             total, with protein, carbohydrates and fat. Say plainly that these are estimates \
             from a photo."
        }
        ImageIntent::DupeSearch => {
            "The user sent a photo of a product or an outfit and wants a dupe: the same look \
             for less. Describe what is pictured (kind, colour, material, cut, brand if \
             visible), then suggest where to find it or close, cheaper alternatives."
        }
        ImageIntent::General => {
            "The user sent an image. Look at it carefully and answer what they asked about \
             it; if they asked nothing, say briefly what matters in it."
        }
    }
}

/// The toolsets the seed's intents use: nutrition for a calorie scan, search for a dupe,
/// everything for a general question.
fn default_toolsets(intent: ImageIntent) -> &'static [&'static str] {
    match intent {
        ImageIntent::CalorieScan => &["nutrition"],
        ImageIntent::DupeSearch => &["search", "web"],
        ImageIntent::General => &["*"],
    }
}

/// `[router.recall]`: semantic recall over the user's memory facts.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecallSettings {
    /// Facts appended as `RELEVANT CONTEXT`.
    pub top_k: usize,
    /// Embedding model sent to the endpoint (HERMES_EMBEDDINGS_URL).
    pub model: String,
    /// Deadline of one embeddings call; recall is skipped (not the message) when it passes.
    pub timeout_ms: u64,
}

impl Default for RecallSettings {
    fn default() -> Self {
        Self {
            top_k: 10,
            model: "text-embedding-3-small".into(),
            timeout_ms: 3000,
        }
    }
}

/// `[router.tool_gate]`: which toolsets each message intent is offered. `"*"` means every
/// toolset; an intent not listed gets every toolset; `trivial` gets none whatever is listed.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolGateSettings {
    pub intents: BTreeMap<Intent, Vec<String>>,
}

impl Default for ToolGateSettings {
    fn default() -> Self {
        let sets = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Self {
            intents: BTreeMap::from([
                (Intent::Trivial, Vec::new()),
                (Intent::Time, sets(&["builtin"])),
                (Intent::Venue, sets(&["venues", "maps", "search"])),
                (Intent::Booking, sets(&["booking", "venues", "builtin"])),
                (Intent::Nutrition, sets(&["nutrition"])),
                (Intent::Fitness, sets(&["fitness", "nutrition"])),
                (Intent::Search, sets(&["search", "web"])),
                (Intent::General, sets(&["*"])),
            ]),
        }
    }
}

/// Bursts (`HERMES_BURST_QUIET_MS`, `HERMES_BURST_MAX_WAIT_MS`, docs/channels.md): a chat
/// message is held until its conversation has been quiet for `quiet`, or its first held
/// message has waited `max_wait`, then the held messages are routed as one turn. A `quiet`
/// of 0 is off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BurstSettings {
    pub quiet: Duration,
    pub max_wait: Duration,
}

impl BurstSettings {
    /// Whether chat messages are held at all.
    pub fn on(&self) -> bool {
        !self.quiet.is_zero()
    }
}

/// The dreaming engine (`HERMES_DREAMING*`, docs/models-and-budgets.md, "The dreaming
/// engine"): once an ISO week is over, one bounded model call per user who talked in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DreamingSettings {
    /// Whether the router queues dreams at all.
    pub on: bool,
    /// The tier whose chain dreams; `None`: the user's own.
    pub tier: Option<hermes_types::model::Tier>,
    /// How often a router replica looks for the week's users not yet dreamt.
    pub check_every: Duration,
    /// Bound of one dream's model call.
    pub timeout: Duration,
    /// Most messages of the week read (the newest).
    pub max_turns: usize,
    /// Most characters of those messages read.
    pub max_chars: usize,
}

/// The dreaming settings (`None` when one of them left a problem behind).
pub(crate) fn read_dreaming(r: &mut crate::env::Reader<'_>) -> Option<DreamingSettings> {
    let on = r.get(&env::HERMES_DREAMING);
    let tier = r.get(&env::HERMES_DREAMING_TIER);
    let check_every = r.get(&env::HERMES_DREAMING_CHECK_SECS);
    let timeout = r.get(&env::HERMES_DREAMING_TIMEOUT_SECS);
    let max_turns = r.get(&env::HERMES_DREAMING_MAX_TURNS);
    let max_chars = r.get(&env::HERMES_DREAMING_MAX_CHARS);
    Some(DreamingSettings {
        on: on?,
        tier,
        check_every: check_every?,
        timeout: timeout?,
        max_turns: max_turns?,
        max_chars: max_chars?,
    })
}
