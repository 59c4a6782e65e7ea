//! ACL key patterns and command permissions apply to the commands like to
//! any Redis command, read-only key access included.

mod support;

use support::{check, check_result, for_each_encoding, Server};

fn connect_as(server: &Server, user: &str) -> redis::Connection {
    redis::Client::open(format!(
        "redis://{user}:secret@127.0.0.1:{}/",
        server.port()
    ))
    .and_then(|client| client.get_connection())
    .expect("connect as ACL user")
}

fn try_check(con: &mut redis::Connection, key: &str) -> Result<Vec<i64>, String> {
    check_result(con, key, &["60000", "5", "1000"])
}

#[test]
fn key_patterns_limit_which_logs_a_user_may_check() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut admin = server.connect();
        let setuser = |con: &mut redis::Connection, rules: &[&str]| {
            let _: () = redis::cmd("ACL")
                .arg("SETUSER")
                .arg(rules)
                .query(con)
                .unwrap();
        };
        setuser(
            &mut admin,
            &["limiter", "on", ">secret", "~rl:*", "+swl.check"],
        );
        setuser(&mut admin, &["other", "on", ">secret", "~*", "+get"]);

        let mut limiter = connect_as(&server, "limiter");
        assert_eq!(
            try_check(&mut limiter, "rl:alice"),
            Ok(vec![1, 5, 4, -1, 60000, 60000])
        );
        assert_eq!(
            try_check(&mut limiter, "session:alice"),
            Err(
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .into()
            )
        );
        let mut other = connect_as(&server, "other");
        assert_eq!(
            try_check(&mut other, "rl:alice"),
            Err("NOPERM this user has no permissions to run the 'swl.check' command".into())
        );
        // Only the permitted check wrote anything.
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
        assert_eq!(keys, ["rl:alice"]);
        assert_eq!(
            check(&mut admin, "rl:alice", &["60000", "5", "1000"]),
            [1, 5, 3, -1, 60000]
        );
    });
}

/// A user with read-only access to the logs (`%R~`) may read them with
/// SWL.PEEK and SWL.ENTRIES, and change them with neither SWL.CHECK nor
/// SWL.REFUND: each command's key spec says what it does to its key.
#[test]
fn read_only_key_access_reads_logs_and_cannot_change_them() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut admin = server.connect();
        check(&mut admin, "rl:alice", &["60000", "5", "1000"]);
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "reader", "on", ">secret", "%R~rl:*", "+@all"])
            .query(&mut admin)
            .unwrap();
        let mut reader = connect_as(&server, "reader");
        let args = ["rl:alice", "60000", "5", "1000"];
        let peeked: Vec<i64> = redis::cmd("SWL.PEEK")
            .arg(&args)
            .query(&mut reader)
            .unwrap();
        assert_eq!(peeked, [1, 5, 3, -1, 60000, 60000]);
        let entries: Vec<i64> = redis::cmd("SWL.ENTRIES")
            .arg("rl:alice")
            .query(&mut reader)
            .unwrap();
        assert_eq!(entries, [1000]);
        for command in ["SWL.CHECK", "SWL.REFUND"] {
            let refused = redis::cmd(command)
                .arg(&args)
                .query::<Vec<i64>>(&mut reader)
                .unwrap_err();
            assert_eq!(
                support::error_text(&refused),
                "NOPERM this user has no permissions to access one of the keys used as arguments",
                "{command}"
            );
        }
        assert_eq!(support::scores(&mut admin, "rl:alice"), [1000.0]);
    });
}
