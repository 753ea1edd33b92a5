//! Credential-like strings removed from text that leaves the process or reaches a log: what
//! an MCP server's errors tell the model (with the server's own configured secrets, verbatim),
//! and the details of failed sends kept in logs and on parked messages. Bearer and header
//! values, secret-named `key=value` pairs, Telegram bot tokens in URL paths, and well-known
//! key shapes.

/// Prefixes of common API keys and tokens.
const KEY_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "pk_",
    "rk_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "ya29.",
];

/// Words (schemes and header names) after which the next token is a credential.
const SCHEMES: &[&str] = &[
    "bearer",
    "basic",
    "token",
    "d360-api-key",
    "x-api-key",
    "api-key",
];

/// Query or key=value names whose value is a credential.
const SECRET_KEYS: &[&str] = &[
    "key",
    "api_key",
    "apikey",
    "token",
    "access_token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "auth",
    "authorization",
    "client_secret",
];

const REDACTED: &str = "[redacted]";

/// `text` with `secrets` (exact values, those at least 4 characters long) and every
/// credential-like token replaced by `[redacted]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(s.as_str(), REDACTED);
    }
    let mut result = String::with_capacity(out.len());
    let mut after_scheme = false;
    for piece in out.split_inclusive(|c: char| c.is_whitespace()) {
        let word = piece.trim_end();
        let tail = &piece[word.len()..];
        let bare = word.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | ';' | '(' | ')'));
        if after_scheme && bare.len() >= 8 {
            result.push_str(&word.replace(bare, REDACTED));
        } else {
            result.push_str(&scrub_word(word));
        }
        result.push_str(tail);
        if !word.is_empty() {
            after_scheme = SCHEMES.contains(&bare.to_ascii_lowercase().trim_end_matches(':'));
        }
    }
    result
}

fn scrub_word(word: &str) -> String {
    let word = &redact_bot_token(word);
    // key=value pairs, possibly several in a query string.
    if word.contains('=') {
        let mut parts = Vec::new();
        for pair in word.split('&') {
            match pair.split_once('=') {
                Some((k, v)) if !v.is_empty() && is_secret_key(k) => {
                    parts.push(format!("{k}={REDACTED}"))
                }
                _ => parts.push(pair.to_owned()),
            }
        }
        return parts.join("&");
    }
    let bare = word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '-');
    if bare.len() >= 16 && KEY_PREFIXES.iter().any(|p| bare.starts_with(p)) {
        return word.replace(bare, REDACTED);
    }
    word.to_owned()
}

/// Telegram puts the bot token in the URL path: `/bot<digits>:<secret>/…`.
fn redact_bot_token(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(at) = rest.find("/bot") {
        let (head, tail) = rest.split_at(at + 4);
        out.push_str(head);
        let digits = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        let secret = tail[digits..]
            .strip_prefix(':')
            .map(|t| t.find(['/', '?', '"', '\'', ')']).unwrap_or(t.len()))
            .filter(|&n| digits > 0 && n > 0);
        match secret {
            Some(n) => {
                out.push_str(&tail[..=digits]);
                out.push_str(REDACTED);
                rest = &tail[digits + 1 + n..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

fn is_secret_key(k: &str) -> bool {
    let k = k
        .rsplit(['?', '"', '\''])
        .next()
        .unwrap_or(k)
        .to_ascii_lowercase();
    SECRET_KEYS.contains(&k.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_configured_secrets_and_credential_shapes() {
        let text = "401 for https://api.x/v1?user=a&api_key=abcd1234 with Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.x and sk-proj-0123456789abcdefgh; custom hunter2-long";
        let out = redact(text, &["hunter2-long".into()]);
        assert!(!out.contains("abcd1234"), "{out}");
        assert!(!out.contains("eyJhbGci"), "{out}");
        assert!(!out.contains("sk-proj-0123"), "{out}");
        assert!(!out.contains("hunter2"), "{out}");
        assert!(out.contains("user=a&api_key=[redacted]"), "{out}");
        assert!(out.starts_with("401 for https://api.x/v1?"), "{out}");
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        let text = "file not found: /tmp/a.txt (errno 2), tokens used = 12";
        assert_eq!(redact(text, &[]), text);
    }
}
