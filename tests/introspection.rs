//! What the server tells about the module: INFO counters, COMMAND DOCS,
//! key specs, ACL categories and MODULE LIST's version.

mod support;

use redis::{Connection, Value};
use support::{check, Config, Server};

fn info_fields(con: &mut Connection) -> Vec<(String, i64)> {
    let info: String = redis::cmd("INFO").arg("swl").query(con).unwrap();
    info.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_string(), value.trim().parse().unwrap_or(-1)))
        .collect()
}

/// checks, admitted, denied, peeks, refunds, errors.
fn counters([checks, admitted, denied, peeks, refunds, errors]: [i64; 6]) -> Vec<(String, i64)> {
    [
        ("checks", checks),
        ("admitted", admitted),
        ("denied", denied),
        ("peeks", peeks),
        ("refunds", refunds),
        ("errors", errors),
    ]
    .map(|(name, value)| (format!("swl_{name}"), value))
    .to_vec()
}

#[test]
fn info_counts_checks_outcomes_peeks_refunds_and_errors() {
    let server = Server::start();
    let mut con = server.connect();
    assert_eq!(info_fields(&mut con), counters([0; 6]));
    check(&mut con, "k", &["1000", "2", "1"]);
    check(&mut con, "k", &["1000", "2", "2"]);
    check(&mut con, "k", &["1000", "2", "3"]);
    let _: Vec<i64> = redis::cmd("SWL.PEEK")
        .arg(&["k", "1000", "2", "4"])
        .query(&mut con)
        .unwrap();
    assert_eq!(info_fields(&mut con), counters([3, 2, 1, 1, 0, 0]));
    let _: Vec<i64> = redis::cmd("SWL.REFUND")
        .arg(&["k", "1000", "2", "4"])
        .query(&mut con)
        .unwrap();
    assert_eq!(info_fields(&mut con), counters([3, 2, 1, 1, 1, 0]));
    let bad: redis::RedisResult<Vec<i64>> = redis::cmd("SWL.CHECK")
        .arg(&["k", "0", "2", "4"])
        .query(&mut con);
    assert!(bad.is_err());
    let _: () = redis::cmd("SET").arg("s").arg("v").query(&mut con).unwrap();
    let bad: redis::RedisResult<Vec<i64>> = redis::cmd("SWL.PEEK")
        .arg(&["s", "1", "2", "4"])
        .query(&mut con);
    assert!(bad.is_err());
    let bad: redis::RedisResult<Vec<i64>> = redis::cmd("SWL.REFUND")
        .arg(&["k", "1", "2", "4", "PENALIZE"])
        .query(&mut con);
    assert!(bad.is_err());
    let bad: redis::RedisResult<Vec<i64>> = redis::cmd("SWL.ENTRIES").arg("s").query(&mut con);
    assert!(bad.is_err());
    assert_eq!(info_fields(&mut con), counters([3, 2, 1, 1, 1, 4]));
    // The section is part of INFO modules and INFO everything too.
    for section in ["modules", "everything"] {
        let info: String = redis::cmd("INFO").arg(section).query(&mut con).unwrap();
        assert!(
            info.contains("# swl\r\nswl_checks:3\r\nswl_admitted:2\r\n"),
            "INFO {section}"
        );
    }
}

/// A RESP2 map (flat array of names and values) as pairs.
fn pairs(value: &Value) -> Vec<(String, &Value)> {
    let Value::Array(items) = value else {
        panic!("expected an array, got {value:?}");
    };
    items
        .chunks(2)
        .map(|pair| (text(&pair[0]), &pair[1]))
        .collect()
}

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        other => panic!("expected text, got {other:?}"),
    }
}

fn field<'a>(map: &'a Value, name: &str) -> &'a Value {
    pairs(map)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no field {name} in {map:?}"))
}

/// Each argument as (name, type, token or "", flags joined by ",").
fn arguments(doc: &Value) -> Vec<(String, String, String, String)> {
    let Value::Array(args) = field(doc, "arguments") else {
        panic!("arguments is not an array");
    };
    args.iter()
        .map(|arg| {
            let get = |name: &str| {
                pairs(arg)
                    .into_iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| match v {
                        Value::Array(flags) => flags.iter().map(text).collect::<Vec<_>>().join(","),
                        other => text(other),
                    })
                    .unwrap_or_default()
            };
            (get("name"), get("type"), get("token"), get("flags"))
        })
        .collect()
}

