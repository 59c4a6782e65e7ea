//! Restarts lose nothing: with AOF (also after a rewrite) and with RDB, every
//! key comes back with the same entries and absolute expiry, and a check
//! after the restart replies what it would have replied before.

mod support;

use std::time::{Duration, Instant};

use redis::Connection;
use support::{
    check, contents, expire_time, for_each_encoding, Config, Contents, Encoding, Server,
};

type State = Vec<(Vec<u8>, Contents, i64)>;

fn state(con: &mut Connection) -> State {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let log = contents(con, &key);
            let expiry = expire_time(con, &key);
            (key, log, expiry)
        })
        .collect()
}

/// Checks on many keys: server clock, explicit times, COST, windows,
/// penalties, denials, and refunds. Windows are long, so nothing expires
/// meanwhile; a check follows each refund on its key, so none is left
/// empty.
fn workload(con: &mut Connection) {
    for i in 0..400u64 {
        let key = format!("rl:{}", i % 23);
        let now = (1_000_000 + i * 37).to_string();
        if i % 3 == 0 {
            let mut refund = |args: &[&str]| -> Vec<i64> {
                redis::cmd("SWL.REFUND")
                    .arg(&key)
                    .arg(args)
                    .query(con)
                    .unwrap()
            };
            match i % 2 {
                0 => refund(&["3600000", "5", "*"]),
                _ => refund(&["3600000", "8", &now, "COST", "2"]),
            };
        }
        match i % 5 {
            0 => check(con, &key, &["3600000", "5", "*"]),
            1 => check(con, &key, &["3600000", "8", &now, "COST", "2"]),
            2 => check(
                con,
                &key,
                &["3600000", "6", "*", "WINDOW", "7200000", "9", "PENALIZE"],
            ),
            3 => check(con, &key, &["3600000", "3", &now]),
            _ => check(con, &key, &["3600000", "4", "*", "COST", "3"]),
        };
    }
}

/// What a check on each key would reply now, without changing anything.
fn peeks(con: &mut Connection) -> Vec<Vec<i64>> {
    (0..23)
        .map(|k| {
            redis::cmd("SWL.PEEK")
                .arg(format!("rl:{k}"))
                .arg(&["3600000", "6", "1001000", "WINDOW", "7200000", "9"])
                .query(con)
                .unwrap()
        })
        .collect()
}

fn checks(con: &mut Connection) -> Vec<Vec<i64>> {
    (0..23)
        .map(|k| {
            redis::cmd("SWL.CHECK")
                .arg(format!("rl:{k}"))
                .arg(&["3600000", "6", "1001000", "WINDOW", "7200000", "9"])
                .query(con)
                .unwrap()
        })
        .collect()
}

fn assert_restart_keeps_everything(server: &mut Server) {
    let mut con = server.connect();
    let before = state(&mut con);
    assert_eq!(before.len(), 23);
    let would_reply = peeks(&mut con);
    server.restart();
    let mut con = server.connect();
    assert_eq!(state(&mut con), before);
    assert_eq!(checks(&mut con), would_reply);
}

fn wait_for_rewrite(con: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(con).unwrap();
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "AOF rewrite did not finish:\n{info}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A server with the module that logs every write to its AOF at once.
fn aof_config(encoding: Encoding) -> Config {
    encoding
        .config()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
}

#[test]
fn aof_restart_keeps_every_entry_and_expiry() {
    for_each_encoding(|encoding| {
        let mut server = Server::with(aof_config(encoding));
        workload(&mut server.connect());
        assert_restart_keeps_everything(&mut server);
    });
}

#[test]
fn aof_rewrite_then_restart_keeps_every_entry_and_expiry() {
    for_each_encoding(|encoding| {
        let mut server = Server::with(aof_config(encoding));
        let mut con = server.connect();
        workload(&mut con);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut con).unwrap();
        wait_for_rewrite(&mut con);
        // Writes after the rewrite land in the new incremental file.
        check(&mut con, "rl:0", &["3600000", "50", "*"]);
        assert_restart_keeps_everything(&mut server);
    });
}

#[test]
fn rdb_save_then_restart_keeps_every_entry_and_expiry() {
    for_each_encoding(|encoding| {
        let mut server = Server::with(encoding.config());
        let mut con = server.connect();
        workload(&mut con);
        let _: String = redis::cmd("SAVE").query(&mut con).unwrap();
        assert_restart_keeps_everything(&mut server);
    });
}
