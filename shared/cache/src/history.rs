//! Session history cache (docs/architecture.md#10-redis): the recent turns of one session, kept in
//! Redis under the session's internal id (`{ns}:session:{session_id}`) so the router does not
//! read PostgreSQL on every message.
//!
//! A session belongs to one user on one platform and chat, so keying by it keeps each group
//! member's turns to themselves, keeps an earlier session's turns (and its late replies) out
//! of the next one, and keeps platform identifiers such as phone numbers out of key names
//! (docs/security.md, "Conversations and tools").
//!
//! The turns are personal data, so they are stored as a Fernet token (the same format as
//! Python's `cryptography.fernet`, so either side of a migration can read the other's
//! entries), never as plain JSON. Redis may lose all of it: every failure here is logged
//! and treated as a miss, and the router rebuilds the history from the `interactions`
//! table, which is the truth.

use std::time::Duration;

use secrecy::SecretString;

use super::Cache;
use hermes_net::keyring::KeyRing;
use hermes_types::ids::SessionId;
use hermes_types::model::ChatMessage;

/// Why a stored history could not be turned back into messages.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The token is malformed, tampered with, or made with a key no longer configured.
    #[error("history token does not open with any configured session key")]
    Undecryptable,
    /// The token opened but does not hold a JSON list of chat messages. Only the position is
    /// kept: serde_json's own message may quote the decrypted text, which must not reach logs.
    #[error("decrypted history is not a list of chat messages (line {line}, column {column})")]
    Decode {
        /// Line of the first error in the decrypted JSON.
        line: usize,
        /// Column of the first error in the decrypted JSON.
        column: usize,
    },
}

/// Encrypts histories with the newest session key and decrypts with any configured one, so
/// keys can be rotated without dropping the cache: put the new key first, keep the old one
/// until entries made with it have expired (one idle timeout), then remove it.
#[derive(Clone, Debug)]
pub struct HistoryCipher {
    ring: KeyRing,
}

impl HistoryCipher {
    /// A cipher over `keys`, newest first; None when the list is empty or a key is
    /// malformed (see [`KeyRing::new`]).
    pub fn new(keys: &[SecretString]) -> Option<Self> {
        KeyRing::new(keys).map(|ring| Self { ring })
    }

    /// The Fernet token of `messages` as a JSON array, made with the first key.
    pub fn encrypt(&self, messages: &[ChatMessage]) -> String {
        // Chat messages hold only strings, enums and JSON values with string keys, for which
        // serde_json cannot fail.
        let plain = serde_json::to_vec(messages).expect("chat messages serialize to JSON");
        self.ring.seal(&plain)
    }

    /// The messages inside `token`, trying every key in order.
    pub fn decrypt(&self, token: &str) -> Result<Vec<ChatMessage>, HistoryError> {
        let plain = self.ring.open(token).ok_or(HistoryError::Undecryptable)?;
        serde_json::from_slice(&plain).map_err(|e| HistoryError::Decode {
            line: e.line(),
            column: e.column(),
        })
    }
}

/// Replaces a history only if it is still the one that was read, and otherwise drops it:
/// two appends racing on one session would each write their own extension and one turn would
/// silently vanish from the cache for a whole idle timeout. Dropping the entry instead sends
/// the next reader to PostgreSQL, which has both turns. A compare-and-set script is needed
/// because the multiplexed connection cannot hold a WATCH.
const REPLACE_IF_UNCHANGED: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
    return 1
end
redis.call('DEL', KEYS[1])
return 0
";

/// The encrypted history cache. Cheap to clone.
#[derive(Clone)]
pub struct HistoryStore {
    cache: Cache,
    cipher: HistoryCipher,
    ttl: Duration,
    replace: redis::Script,
}

