//! The documentation stays true to the tree: the map in `docs/architecture.md` names every
//! crate, every source file opens with a module doc saying what it holds, and every link or
//! citation into the docs names a heading that exists (docs/development.md, "Tests").

use std::path::{Path, PathBuf};

/// The repository root (this crate lives in `tests/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The crates under `services/` and `shared/`, as `services/ingest`, `shared/db`, ….
fn crates(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for family in ["services", "shared"] {
        for krate in std::fs::read_dir(root.join(family)).unwrap().flatten() {
            if krate.path().join("Cargo.toml").is_file() {
                out.push(format!("{family}/{}", krate.file_name().to_string_lossy()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_architecture_map_names_every_crate() {
    let root = root();
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let crates = crates(&root);
    assert!(crates.len() > 10, "found only {crates:?}");
    let missing: Vec<_> = crates
        .into_iter()
        .filter(|c| !map.contains(&format!("`{c}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md (\"The map\") does not name: {missing:?}"
    );
}

/// The map names crates only; each file says what it holds in its own first lines, which
/// a reader opening a folder sees first and which cannot drift from a list elsewhere.
#[test]
fn every_source_file_opens_with_its_purpose() {
    let root = root();
    let mut files = Vec::new();
    for krate in crates(&root) {
        sources(&root.join(krate), &mut files);
    }
    sources(&root.join("tests/e2e"), &mut files);
    assert!(files.len() > 100, "found only {} files", files.len());
    let mut bare: Vec<_> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            !first.starts_with("//!")
        })
        .map(|f| f.strip_prefix(&root).unwrap_or(f).display().to_string())
        .collect();
    bare.sort();
    assert!(
        bare.is_empty(),
        "these files do not open with a `//!` module doc saying what they hold: {bare:?}"
    );
}

/// GitHub's anchor of a heading: lower case, letters, digits, `-` and `_` kept, spaces as
/// `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code fences), a repeated heading's
/// with GitHub's `-1`, `-2` suffixes.
fn anchors(text: &str) -> std::collections::HashSet<String> {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut out = std::collections::HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        if fenced {
            continue;
        }
        let s = slug(heading.trim_start_matches('#'));
        let n = seen.entry(s.clone()).or_default();
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every source file under `dir` (any depth), `target` and `node_modules` left out.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | "node_modules" | ".git") {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Where `from` (a Markdown file or a source file) points into the docs: `(line, target
/// file, anchor)` of each `](file.md#anchor)` link, `docs/file.md#anchor` citation and
/// `docs/file.md, "Heading"` citation.
fn citations(root: &Path, from: &Path, text: &str) -> Vec<(usize, PathBuf, String)> {
    let mut out = Vec::new();
    let dir = from.parent().unwrap_or(root);
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            if let Some((file, anchor)) = rest[..end].split_once('#')
                && (file.is_empty() || file.ends_with(".md"))
                && !file.contains("://")
            {
                let target = if file.is_empty() {
                    from.to_path_buf()
                } else {
                    dir.join(file)
                };
                out.push((i + 1, target, anchor.to_string()));
            }
        }
        let mut rest = line;
        while let Some(at) = rest.find("docs/") {
            rest = &rest[at + 5..];
            let Some(md) = rest.find(".md") else { break };
            let file = &rest[..md];
            if file.is_empty() || !file.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                continue;
            }
            let after = rest[md + 3..].trim_start_matches('`');
            let target = root.join("docs").join(format!("{file}.md"));
            if let Some(anchor) = after.strip_prefix('#') {
                let anchor: String = anchor
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
                    .collect();
                out.push((i + 1, target, anchor));
            } else if let Some(quoted) = after.strip_prefix(", \"")
                && let Some(end) = quoted.find('"')
            {
                out.push((i + 1, target, slug(&quoted[..end])));
            }
        }
    }
    out
}

#[test]
fn every_link_and_citation_into_the_docs_names_a_heading_that_exists() {
    let root = root();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.push(root.join("README.md"));
    for family in ["services", "shared", "tests"] {
        sources(&root.join(family), &mut files);
    }
    // This file names the forms it checks in its own comments.
    files.retain(|f| !f.ends_with("tests/e2e/docs.rs"));
    let mut known = std::collections::HashMap::new();
    let mut broken = Vec::new();
    for from in &files {
        let text = std::fs::read_to_string(from).unwrap();
        let rel = from
            .strip_prefix(&root)
            .unwrap_or(from)
            .display()
            .to_string();
        if from.extension().is_some_and(|x| x == "rs") && text.contains("md §") {
            broken.push(format!(
                "{rel}: cites a section by number (§); cite its heading"
            ));
        }
        for (line, target, anchor) in citations(&root, from, &text) {
            let target = std::fs::canonicalize(&target).unwrap_or(target);
            let heads = known.entry(target.clone()).or_insert_with(|| {
                std::fs::read_to_string(&target)
                    .map(|t| anchors(&t))
                    .unwrap_or_default()
            });
            if !heads.contains(&anchor) {
                let name = target.file_name().unwrap_or_default().to_string_lossy();
                broken.push(format!("{rel}:{line}: no heading #{anchor} in {name}"));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        slug(" 2. Every state change travels with its message (the outbox)"),
        "2-every-state-change-travels-with-its-message-the-outbox"
    );
    assert_eq!(
        slug(" `hermes bench faults`: the fleet"),
        "hermes-bench-faults-the-fleet"
    );
    let a = anchors("# A\n```\n# not a heading\n```\n## B b\n## B b\n");
    assert!(a.contains("a") && a.contains("b-b") && a.contains("b-b-1"));
    assert!(!a.contains("not-a-heading"));
}
