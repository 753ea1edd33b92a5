//! The servers tests use: the variable when set (and not blank), else the local default that
//! `scripts/ensure-servers` starts.

/// `name` from the environment, or `default` when unset or blank.
pub fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// The PostgreSQL server tests use (`DATABASE_URL`; any database: tests switch names).
pub fn pg_base() -> String {
    env_or(
        "DATABASE_URL",
        "postgres://postgres:postgres@127.0.0.1:5432/postgres",
    )
}

/// The Redis tests use (`REDIS_URL`).
pub fn redis_url() -> String {
    env_or("REDIS_URL", "redis://127.0.0.1:6379")
}

/// The RabbitMQ broker tests use (`AMQP_URL`).
pub fn amqp_url() -> String {
    env_or("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
}

#[cfg(test)]
mod tests {
    use super::env_or;

    #[test]
    fn a_blank_or_unset_variable_means_the_default() {
        assert_eq!(env_or("HERMES_TESTKIT_CORE_UNSET_VARIABLE", "d"), "d");
        assert_eq!(env_or("PATH", "d"), std::env::var("PATH").unwrap());
    }
}