impl HistoryStore {
    /// A store whose entries expire `ttl` after their last write; pass the session idle
    /// timeout (12 h), since an entry older than that belongs to a session that is over.
    pub fn new(cache: Cache, cipher: HistoryCipher, ttl: Duration) -> Self {
        Self {
            cache,
            cipher,
            ttl,
            replace: redis::Script::new(REPLACE_IF_UNCHANGED),
        }
    }

    fn key(&self, session: SessionId) -> String {
        self.cache.key(format_args!("session:{session}"))
    }

    /// Redis refuses `EX 0`, and a sub-second idle timeout is not meant literally.
    fn ttl_secs(&self) -> u64 {
        self.ttl.as_secs().max(1)
    }

    /// The raw token stored for `session`; None on a miss or a Redis error (counted).
    async fn load_token(&self, session: SessionId) -> Option<String> {
        let mut c = self.cache.conn();
        match redis::cmd("GET")
            .arg(self.key(session))
            .query_async::<Option<String>>(&mut c)
            .await
        {
            Ok(token) => token,
            Err(e) => {
                let err = self.cache.failed("history_load", e);
                tracing::warn!(%session, error = %err, "session history unavailable; rebuilding from the database");
                None
            }
        }
    }

    /// The cached history, or None when there is nothing usable (a miss, Redis failing, or
    /// an entry no configured key opens): the caller then rebuilds it from PostgreSQL.
    pub async fn load(&self, session: SessionId) -> Option<Vec<ChatMessage>> {
        let token = self.load_token(session).await?;
        self.open(&token)
    }

    fn open(&self, token: &str) -> Option<Vec<ChatMessage>> {
        match self.cipher.decrypt(token) {
            Ok(messages) => Some(messages),
            Err(e) => {
                tracing::warn!(error = %e, "cached session history is unreadable; rebuilding from the database");
                None
            }
        }
    }

    /// Replace the history of `session`. Failures are logged, not returned: the cache may lose
    /// this write and the next reader rebuilds from the database.
    pub async fn save(&self, session: SessionId, messages: &[ChatMessage]) {
        let token = self.cipher.encrypt(messages);
        let mut c = self.cache.conn();
        if let Err(e) = redis::cmd("SET")
            .arg(self.key(session))
            .arg(token)
            .arg("EX")
            .arg(self.ttl_secs())
            .query_async::<()>(&mut c)
            .await
        {
            let err = self.cache.failed("history_save", e);
            tracing::warn!(error = %err, "session history not cached");
        }
    }

