//! Operator console logins (docs/console.md): a random token in the operator's cookie, kept
//! here only as its SHA-256, with the key that logged in, the login's CSRF token and its end.

use chrono::{DateTime, Utc};
use hermes_types::ids::ApiKeyId;
use rand::RngCore;
use sha2::{Digest, Sha256};

use super::{Client, DbError};

/// A login as the console sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Login {
    /// The key that logged in (`None`: `API_SERVER_KEY`).
    pub api_key_id: Option<ApiKeyId>,
    /// What every state-changing form of this login carries.
    pub csrf: String,
    pub expires_at: DateTime<Utc>,
}

/// A new login: the cookie's token (shown once, to the browser) and the login.
pub struct Started {
    pub token: String,
    pub login: Login,
}

/// 32 random bytes as hex.
fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Log `key` in until `expires_at`; expired logins are removed on the way.
pub async fn start(
    client: &Client,
    key: Option<ApiKeyId>,
    expires_at: DateTime<Utc>,
) -> Result<Started, DbError> {
    let token = random_hex();
    let login = Login {
        api_key_id: key,
        csrf: random_hex(),
        expires_at,
    };
    client
        .execute("DELETE FROM console_sessions WHERE expires_at < now()", &[])
        .await?;
    client
        .execute(
            &crate::stmt(
                client,
                "INSERT INTO console_sessions (token_hash, api_key_id, csrf, expires_at)
                 VALUES ($1, $2, $3, $4)",
            )
            .await?,
            &[&hash(&token), &key, &login.csrf, &expires_at],
        )
        .await?;
    Ok(Started { token, login })
}

/// The live login of cookie token `token` (`None`: unknown, expired, or its key revoked).
pub async fn find(client: &Client, token: &str) -> Result<Option<Login>, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "SELECT s.api_key_id, s.csrf, s.expires_at FROM console_sessions s
                 LEFT JOIN api_keys k ON k.id = s.api_key_id
                 WHERE s.token_hash = $1 AND s.expires_at > now()
                   AND (s.api_key_id IS NULL OR k.revoked_at IS NULL)",
            )
            .await?,
            &[&hash(token)],
        )
        .await?;
    Ok(row.map(|r| Login {
        api_key_id: r.get(0),
        csrf: r.get(1),
        expires_at: r.get(2),
    }))
}

/// End the login of cookie token `token`.
pub async fn end(client: &Client, token: &str) -> Result<(), DbError> {
    client
        .execute(
            "DELETE FROM console_sessions WHERE token_hash = $1",
            &[&hash(token)],
        )
        .await?;
    Ok(())
}

/// Write what an operator did from the console (`kind`, with who and why in `data`) to the
/// activity log.
pub async fn record_action(
    client: &Client,
    kind: &str,
    data: &serde_json::Value,
) -> Result<(), DbError> {
    client
        .execute(
            "INSERT INTO activity_events (kind, data) VALUES ($1, $2)",
            &[&kind, data],
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::ScratchDb;

    #[tokio::test]
    async fn a_login_is_found_by_its_token_until_it_ends_or_expires() {
        ScratchDb::with(|db| async move {
            let client = db.get().await.unwrap();
            let later = Utc::now() + chrono::TimeDelta::hours(1);
            let started = start(&client, None, later).await.unwrap();
            assert_eq!(started.token.len(), 64);
            let found = find(&client, &started.token).await.unwrap().unwrap();
            assert_eq!(found.csrf, started.login.csrf);
            assert_eq!(find(&client, "not-a-token").await.unwrap(), None);
            let stored: i64 = client
                .query_one(
                    "SELECT count(*) FROM console_sessions WHERE token_hash = $1::text::bytea",
                    &[&started.token],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(stored, 0, "the token itself is never stored");
            end(&client, &started.token).await.unwrap();
            assert_eq!(find(&client, &started.token).await.unwrap(), None);
            let gone = start(&client, None, Utc::now() - chrono::TimeDelta::seconds(1))
                .await
                .unwrap();
            assert_eq!(find(&client, &gone.token).await.unwrap(), None);
        })
        .await
    }
}
