//! The floors of the workspace's dependency requirements: regenerating `Cargo.lock` must
//! never go below what was tested, nor back to a version with a published advisory.

use std::path::PathBuf;

fn repo_file(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `1.2.3` (missing parts are 0).
fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text
        .trim_start_matches(['=', '^', '~'])
        .split('.')
        .map(|p| {
            p.parse::<u64>()
                .unwrap_or_else(|_| panic!("version {text:?}"))
        });
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// The floor of `name`'s requirement in `[workspace.dependencies]`.
fn floor(manifest: &str, name: &str) -> (u64, u64, u64) {
    let line = manifest
        .lines()
        .find(|l| l.starts_with(&format!("{name} = ")))
        .unwrap_or_else(|| panic!("{name} is a workspace dependency"));
    let quoted = line.split('"').nth(1).expect("a quoted version");
    version(quoted)
}

/// The locked versions of `name` (several majors may be locked at once).
fn locked(lock: &str, name: &str) -> Vec<(u64, u64, u64)> {
    let header = format!("name = \"{name}\"\nversion = \"");
    lock.match_indices(&header)
        .map(|(at, _)| {
            let rest = &lock[at + header.len()..];
            version(&rest[..rest.find('"').unwrap()])
        })
        .collect()
}

/// Compatible in Cargo's sense: same major, or same minor below 1.0.
fn compatible(a: (u64, u64, u64), b: (u64, u64, u64)) -> bool {
    a.0 == b.0 && (a.0 > 0 || a.1 == b.1)
}

/// The first versions past the RustSec advisories known to touch these crates.
const PAST_ADVISORIES: &[(&str, &str, &str)] = &[
    // RUSTSEC-2024-0336: `complete_io` could loop for ever on a closed connection.
    ("rustls", "0.23.5", "RUSTSEC-2024-0336"),
    // RUSTSEC-2026-0007: integer overflow in `BytesMut::reserve`.
    ("bytes", "1.11.1", "RUSTSEC-2026-0007"),
];

#[test]
fn dependency_floors_are_at_least_the_locked_and_the_patched_versions() {
    let manifest = repo_file("Cargo.toml");
    let lock = repo_file("Cargo.lock");
    for name in ["anyhow", "bytes", "rand", "rustls", "tokio-postgres"] {
        let floor = floor(&manifest, name);
        let locked = locked(&lock, name)
            .into_iter()
            .find(|v| compatible(*v, floor))
            .unwrap_or_else(|| panic!("{name} {floor:?} is locked"));
        assert!(
            floor >= locked,
            "{name}: the floor {floor:?} is below the locked {locked:?}; a regenerated lock could go back"
        );
    }
    for (name, patched, advisory) in PAST_ADVISORIES {
        let floor = floor(&manifest, name);
        assert!(
            floor >= version(patched),
            "{name}: the floor {floor:?} allows versions affected by {advisory} (fixed in {patched})"
        );
    }
}