/// The field `name` of the argument called `argument`, if both exist.
fn argument_field<'a>(doc: &'a Value, argument: &str, name: &str) -> Option<&'a Value> {
    let Value::Array(args) = field(doc, "arguments") else {
        panic!("arguments is not an array");
    };
    let arg = args
        .iter()
        .find(|arg| text(field(arg, "name")) == argument)?;
    pairs(arg)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
}

fn docs(con: &mut Connection, command: &str) -> Value {
    let reply: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg(command)
        .query(con)
        .unwrap();
    let entries = pairs(&reply);
    assert_eq!(entries.len(), 1, "{reply:?}");
    assert_eq!(entries[0].0, command);
    entries[0].1.clone()
}

fn owned(rows: &[(&str, &str, &str, &str)]) -> Vec<(String, String, String, String)> {
    rows.iter()
        .map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), d.to_string()))
        .collect()
}

#[test]
fn command_docs_describe_every_command() {
    let server = Server::start();
    let mut con = server.connect();
    let check_doc = docs(&mut con, "swl.check");
    assert_eq!(
        text(field(&check_doc, "summary")),
        "Checks a request against sliding-window-log rate limits and records it if admitted."
    );
    assert_eq!(
        text(field(&check_doc, "complexity")),
        "O(W log(N) + M + C): W windows, N entries in the log, M entries trimmed, C the cost recorded"
    );
    assert_eq!(text(field(&check_doc, "since")), "0.1.0");
    assert_eq!(text(field(&check_doc, "module")), "swl");
    assert_eq!(
        arguments(&check_doc),
        owned(&[
            ("key", "key", "", ""),
            ("window_ms", "integer", "", ""),
            ("limit", "integer", "", ""),
            ("now", "oneof", "", ""),
            ("cost", "integer", "COST", "optional"),
            ("window", "block", "WINDOW", "optional,multiple"),
            ("over_limit", "oneof", "", "optional"),
        ])
    );
    let Value::Array(check_arguments) = field(&check_doc, "arguments") else {
        panic!("arguments is not an array");
    };
    let over_limit = &check_arguments[6];
    assert_eq!(
        arguments(over_limit),
        owned(&[
            ("penalize", "pure-token", "PENALIZE", ""),
            ("force", "pure-token", "FORCE", ""),
        ])
    );
    let force = argument_field(over_limit, "force", "since");
    assert_eq!(force.map(text).as_deref(), Some("0.5.0"));
    let peek_doc = docs(&mut con, "swl.peek");
    assert_eq!(
        text(field(&peek_doc, "summary")),
        "Tells what SWL.CHECK would reply now, without changing anything."
    );
    assert_eq!(
        text(field(&peek_doc, "complexity")),
        "O(W log(N)): W windows, N entries in the log"
    );
    let mut peek_arguments = arguments(&check_doc)[..6].to_vec();
    peek_arguments.extend(owned(&[("oldest", "pure-token", "OLDEST", "optional")]));
    assert_eq!(arguments(&peek_doc), peek_arguments);
    let oldest = argument_field(&peek_doc, "oldest", "since");
    assert_eq!(oldest.map(text).as_deref(), Some("0.3.0"));
    let refund_doc = docs(&mut con, "swl.refund");
    assert_eq!(
        text(field(&refund_doc, "summary")),
        "Gives back up to COST of the newest recorded units and replies what SWL.PEEK replies then."
    );
    assert_eq!(
        text(field(&refund_doc, "complexity")),
        "O(W log(N) + M + C): W windows, N entries in the log, M entries trimmed, C the cost given back"
    );
    assert_eq!(text(field(&refund_doc, "since")), "0.2.0");
    assert_eq!(arguments(&refund_doc), arguments(&check_doc)[..6]);
    let entries_doc = docs(&mut con, "swl.entries");
    assert_eq!(
        text(field(&entries_doc, "summary")),
        "Lists the times of a log's entries, oldest first."
    );
    assert_eq!(
        text(field(&entries_doc, "complexity")),
        "O(N): N entries in the log"
    );
    assert_eq!(arguments(&entries_doc), owned(&[("key", "key", "", "")]));
}

#[test]
fn module_list_shows_the_crate_version() {
    let server = Server::start();
    let mut con = server.connect();
    let modules: Vec<Value> = redis::cmd("MODULE").arg("LIST").query(&mut con).unwrap();
    let version = env!("CARGO_PKG_VERSION")
        .split('.')
        .map(|part| part.parse::<i64>().unwrap())
        .fold(0, |encoded, part| encoded * 100 + part);
    assert_eq!(text(field(&modules[0], "name")), "swl");
    assert_eq!(field(&modules[0], "ver"), &Value::Int(version));
}

