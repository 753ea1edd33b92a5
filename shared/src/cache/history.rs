//! Session history cache: Fernet-encrypted turns per channel scope in Redis.
