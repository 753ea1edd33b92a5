//! The environment of a stdio MCP server: its configured `env` on top of a safe baseline of
//! the tools service's own environment, and nothing else (the service's database URL and
//! provider keys never reach a child).

use std::collections::BTreeMap;

use secrecy::{ExposeSecret, SecretString};

/// Variables passed through from the service's environment when set.
const BASELINE: &[&str] = &[
    "PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR",
];

/// Whether the variable `name` of the service's environment is passed to children.
pub fn in_baseline(name: &str) -> bool {
    BASELINE.contains(&name) || name.starts_with("XDG_")
}

/// The whole environment of a child: the baseline taken from `service_env`, then the
/// server's configured variables (which win).
pub fn child_env(
    service_env: impl IntoIterator<Item = (String, String)>,
    configured: &BTreeMap<String, SecretString>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = service_env
        .into_iter()
        .filter(|(k, _)| in_baseline(k))
        .collect();
    for (k, v) in configured {
        env.insert(k.clone(), v.expose_secret().to_owned());
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_baseline_and_the_configured_and_nothing_else() {
        let service = [
            ("PATH", "/bin"),
            ("XDG_RUNTIME_DIR", "/run/u"),
            ("HERMES_DATABASE_URL", "postgres://secret"),
            ("ANTHROPIC_API_KEY", "sk-ant-x"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let configured = BTreeMap::from([
            ("TOKEN".to_owned(), SecretString::from("t")),
            ("HOME".to_owned(), SecretString::from("/srv")),
        ]);
        let env = child_env(service, &configured);
        assert_eq!(
            env.keys().map(String::as_str).collect::<Vec<_>>(),
            ["HOME", "PATH", "TOKEN", "XDG_RUNTIME_DIR"]
        );
        assert_eq!(env["HOME"], "/srv");
    }
}
