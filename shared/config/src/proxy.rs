//! Proxy mode's settings (docs/api.md, "Proxy mode"): read from the environment by the
//! router, which forwards instead of routing, and by ingest, which takes the answers back.

use secrecy::{ExposeSecret, SecretString};
use url::Url;

use crate::env::Reader;
use crate::env::proxy;

/// Where an edge install forwards its messages, and how the answers prove they came back
/// from there.
#[derive(Clone, Debug)]
pub struct ProxySettings {
    /// `GATEWAY_PROXY_URL`: the upstream Hermes API's base URL.
    pub url: Url,
    /// `GATEWAY_PROXY_KEY`: the upstream REST key the messages are sent with.
    pub key: SecretString,
    /// `GATEWAY_PROXY_SECRET`: that key's Standard Webhooks secret (`whsec_…`).
    pub callback_secret: SecretString,
}

/// Proxy mode, when `GATEWAY_PROXY_URL` is set; a URL without its key and secret (or a
/// secret that is not `whsec_…`) is a problem, never an install that forwards unsigned or
/// cannot verify what comes back.
pub(crate) fn read_proxy(r: &mut Reader<'_>) -> Option<ProxySettings> {
    let url = r.get(&proxy::GATEWAY_PROXY_URL);
    let key = r.get(&proxy::GATEWAY_PROXY_KEY);
    let secret = r.get(&proxy::GATEWAY_PROXY_SECRET);
    let Some(url) = url else {
        if key.is_some() || secret.is_some() {
            r.problem("GATEWAY_PROXY_KEY or GATEWAY_PROXY_SECRET is set without GATEWAY_PROXY_URL");
        }
        return None;
    };
    let (Some(key), Some(callback_secret)) = (key, secret) else {
        r.problem("GATEWAY_PROXY_URL needs GATEWAY_PROXY_KEY and GATEWAY_PROXY_SECRET");
        return None;
    };
    if !callback_secret.expose_secret().starts_with("whsec_") {
        r.problem("GATEWAY_PROXY_SECRET is not a callback signing secret (whsec_…)");
        return None;
    }
    Some(ProxySettings {
        url,
        key,
        callback_secret,
    })
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn load(vars: &[(&str, &str)]) -> Result<Config, crate::ConfigError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(
            &|n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()),
            None,
        )
    }

    #[test]
    fn proxy_mode_needs_its_url_key_and_signing_secret_together() {
        assert!(load(&[]).unwrap().proxy.is_none());
        let on = load(&[
            ("GATEWAY_PROXY_URL", "https://upstream.example"),
            ("GATEWAY_PROXY_KEY", "hk_upstream"),
            ("GATEWAY_PROXY_SECRET", "whsec_c2VjcmV0"),
        ])
        .unwrap();
        assert_eq!(on.proxy.unwrap().url.as_str(), "https://upstream.example/");
        for (vars, problem) in [
            (
                &[("GATEWAY_PROXY_URL", "https://upstream.example")][..],
                "needs GATEWAY_PROXY_KEY",
            ),
            (
                &[("GATEWAY_PROXY_KEY", "hk_upstream")][..],
                "without GATEWAY_PROXY_URL",
            ),
            (
                &[
                    ("GATEWAY_PROXY_URL", "https://upstream.example"),
                    ("GATEWAY_PROXY_KEY", "hk_upstream"),
                    ("GATEWAY_PROXY_SECRET", "plain"),
                ][..],
                "whsec_",
            ),
        ] {
            let e = load(vars).unwrap_err();
            assert!(e.problems.iter().any(|p| p.contains(problem)), "{e}");
            assert!(!e.to_string().contains("hk_upstream"), "{e}");
        }
    }
}
