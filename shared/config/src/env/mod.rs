//! Every environment variable Hermes reads, declared once: its name, what an unset variable
//! means, one line of help, whether it is a secret, and how it is parsed and shown. The
//! reader (`Config::from_lookup`), `hermes doctor`'s listing, the `--help` text of the
//! binary and the table in `docs/configuration.md` are all derived from these declarations,
//! so the four cannot drift apart.

mod kinds;
mod read;

pub mod api;
pub mod approvals;
pub mod bus;
pub mod console;
pub mod delivery;
pub mod discord_gateway;
pub mod dispatcher;
pub mod forge;
pub mod front_door;
pub mod ingest;
pub mod media;
pub mod messenger;
pub mod presets;
pub mod process;
pub mod providers;
pub mod proxy;
pub mod retention;
pub mod router;
pub mod sms;
pub mod teams;
pub mod tenants;
pub mod tools;
pub mod traces;

pub(crate) use read::Reader;

#[cfg(test)]
mod tests;

/// What an unset (or blank) variable means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unset {
    /// This value is read instead; it goes through the same parser as a set one.
    Value(&'static str),
    /// Nothing is read; the text says what that means, e.g. `(none: route off)`.
    Means(&'static str),
}

/// Who reads a variable. Only `Config` variables are read by `Config::from_lookup` and
/// listed by `hermes doctor`; the others are documented because operators set them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadBy {
    /// `Config::from_lookup`.
    Config,
    /// The log set-up of `hermes-telemetry`.
    Telemetry,
    /// Not Hermes: a variable of the platform recommended for Hermes.
    Platform,
}

/// The description of one environment variable, without its type.
#[derive(Debug)]
pub struct Setting {
    /// The variable's name.
    pub name: &'static str,
    /// What an unset variable means.
    pub unset: Unset,
    /// One line of help; Markdown code spans (`` `x` ``) are allowed.
    pub help: &'static str,
    /// Whether the value is a credential: it is only ever shown masked.
    pub secret: bool,
    /// Who reads it.
    pub read_by: ReadBy,
}

impl Setting {
    /// The default column of the reference: the value in a code span, or what unset means.
    fn default_text(&self) -> String {
        match self.unset {
            Unset::Value(v) => format!("`{v}`"),
            Unset::Means(m) => m.to_string(),
        }
    }
}

/// How a variable's text becomes a typed value, and how that value is shown by `doctor`.
pub struct Kind<T: 'static> {
    /// `(name, trimmed value)` → the value, or every problem as its own line.
    pub parse: fn(&str, &str) -> Result<T, Vec<String>>,
    /// The value as `hermes doctor` prints it; masks it when the kind holds a secret.
    pub show: fn(&T) -> String,
}

/// A typed environment variable: its description and its kind.
pub struct Var<T: 'static> {
    /// Name, default, help and secrecy.
    pub setting: Setting,
    /// Parser and display.
    pub kind: Kind<T>,
}

impl<T> Var<T> {
    /// The variable's name.
    pub fn name(&self) -> &'static str {
        self.setting.name
    }

    /// What the variable reads as when unset: its declared default, parsed. This is the
    /// `Default` of a service's settings field that comes from the environment (a struct the
    /// TOML file also fills needs one), so the default stays declared once.
    ///
    /// # Panics
    /// When the variable has no default value, or its default does not parse (the
    /// declarations' tests parse every default).
    pub(crate) fn unset_value(&self) -> T {
        match self.setting.unset {
            Unset::Value(v) => (self.kind.parse)(self.name(), v)
                .unwrap_or_else(|e| panic!("{}'s default {v:?}: {}", self.name(), e.join("; "))),
            Unset::Means(m) => panic!("{} has no default value: {m}", self.name()),
        }
    }
}

/// Declares a section of typed variables and the list `$section` of their descriptions, so a
/// variable cannot be declared without being listed (and therefore documented).
macro_rules! settings {
    (
        $(#[$section_doc:meta])*
        $section:ident = [
            $(
                $(#[$doc:meta])*
                $name:ident: $ty:ty {
                    kind: $kind:expr,
                    unset: $unset:expr,
                    secret: $secret:expr,
                    help: $help:expr $(,)?
                }
            ),* $(,)?
        ]
    ) => {
        $(
            $(#[$doc])*
            pub static $name: $crate::env::Var<$ty> = $crate::env::Var {
                setting: $crate::env::Setting {
                    name: stringify!($name),
                    unset: $unset,
                    help: $help,
                    secret: $secret,
                    read_by: $crate::env::ReadBy::Config,
                },
                kind: $kind,
            };
        )*
        $(#[$section_doc])*
        pub static $section: &[&$crate::env::Setting] = &[$(&$name.setting),*];
    };
}
pub(crate) use settings;

/// The sections in the order the reference, `--help` and `doctor` list them.
static SECTIONS: &[&[&Setting]] = &[
    process::SETTINGS,
    providers::SETTINGS,
    presets::SETTINGS,
    ingest::SETTINGS,
    front_door::SETTINGS,
    forge::SETTINGS,
    dispatcher::SETTINGS,
    api::SETTINGS,
    console::SETTINGS,
    bus::SETTINGS,
    router::SETTINGS,
    media::SETTINGS,
    retention::SETTINGS,
    delivery::SETTINGS,
    sms::SETTINGS,
    messenger::SETTINGS,
    teams::SETTINGS,
    discord_gateway::SETTINGS,
    delivery::ALERTS,
    approvals::SETTINGS,
    tools::SETTINGS,
    tenants::SETTINGS,
    traces::SETTINGS,
    proxy::SETTINGS,
    process::OUTSIDE,
];

/// Every documented variable, in reference order.
pub fn all() -> impl Iterator<Item = &'static Setting> {
    SECTIONS.iter().flat_map(|s| s.iter().copied())
}

/// The declaration of `name`, if there is one.
pub fn find(name: &str) -> Option<&'static Setting> {
    all().find(|s| s.name == name)
}

/// The Markdown table of `docs/configuration.md` (between its `settings` markers).
pub fn markdown_table() -> String {
    let mut out = String::from("| variable | default | meaning |\n|---|---|---|\n");
    for s in all() {
        let secret = if s.secret { " (secret)" } else { "" };
        out.push_str(&format!(
            "| `{}` | {} | {}{secret} |\n",
            s.name,
            s.default_text(),
            s.help
        ));
    }
    out
}

/// The environment section of `hermes --help`: every variable with its help and default.
pub fn cli_help() -> String {
    let mut out = String::from(
        "Environment (read once at start; `hermes doctor` shows the effective values):\n",
    );
    for s in all() {
        let default = match s.unset {
            Unset::Value(v) => v,
            Unset::Means(m) => m,
        };
        // Code spans are Markdown; a terminal shows the bare text.
        out.push_str(&format!(
            "  {:<28} {} [default: {}]\n",
            s.name,
            s.help.replace('`', ""),
            default
        ));
    }
    out
}
