//! Keys of the REST channel. Only a SHA-256 of each key is stored; the key itself is shown
//! once, at creation. A key may carry the callback URL its runs' answers are POSTed to.

use hermes_types::ids::ApiKeyId;
use rand::RngCore;
use sha2::{Digest, Sha256};

use super::{Client, DbError};

/// A key as stored (without the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub name: String,
    pub prefix: String,
    pub callback_url: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub revoked: bool,
}

/// The hash a key is stored and looked up by.
pub fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// A new random key: `hk_` and 40 hex characters (160 bits).
pub fn generate() -> String {
    let mut bytes = [0u8; 20];
    rand::rng().fill_bytes(&mut bytes);
    format!("hk_{}", hex::encode(bytes))
}

/// Store a new key; returns the record and the key (to show once).
pub async fn create(
    client: &Client,
    name: &str,
    callback_url: Option<&str>,
) -> Result<(ApiKey, String), DbError> {
    let key = generate();
    let id = ApiKeyId::new();
    let prefix = key[..7].to_string();
    let row = client
        .query_one(
            "INSERT INTO api_keys (id, name, key_hash, key_prefix, callback_url) VALUES ($1, $2, $3, $4, $5)
             RETURNING created_at",
            &[&id, &name, &hash(&key), &prefix, &callback_url],
        )
        .await?;
    let record = ApiKey {
        id,
        name: name.to_string(),
        prefix,
        callback_url: callback_url.map(str::to_string),
        created_at: row.get(0),
        revoked: false,
    };
    Ok((record, key))
}

fn from_row(r: &tokio_postgres::Row) -> ApiKey {
    ApiKey {
        id: r.get(0),
        name: r.get(1),
        prefix: r.get(2),
        callback_url: r.get(3),
        created_at: r.get(4),
        revoked: r
            .get::<_, Option<chrono::DateTime<chrono::Utc>>>(5)
            .is_some(),
    }
}

/// The live key whose hash matches `key`.
pub async fn find(client: &Client, key: &str) -> Result<Option<ApiKey>, DbError> {
    let row = client
        .query_opt(
            "SELECT id, name, key_prefix, callback_url, created_at, revoked_at FROM api_keys
             WHERE key_hash = $1 AND revoked_at IS NULL",
            &[&hash(key)],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

pub async fn list(client: &Client) -> Result<Vec<ApiKey>, DbError> {
    let rows = client
        .query(
            "SELECT id, name, key_prefix, callback_url, created_at, revoked_at FROM api_keys ORDER BY created_at",
            &[],
        )
        .await?;
    Ok(rows.iter().map(from_row).collect())
}

/// Revoke a key; false when no live key has that id.
pub async fn revoke(client: &Client, id: ApiKeyId) -> Result<bool, DbError> {
    let n = client
        .execute(
            "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
            &[&id],
        )
        .await?;
    Ok(n == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_hashed() {
        let (a, b) = (generate(), generate());
        assert_ne!(a, b);
        assert!(a.starts_with("hk_") && a.len() == 43);
        assert_eq!(hash(&a).len(), 64);
        assert_ne!(hash(&a), hash(&b));
    }
}
