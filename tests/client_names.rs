//! One name for each thing in every client: the public names of each
//! client's core, read from its source, against clients/spec/names.md.
//! A name a client adds, drops or spells as another thing fails here until
//! the table says so.

use std::collections::BTreeSet;
use std::path::Path;

fn read(path: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// The text from the line starting with `start` to the first line after it
/// starting with `end`.
fn section<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text.find(start).unwrap_or_else(|| panic!("no {start:?}"));
    let rest = &text[from..];
    let to = rest[1..].find(end).map_or(rest.len(), |at| at + 1);
    &rest[..to]
}

/// The identifier at the start of `line` after `prefix`, if any.
fn name_after<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(prefix)?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

fn python() -> BTreeSet<String> {
    let protocol = read("clients/python/src/redis_swl/_protocol.py");
    let client = read("clients/python/src/redis_swl/client.py");
    let mut names = BTreeSet::new();
    let commands = section(&protocol, "class Commands", "\nclass ");
    let sync = section(&client, "class SWL", "\nclass ");
    for line in commands.lines().chain(sync.lines()) {
        let found = name_after(line, "    def ").or_else(|| {
            name_after(line, "        self.")
                .filter(|_| line.contains(" = ") && !line.contains(':'))
        });
        if let Some(name) = found.filter(|n| !n.starts_with('_')) {
            names.insert(name.to_string());
        }
    }
    names
}

fn node() -> BTreeSet<String> {
    let types = read("clients/node/index.d.ts");
    let class = section(&types, "export declare class SWL", "\n}");
    class
        .lines()
        .filter_map(|line| {
            let line = line.strip_prefix("  ")?;
            let line = line.strip_prefix("readonly ").unwrap_or(line);
            name_after(line, "")
        })
        .filter(|name| *name != "constructor")
        .map(str::to_string)
        .collect()
}

fn rust() -> BTreeSet<String> {
    let client = read("clients/rust/src/client.rs");
    let mut names = BTreeSet::new();
    let mut in_swl = false;
    for line in client.lines() {
        if line.starts_with("impl") {
            in_swl = line.contains(" Swl<C>");
        }
        if !in_swl {
            continue;
        }
        let found =
            name_after(line, "    pub async fn ").or_else(|| name_after(line, "    pub fn "));
        if let Some(name) = found.filter(|n| *n != "new") {
            names.insert(name.to_string());
        }
    }
    names
}

fn go() -> BTreeSet<String> {
    let client = read("clients/go/client.go");
    let mut names = BTreeSet::new();
    for line in client.lines() {
        if let Some(name) = name_after(line, "func (c *Client) ") {
            if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                names.insert(name.to_string());
            }
        }
        // The client's options: func WithX(...) Option.
        if let Some(name) = name_after(line, "func With") {
            if line.ends_with(") Option {") {
                names.insert(format!("With{name}"));
            }
        }
    }
    names
}

/// One name however a language spells it: load_library, loadLibrary and
/// LoadLibrary are all "loadlibrary".
fn folded(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

#[test]
fn every_client_names_each_thing_as_the_table_does() {
    let table = read("clients/spec/names.md");
    let rows: Vec<Vec<String>> = table
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| what |"))
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().trim_matches('`').to_string())
                .collect()
        })
        .collect();
    assert!(rows.len() >= 10, "the table has {} rows", rows.len());
    let found = [
        ("Python", python()),
        ("Node", node()),
        ("Rust", rust()),
        ("Go", go()),
    ];
    let mut problems = Vec::new();
    for (column, (language, names)) in found.iter().enumerate() {
        let listed: BTreeSet<String> = rows
            .iter()
            .map(|row| row[column + 1].clone())
            .filter(|name| name != "-")
            .collect();
        for name in names.difference(&listed) {
            problems.push(format!(
                "{language} has {name}, which the table does not list"
            ));
        }
        for name in listed.difference(names) {
            problems.push(format!(
                "the table gives {language} {name}, which it does not have"
            ));
        }
    }
    for row in &rows {
        let spellings: BTreeSet<String> = row[1..5]
            .iter()
            .filter(|name| name.as_str() != "-")
            .map(|name| folded(name))
            .collect();
        let reason = row.get(5).map_or("", String::as_str);
        if (spellings.len() > 1 || row[1..5].contains(&"-".to_string())) && reason.is_empty() {
            problems.push(format!("{}: different names and no reason", row[0]));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
