//! Fernet key rings: encrypt with the newest key, decrypt with any configured one, so keys
//! rotate without losing what the old key sealed. Tokens interoperate with Python's
//! `cryptography.fernet`. Used for the session-history cache and for secrets at rest.

use std::fmt;

use fernet::{Fernet, MultiFernet};
use secrecy::{ExposeSecret, SecretString};

/// Fernet keys, newest first.
#[derive(Clone)]
pub struct KeyRing {
    keys: MultiFernet,
    count: usize,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing")
            .field("keys", &self.count)
            .finish_non_exhaustive()
    }
}

impl KeyRing {
    /// A ring over `keys`, newest first. None when the list is empty or a key is not a
    /// Fernet key: configuration refuses malformed keys at start, so silently skipping one
    /// here would only hide a bug.
    pub fn new(keys: &[SecretString]) -> Option<Self> {
        if keys.is_empty() {
            return None;
        }
        let fernets = keys
            .iter()
            .map(|k| Fernet::new(k.expose_secret()))
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            count: fernets.len(),
            keys: MultiFernet::new(fernets),
        })
    }

    /// The Fernet token of `plain`, made with the newest key.
    pub fn seal(&self, plain: &[u8]) -> String {
        self.keys.encrypt(plain)
    }

    /// What `token` holds, trying every key; None when no key opens it.
    pub fn open(&self, token: &str) -> Option<Vec<u8>> {
        self.keys.decrypt(token).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_with_the_newest_and_opens_with_any() {
        let old = SecretString::from(Fernet::generate_key());
        let new = SecretString::from(Fernet::generate_key());
        let before = KeyRing::new(std::slice::from_ref(&old)).unwrap();
        let token = before.seal(b"whsec_1");
        let after = KeyRing::new(&[new.clone(), old]).unwrap();
        assert_eq!(after.open(&token).unwrap(), b"whsec_1");
        let only_new = KeyRing::new(&[new]).unwrap();
        assert!(only_new.open(&token).is_none());
        assert!(KeyRing::new(&[]).is_none());
        assert!(KeyRing::new(&[SecretString::from("short".to_string())]).is_none());
        assert!(!format!("{after:?}").contains('='));
    }
}