#[test]
fn key_specs_say_which_commands_write_and_which_read() {
    let server = Server::start();
    let mut con = server.connect();
    for (command, flags, arity) in [
        ("swl.check", "RW,access,update", -5),
        ("swl.refund", "RW,access,delete", -5),
        ("swl.peek", "RO,access", -5),
        ("swl.entries", "RO,access", 2),
    ] {
        let reply: Value = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(command)
            .query(&mut con)
            .unwrap();
        let Value::Array(commands) = &reply else {
            panic!("{reply:?}")
        };
        let Value::Array(info) = &commands[0] else {
            panic!("{reply:?}")
        };
        assert_eq!(text(&info[0]), command);
        assert_eq!(info[1], Value::Int(arity));
        // first key, last key, step: the one key at position 1.
        assert_eq!(info[3..6], [Value::Int(1), Value::Int(1), Value::Int(1)]);
        let Value::Array(specs) = &info[8] else {
            panic!("{reply:?}")
        };
        let Value::Array(spec_flags) = field(&specs[0], "flags") else {
            panic!("{reply:?}")
        };
        assert_eq!(
            spec_flags.iter().map(text).collect::<Vec<_>>().join(","),
            flags,
            "{command}"
        );
    }
}

#[test]
fn loading_refuses_unknown_arguments_and_takes_the_encoding_as_a_config() {
    let server = Server::with(Config::without_module().arg("enable-module-command", "yes"));
    let mut con = server.connect();
    let module = support::module_path().to_string_lossy().into_owned();
    let refused: redis::RedisResult<()> = redis::cmd("MODULE")
        .arg("LOAD")
        .arg(&module)
        .arg("bogus")
        .query(&mut con);
    assert!(refused.is_err());
    assert!(
        server.log().contains(
            "unknown module argument 'bogus': the module takes no arguments; set swl.encoding"
        ),
        "{}",
        server.log()
    );
    let loaded: String = redis::cmd("MODULE")
        .arg("LOADEX")
        .arg(&module)
        .arg(&["CONFIG", "swl.encoding", "compact"])
        .query(&mut con)
        .unwrap();
    assert_eq!(loaded, "OK");
    assert_eq!(support::encoding_setting(&mut con), "compact");
}

/// Redis 7.2 and later put module commands in ACL categories, 7.4 and
/// later in one of the module's own; 7.0 cannot, and there the commands
/// are granted by name.
#[test]
fn acl_categories_where_the_server_has_them_and_names_everywhere() {
    let server = Server::start();
    let mut con = server.connect();
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    let version: Vec<u32> = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .map(|v| v.trim().split('.').filter_map(|n| n.parse().ok()).collect())
        .unwrap();
    let has_categories = version >= vec![7, 2];
    let in_category = |con: &mut Connection, category: &str, command: &str| -> bool {
        let commands: Vec<String> = redis::cmd("ACL")
            .arg("CAT")
            .arg(category)
            .query(con)
            .unwrap();
        commands.iter().any(|c| c == command)
    };
    assert_eq!(in_category(&mut con, "write", "swl.check"), has_categories);
    assert_eq!(in_category(&mut con, "write", "swl.refund"), has_categories);
    assert_eq!(in_category(&mut con, "read", "swl.peek"), has_categories);
    assert_eq!(in_category(&mut con, "read", "swl.entries"), has_categories);
    // A category of the module's own, where the server can add one (7.4+).
    let own: redis::RedisResult<Vec<String>> =
        redis::cmd("ACL").arg("CAT").arg("swl").query(&mut con);
    if version >= vec![7, 4] {
        let mut own = own.unwrap();
        own.sort();
        assert_eq!(own, ["swl.check", "swl.entries", "swl.peek", "swl.refund"]);
    } else {
        assert!(own.is_err(), "no @swl category before 7.4: {own:?}");
    }
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "named",
            "on",
            "nopass",
            "~*",
            "+swl.check",
            "+swl.peek",
        ])
        .query(&mut con)
        .unwrap();
    let mut named = server.connect();
    let _: () = redis::cmd("AUTH")
        .arg(&["named", "x"])
        .query(&mut named)
        .unwrap();
    let reply: Vec<i64> = redis::cmd("SWL.CHECK")
        .arg(&["k", "1000", "1", "5"])
        .query(&mut named)
        .unwrap();
    assert_eq!(reply, [1, 1, 0, -1, 1000, 1000]);
}
