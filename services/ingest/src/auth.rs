//! The operator key (`API_SERVER_KEY`), compared in constant time. Keys made by
//! `hermes api-keys` are resolved by [`crate::rest`], which checks both before a request's
//! body is read.

use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;

/// The configured key, if any (none only when bound to loopback).
#[derive(Clone)]
pub struct ApiKey(pub Option<SecretString>);

impl ApiKey {
    /// Is `key` (already stripped of `Bearer `) the operator key?
    pub fn is_operator_key(&self, key: &str) -> bool {
        match &self.0 {
            Some(expected) => bool::from(key.as_bytes().ct_eq(expected.expose_secret().as_bytes())),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_key_is_the_operators() {
        let key = ApiKey(Some(SecretString::from("0123456789abcdef")));
        assert!(key.is_operator_key("0123456789abcdef"));
        assert!(!key.is_operator_key("0123456789abcdeX"));
        assert!(!key.is_operator_key("0123456789abcdef0"));
        assert!(!key.is_operator_key(""));
        assert!(!ApiKey(None).is_operator_key("0123456789abcdef"));
    }
}
