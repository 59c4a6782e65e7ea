//! One version: Cargo.toml's. The module's MODULE LIST version follows it
//! by build (tests/introspection.rs) and the Python package by its build
//! hook; every file whose format wants the version written out must say
//! the same, and these tests name each one that does not.
//! `python3 scripts/set-version.py X.Y.Z` writes them all.

mod support;

use std::path::Path;

use support::{load_library, Config, Encoding, Server};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn read(path: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// The version on the line after each line that names `package` in a
/// manifest or lock file (`name = "..."` in TOML, `"name": "...",` in
/// JSON), with the line's number.
fn versions_after_name(text: &str, package: &str) -> Vec<(usize, String)> {
    let toml_name = format!("name = \"{package}\"");
    let json_name = format!("\"name\": \"{package}\",");
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (at, pair) in lines.windows(2).enumerate() {
        let (name, version) = (pair[0].trim(), pair[1].trim());
        let value = if name == toml_name {
            version.strip_prefix("version = \"")
        } else if name == json_name {
            version.strip_prefix("\"version\": \"")
        } else {
            None
        };
        if let Some(value) = value {
            let end = value.find('"').unwrap_or(value.len());
            found.push((at + 2, value[..end].to_string()));
        }
    }
    found
}

#[test]
fn every_manifest_and_lock_file_says_cargo_tomls_version() {
    let places = [
        ("Cargo.lock", "redis-swl", 1),
        ("clients/rust/Cargo.toml", "redis-swl-client", 1),
        ("clients/rust/Cargo.lock", "redis-swl-client", 1),
        ("examples/axum/Cargo.lock", "redis-swl-client", 1),
        ("rls/Cargo.toml", "swl-rls", 1),
        ("rls/Cargo.lock", "swl-rls", 1),
        ("rls/Cargo.lock", "redis-swl-client", 1),
        ("clients/node/package.json", "redis-swl", 1),
        // The lock file's own entry and its root package's.
        ("clients/node/package-lock.json", "redis-swl", 2),
        ("examples/express/package-lock.json", "redis-swl", 1),
    ];
    let mut wrong = Vec::new();
    for (path, package, expected) in places {
        let found = versions_after_name(&read(path), package);
        assert_eq!(
            found.len(),
            expected,
            "{path}: {package}'s versions {found:?}"
        );
        for (line, version) in found {
            if version != VERSION {
                wrong.push(format!("{path}:{line}: {package} {version}"));
            }
        }
    }
    assert!(wrong.is_empty(), "not {VERSION}:\n{}", wrong.join("\n"));
}

#[test]
fn the_python_package_takes_its_version_from_cargo_toml() {
    let pyproject = read("clients/python/pyproject.toml");
    assert!(pyproject.contains("\ndynamic = [\"version\"]\n"));
    assert!(
        !pyproject.contains("\nversion = "),
        "pyproject.toml says a version"
    );
    assert!(read("clients/python/hatch_build.py").contains("\"Cargo.toml\""));
}

#[test]
fn the_function_library_replies_cargo_tomls_version() {
    let line = format!("local VERSION = '{VERSION}'");
    assert!(
        read("scripts/swl.lua").lines().any(|l| l == line),
        "scripts/swl.lua lacks {line}"
    );
    let server = Server::with(Config::without_module());
    load_library(&server, Encoding::Zset);
    let version: String = redis::cmd("FCALL_RO")
        .arg("swl_version")
        .arg(0)
        .query(&mut server.connect())
        .expect("FCALL_RO swl_version 0");
    assert_eq!(version, VERSION);
}

/// Release file names on the pages (`redis-swl-X.Y.Z-linux-...`,
/// `swl-X.Y.Z.lua`, `redis-swl-X.Y.Z.tgz`, ...) and the crate requirement
/// the Rust package's README gives, with the line of each.
fn versions_on_page(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, line) in text.lines().enumerate() {
        for prefix in ["redis-swl-", "swl-", "redis_swl-", "redis-swl-client-"] {
            for (start, _) in line.match_indices(prefix) {
                let preceded_by_name = line[..start]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                let rest = &line[start + prefix.len()..];
                let version: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let version = version.trim_end_matches('.');
                if !preceded_by_name && version.split('.').count() == 3 {
                    found.push((at + 1, version.to_string()));
                }
            }
        }
        if let Some((_, rest)) = line.split_once("redis-swl-client = { version = \"") {
            let requirement = &rest[..rest.find('"').unwrap_or(rest.len())];
            let (major_minor, _) = VERSION.rsplit_once('.').expect("X.Y.Z");
            // A 0.x crate's compatible versions share major and minor.
            let covers = if requirement == major_minor {
                VERSION.to_string()
            } else {
                requirement.to_string()
            };
            found.push((at + 1, covers));
        }
    }
    found
}

#[test]
fn the_pages_name_this_versions_release_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![
        "README.md".to_string(),
        "clients/python/README.md".to_string(),
        "clients/node/README.md".to_string(),
        "clients/rust/README.md".to_string(),
    ];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let name = entry.expect("a docs/ entry").file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    let mut named = 0;
    let mut wrong = Vec::new();
    for page in &pages {
        for (line, version) in versions_on_page(&read(page)) {
            named += 1;
            if version != VERSION {
                wrong.push(format!("{page}:{line}: {version}"));
            }
        }
    }
    assert!(wrong.is_empty(), "not {VERSION}:\n{}", wrong.join("\n"));
    // The installing page's release files, the Node guide's tarball, the
    // crate requirement.
    assert!(named >= 12, "the pages name {named} release files");
}

#[test]
fn the_changelog_has_a_section_for_this_version() {
    let changelog = read("CHANGELOG.md");
    assert!(changelog.contains("\n## [Unreleased]\n"));
    assert!(
        changelog.contains(&format!("\n## [{VERSION}] - ")),
        "CHANGELOG.md has no section for {VERSION}"
    );
}

#[test]
fn version_lines_are_found_where_they_are_written() {
    let lock = "[[package]]\nname = \"a\"\nversion = \"1.2.3\"\n";
    assert_eq!(versions_after_name(lock, "a"), [(3, "1.2.3".to_string())]);
    let json = "{\n  \"name\": \"a\",\n  \"version\": \"1.2.3\",\n}";
    assert_eq!(versions_after_name(json, "a"), [(3, "1.2.3".to_string())]);
    let page = "tar -xzf redis-swl-1.2.3-linux-x86_64-gnu.tar.gz; cat swl-1.2.3.lua\n\
                redis-swl 0.1.0 or later; my-swl-9.9.9.lua\n\
                redis-swl-client = { version = \"7.8\" }";
    assert_eq!(
        versions_on_page(page),
        [
            (1, "1.2.3".to_string()),
            (1, "1.2.3".to_string()),
            (3, "7.8".to_string())
        ]
    );
}
