//! How a client learns whether the server has the module: one probe
//! (SWL.CHECK without arguments, refused for its arity or as unknown),
//! shared by every call made while it is out, so that each call is sent
//! once, where it belongs, from the first.

mod common;

use std::time::Duration;

use common::{Server, Stall, DEBUG};
use redis::AsyncConnectionConfig;
use redis_swl_client::{library_source, Encoding, Error, Options, Swl, Verdict};

/// A server's count of the error replies it gave, and of the calls of
/// `command` it carried out and refused, asked on `admin` (a connection
/// made before, whose own set-up is counted already).
fn counts(admin: &mut redis::Connection, command: &str) -> (u64, u64, u64) {
    let info: String = redis::cmd("INFO").arg("ALL").query(admin).unwrap();
    let field = |line: &str, name: &str| -> u64 {
        line.split([',', ':'])
            .find_map(|part| part.strip_prefix(&format!("{name}=")))
            .map_or(0, |value| value.parse().unwrap())
    };
    let errors = info
        .lines()
        .find_map(|line| line.strip_prefix("total_error_replies:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stats = info
        .lines()
        .find(|line| line.starts_with(&format!("cmdstat_{command}:")))
        .unwrap_or("");
    (
        errors,
        field(stats, "calls"),
        field(stats, "rejected_calls"),
    )
}

fn admitted() -> Option<Verdict> {
    Verdict::from_reply(&[1, 3, 2, -1, 1000, 1000])
}

#[tokio::test]
async fn calls_of_a_new_client_share_one_probe_and_go_where_they_belong() {
    for module in [false, true] {
        let server = Server::start(module, Encoding::Zset);
        if !module {
            let _: String = redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg(library_source(Encoding::Zset))
                .query(&mut server.connect())
                .unwrap();
        }
        let client = redis::Client::open(server.url()).unwrap();
        let mut connection = client.get_multiplexed_async_connection().await.unwrap();
        // The connection is set up (redis-rs's own set-up commands answered).
        let _: String = redis::cmd("PING")
            .query_async(&mut connection)
            .await
            .unwrap();
        let command = if module { "swl.check" } else { "fcall" };
        let mut admin = server.connect();
        let (errors, calls, rejected) = counts(&mut admin, command);
        let swl = Swl::new(connection);
        let at = Options::new().now_ms(1000);
        // Five calls made together. Before, each was sent as SWL.CHECK and,
        // without the module, sent again as FCALL after "unknown command".
        let verdicts = tokio::join!(
            swl.check("k0", 1000, 3, &at),
            swl.check("k1", 1000, 3, &at),
            swl.check("k2", 1000, 3, &at),
            swl.check("k3", 1000, 3, &at),
            swl.check("k4", 1000, 3, &at),
        );
        let verdicts = [verdicts.0, verdicts.1, verdicts.2, verdicts.3, verdicts.4];
        assert!(verdicts
            .iter()
            .all(|v| v.as_ref().ok() == admitted().as_ref()));
        assert_eq!(swl.uses_library(), !module);
        let after = counts(&mut admin, command);
        // One refused command, the probe; each call carried out once.
        assert_eq!(after.0 - errors, 1, "module {module}");
        assert_eq!(after.1 - calls, 5, "module {module}");
        assert_eq!(after.2 - rejected, u64::from(module), "module {module}");
    }
}

#[tokio::test]
async fn a_probe_that_fails_sends_nothing_else_and_the_next_call_probes_again() {
    let args: Vec<String> = DEBUG.iter().map(|s| s.to_string()).collect();
    let server = Server::with_args(false, Encoding::Zset, &args);
    let client = redis::Client::open(server.url()).unwrap();
    let config = AsyncConnectionConfig::new().set_response_timeout(Duration::from_millis(200));
    let mut connection = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap();
    let _: String = redis::cmd("PING")
        .query_async(&mut connection)
        .await
        .unwrap();
    let swl = Swl::new(connection);
    let at = Options::new().now_ms(1000);
    let stall = Stall::start(server.port, 0.6);
    // The probe timed out: no check went out, so nothing is uncertain.
    match swl.check("k", 1000, 3, &at).await {
        Err(Error::Redis(error)) => assert!(error.is_timeout(), "{error}"),
        other => panic!("not the probe's timeout: {other:?}"),
    }
    stall.wait();
    let (_, fcalls, _) = counts(&mut server.connect(), "fcall");
    assert_eq!(fcalls, 0);
    assert_eq!(swl.check("k", 1000, 3, &at).await.ok(), admitted());
    assert!(swl.uses_library());
}
