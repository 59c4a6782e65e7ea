//! Under maxmemory with noeviction, SWL.CHECK is refused (deny-oom) with
//! nothing written, SWL.PEEK and SWL.REFUND (which only frees) still
//! answer, and checks work again once memory is freed.

mod support;

use redis::Connection;
use support::{check, check_result, for_each_encoding, snapshot, Server};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

fn used_memory(con: &mut Connection) -> u64 {
    support::info_number(con, "memory", "used_memory")
}

fn try_check(con: &mut Connection, key: &str, now: &str) -> Result<Vec<i64>, String> {
    check_result(con, key, &["60000", "100", now])
}

#[test]
fn check_is_refused_when_memory_is_full_and_works_after() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "rl:k", &["60000", "100", "1000"]);
        check(&mut con, "rl:refund", &["60000", "100", "1000"]);
        check(&mut con, "rl:refund", &["60000", "100", "1500"]);
        let filler = vec![b'x'; 64 * 1024];
        for i in 0..64 {
            let _: () = redis::cmd("SET")
                .arg(format!("fill:{i}"))
                .arg(&filler)
                .query(&mut con)
                .unwrap();
        }
        // Memory is now over the limit and nothing may be evicted.
        let limit = used_memory(&mut con) - 1024 * 1024;
        let _: () = redis::cmd("CONFIG")
            .arg(&["SET", "maxmemory-policy", "noeviction"])
            .query(&mut con)
            .unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(limit)
            .query(&mut con)
            .unwrap();

        let before = snapshot(&mut con, b"rl:k");
        assert_eq!(try_check(&mut con, "rl:k", "2000"), Err(OOM.to_string()));
        assert_eq!(try_check(&mut con, "rl:new", "2000"), Err(OOM.to_string()));
        assert_eq!(snapshot(&mut con, b"rl:k"), before);
        assert_eq!(snapshot(&mut con, b"rl:new").0, "none");
        // A read-only peek still answers.
        let peek: Vec<i64> = redis::cmd("SWL.PEEK")
            .arg(&["rl:k", "60000", "100", "2000"])
            .query(&mut con)
            .unwrap();
        assert_eq!(peek, [1, 100, 98, -1, 60000, 60000]);
        // A refund only frees memory: it works, and gives the entry back.
        let refund: Vec<i64> = redis::cmd("SWL.REFUND")
            .arg(&["rl:refund", "60000", "100", "2000"])
            .query(&mut con)
            .unwrap();
        assert_eq!(refund, [1, 100, 98, -1, 60000, 60000]);
        assert_eq!(support::scores(&mut con, "rl:refund"), [1000.0]);

        for i in 0..64 {
            let _: () = redis::cmd("DEL")
                .arg(format!("fill:{i}"))
                .query(&mut con)
                .unwrap();
        }
        assert!(used_memory(&mut con) < limit);
        assert_eq!(
            try_check(&mut con, "rl:k", "2000"),
            Ok(vec![1, 100, 98, -1, 60000, 60000])
        );
        assert_eq!(support::scores(&mut con, "rl:k"), [1000.0, 2000.0]);
    });
}