    /// Add `new` turns to the cached history of `session`, keeping its last `max_turns`
    /// messages. Nothing is written when there is no usable cached history: writing only the
    /// new turns would leave a truncated history that later readers take for the whole one.
    pub async fn append(&self, session: SessionId, new: &[ChatMessage], max_turns: usize) {
        let Some(old_token) = self.load_token(session).await else {
            return;
        };
        let Some(mut messages) = self.open(&old_token) else {
            return;
        };
        messages.extend_from_slice(new);
        let excess = messages.len().saturating_sub(max_turns);
        messages.drain(..excess);
        let token = self.cipher.encrypt(&messages);
        let mut c = self.cache.conn();
        match self
            .replace
            .key(self.key(session))
            .arg(old_token)
            .arg(token)
            .arg(self.ttl_secs())
            .invoke_async::<i64>(&mut c)
            .await
        {
            Ok(1) => {}
            Ok(_) => {
                tracing::debug!(
                    %session,
                    "session history changed concurrently; dropped so the next reader rebuilds it"
                );
            }
            Err(e) => {
                let err = self.cache.failed("history_append", e);
                tracing::warn!(error = %err, "session history not updated");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fernet::Fernet;
    use hermes_config::Namespace;
    use hermes_telemetry::Metrics;
    use hermes_types::model::Role;

    fn key(k: &str) -> SecretString {
        SecretString::from(k.to_string())
    }

    fn conversation() -> Vec<ChatMessage> {
        vec![
            ChatMessage::text(Role::User, "Hola, ¿abren el domingo?"),
            ChatMessage::text(Role::Assistant, "Sí, de 10 a 14."),
        ]
    }

    #[test]
    fn an_empty_or_malformed_key_list_makes_no_cipher() {
        assert!(HistoryCipher::new(&[]).is_none());
        assert!(HistoryCipher::new(&[key(&Fernet::generate_key()), key("short")]).is_none());
    }

    #[test]
    fn histories_round_trip_and_are_not_plaintext() {
        let cipher = HistoryCipher::new(&[key(&Fernet::generate_key())]).unwrap();
        let token = cipher.encrypt(&conversation());
        assert!(!token.contains("domingo"));
        assert_eq!(cipher.decrypt(&token).unwrap(), conversation());
        assert!(cipher.decrypt(&cipher.encrypt(&[])).unwrap().is_empty());
    }

    #[test]
    fn old_keys_still_decrypt_after_rotation_and_unknown_keys_fail() {
        let old = Fernet::generate_key();
        let new = Fernet::generate_key();
        let before = HistoryCipher::new(&[key(&old)]).unwrap();
        let token = before.encrypt(&conversation());

        let rotated = HistoryCipher::new(&[key(&new), key(&old)]).unwrap();
        assert_eq!(rotated.decrypt(&token).unwrap(), conversation());
        // New entries are made with the new key only.
        let fresh = rotated.encrypt(&conversation());
        assert!(matches!(
            before.decrypt(&fresh),
            Err(HistoryError::Undecryptable)
        ));

        let stranger = HistoryCipher::new(&[key(&Fernet::generate_key())]).unwrap();
        assert!(matches!(
            stranger.decrypt(&token),
            Err(HistoryError::Undecryptable)
        ));
        assert!(matches!(
            stranger.decrypt("not a token at all"),
            Err(HistoryError::Undecryptable)
        ));
        assert!(matches!(
            stranger.decrypt(""),
            Err(HistoryError::Undecryptable)
        ));
    }

    #[test]
    fn a_token_holding_something_else_than_messages_is_an_error() {
        let k = Fernet::generate_key();
        let cipher = HistoryCipher::new(&[key(&k)]).unwrap();
        let token = Fernet::new(&k)
            .unwrap()
            .encrypt(br#"{"secret":"do not log me"}"#);
        let err = cipher.decrypt(&token).unwrap_err();
        assert!(matches!(err, HistoryError::Decode { .. }));
        assert!(!err.to_string().contains("do not log me"));
    }

    /// Made once with Python's `cryptography` 48.0.0 (not needed at test time):
    ///
    /// ```text
    /// python3 -c "
    /// import base64, json
    /// from cryptography.fernet import Fernet
    /// key = base64.urlsafe_b64encode(bytes(range(32))).decode()
    /// plain = json.dumps([{'role':'user','content':'Hola, ¿abren el domingo?'},
    ///                     {'role':'assistant','content':'Sí, de 10 a 14.'}],
    ///                    separators=(',',':'), ensure_ascii=False).encode()
    /// print(key)
    /// print(Fernet(key)._encrypt_from_parts(plain, 1700000000, bytes(16)).decode())"
    /// ```
    ///
    /// A fixed timestamp (2023-11-14) and IV make the command reproduce this exact token;
    /// a past timestamp also keeps Fernet's clock-skew check from rejecting it on a machine
    /// whose clock is behind the one that made it.
    const PYTHON_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const PYTHON_TOKEN: &str = "gAAAAABlU_EAAAAAAAAAAAAAAAAAAAAAAJjPYJQQGztNFRlJIRkrRgrU1SUtvzsZOTQGU0Z3S7nHtK2zmrcGV6dTHZ0KUM0Dz_PtfbnlmAmV_oVI5WfgbFAl2jFa-3BFlwz5lzaCi-HGXLXxebX7AAGdmZWv2jgGbYFQuer9dYcvAyGHsYHC0ZSNOcBRcgn4afiBuKMr_cflfRiLtp5JZIEeigwuV-TRvA==";

    #[test]
    fn a_token_made_by_python_cryptography_decrypts() {
        let cipher = HistoryCipher::new(&[key(&Fernet::generate_key()), key(PYTHON_KEY)]).unwrap();
        assert_eq!(cipher.decrypt(PYTHON_TOKEN).unwrap(), conversation());
    }

    fn redis_url() -> SecretString {
        SecretString::from(hermes_testkit_core::redis_url())
    }

    fn store(url: &SecretString, metrics: Metrics) -> HistoryStore {
        let ns = Namespace::parse(&format!("hist{:016x}", rand::random::<u64>())).unwrap();
        let cache = Cache::new(url, ns, metrics).unwrap();
        let cipher = HistoryCipher::new(&[key(&Fernet::generate_key())]).unwrap();
        HistoryStore::new(cache, cipher, Duration::from_secs(12 * 3600))
    }

    #[tokio::test]
    async fn the_redis_store_saves_loads_appends_and_clears() {
        let store = store(&redis_url(), Metrics::new());
        let scope = SessionId::new();
        let other = SessionId::new();

        assert_eq!(store.load(scope).await, None, "a miss");
        // Appending to a miss writes nothing: a partial history would pass for a whole one.
        store
            .append(scope, &[ChatMessage::text(Role::User, "lost")], 10)
            .await;
        assert_eq!(store.load(scope).await, None);

        store.save(scope, &conversation()).await;
        assert_eq!(store.load(scope).await, Some(conversation()));
        assert_eq!(store.load(other).await, None, "sessions are separate");

        let key = store.key(scope);
        assert_eq!(key, store.cache.key(format_args!("session:{scope}")));
        let mut c = store.cache.conn();
        let raw: String = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut c)
            .await
            .unwrap();
        assert!(raw.starts_with("gAAAAA"), "a Fernet token is stored");
        assert!(!raw.contains("domingo") && !raw.contains("assistant"));
        let ttl: i64 = redis::cmd("TTL")
            .arg(&key)
            .query_async(&mut c)
            .await
            .unwrap();
        assert!(ttl > 12 * 3600 - 60 && ttl <= 12 * 3600, "ttl {ttl}");

        let q = ChatMessage::text(Role::User, "¿Y el sábado?");
        let a = ChatMessage::text(Role::Assistant, "También.");
        store.append(scope, &[q.clone(), a.clone()], 3).await;
        let expected = vec![conversation()[1].clone(), q, a];
        assert_eq!(store.load(scope).await, Some(expected));

        // An entry no configured key opens reads as a miss, and append leaves it alone.
        redis::cmd("SET")
            .arg(&key)
            .arg("garbage")
            .query_async::<()>(&mut c)
            .await
            .unwrap();
        assert_eq!(store.load(scope).await, None);
        store.append(scope, &conversation(), 10).await;
        assert_eq!(store.load(scope).await, None);

        // A history that changed since it was read is dropped, not overwritten.
        store.save(scope, &conversation()).await;
        let replaced: i64 = store
            .replace
            .key(&key)
            .arg("a token read before another append")
            .arg(store.cipher.encrypt(&[]))
            .arg(60)
            .invoke_async(&mut c)
            .await
            .unwrap();
        assert_eq!(replaced, 0);
        assert_eq!(store.load(scope).await, None);
    }

    #[tokio::test]
    async fn redis_being_down_is_a_counted_miss() {
        let metrics = Metrics::new();
        // Nothing listens on port 1, so every call fails fast.
        let store = store(
            &SecretString::from("redis://127.0.0.1:1".to_string()),
            metrics.clone(),
        );
        let scope = SessionId::new();
        store.save(scope, &conversation()).await;
        assert_eq!(store.load(scope).await, None);
        for op in ["history_save", "history_load"] {
            assert_eq!(
                metrics.process.redis_errors.with_label_values(&[op]).get(),
                1,
                "{op}"
            );
        }
    }
}
