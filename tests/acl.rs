//! ACL key patterns and command permissions apply to SWL.CHECK like to any
//! Redis command.

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
