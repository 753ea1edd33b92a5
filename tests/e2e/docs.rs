//! The documentation stays true to the tree: the map in `docs/architecture.md` names every
//! module of every crate, so a newcomer can find any behaviour from it.

use std::path::{Path, PathBuf};

/// The repository root (this crate lives in `tests/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every source file under `dir`, as a path relative to `base`, tests left out.
fn modules(dir: &Path, base: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                modules(&path, base, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            let rel = path.strip_prefix(base).unwrap_or(&path);
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn the_architecture_map_names_every_module() {
    let root = root();
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut missing = Vec::new();
    for family in ["services", "shared"] {
        let base = root.join(family);
        let mut found = Vec::new();
        for krate in std::fs::read_dir(&base).unwrap().flatten() {
            modules(&krate.path().join("src"), &base, &mut found);
        }
        assert!(!found.is_empty(), "no modules under {family}/");
        missing.extend(
            found
                .into_iter()
                .filter(|m| !map.contains(&format!("| `{m}` |")))
                .map(|m| format!("{family}/{m}")),
        );
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "docs/architecture.md (\"The map\") does not list: {missing:?}"
    );
}
