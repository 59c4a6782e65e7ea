//! The client against real servers: with the module and without it (the
//! library, loaded by the client), both encodings, over a
//! ConnectionManager and a multiplexed connection; the same replies from
//! all of them.

mod common;

use common::{entries, log_kind, Server, ENCODINGS};
use redis_swl_client::{library_source, Encoding, Error, Options, Swl, Verdict};

const T: u64 = 1_700_000_000_000;

/// The calls of one session and the replies the module gives them.
fn session() -> Vec<(&'static str, u64, u64, Options, Vec<i64>)> {
    vec![
        (
            "check",
            60_000,
            3,
            Options::new().now_ms(T).cost(2),
            vec![1, 3, 1, -1, 60_000, 60_000],
        ),
        (
            "check",
            60_000,
            3,
            Options::new().now_ms(T + 1000).cost(2),
            vec![0, 3, 1, 59_000, 59_000, 60_000],
        ),
        (
            "peek",
            60_000,
            3,
            Options::new().now_ms(T + 1000).oldest(),
            vec![1, 3, 0, -1, 60_000, 60_000, 59_000],
        ),
        (
            "refund",
            60_000,
            3,
            Options::new().now_ms(T + 2000),
            vec![1, 3, 1, -1, 60_000, 60_000],
        ),
        (
            "check",
            60_000,
            3,
            Options::new().now_ms(T + 3000).window(1000, 1),
            vec![1, 1, 0, -1, 60_000, 1000],
        ),
        (
            "check",
            60_000,
            3,
            Options::new().now_ms(T + 3500).window(1000, 1),
            vec![0, 1, 0, 500, 59_500, 1000],
        ),
        (
            "check",
            60_000,
            3,
            Options::new().now_ms(T + 3600).cost(4),
            vec![0, 3, 1, -1, 59_400, 60_000],
        ),
    ]
}

async fn run_session<C>(swl: &Swl<C>, key: &str)
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    for (call, window_ms, limit, options, reply) in session() {
        let verdict = match call {
            "check" => swl.check(key, window_ms, limit, &options).await,
            "peek" => swl.peek(key, window_ms, limit, &options).await,
            _ => swl.refund(key, window_ms, limit, &options).await,
        };
        assert_eq!(
            verdict.ok(),
            Verdict::from_reply(&reply),
            "{call} {options:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_answered_exactly_with_and_without_the_module() {
    for module in [true, false] {
        for encoding in ENCODINGS {
            let server = Server::start(module, encoding);
            let client = redis::Client::open(server.url()).unwrap();
            let manager =
                Swl::new(client.get_connection_manager().await.unwrap()).with_encoding(encoding);
            run_session(&manager, "manager").await;
            let multiplexed = Swl::new(client.get_multiplexed_async_connection().await.unwrap())
                .with_encoding(encoding);
            run_session(&multiplexed, "multiplexed").await;
            for (swl_uses_library, key) in [
                (manager.uses_library(), "manager"),
                (multiplexed.uses_library(), "multiplexed"),
            ] {
                assert_eq!(swl_uses_library, !module);
                assert_eq!(entries(&server, module, key), [T as i64, T as i64 + 3000]);
                assert_eq!(log_kind(&server, key), encoding.name());
            }
            let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
                .arg("LIST")
                .arg("LIBRARYNAME")
                .arg("swl")
                .query(&mut server.connect())
                .unwrap();
            assert_eq!(libraries.len(), usize::from(!module), "module {module}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counts_what_a_log_holds_in_a_window() {
    for module in [true, false] {
        for encoding in ENCODINGS {
            let server = Server::start(module, encoding);
            let client = redis::Client::open(server.url()).unwrap();
            let swl = Swl::new(client.get_multiplexed_async_connection().await.unwrap())
                .with_encoding(encoding);
            let none = swl.usage("none", 60_000).await.unwrap();
            assert_eq!((none.units, none.reset_after_ms), (0, 0));
            swl.check("now", 60_000, 5, &Options::new().cost(2))
                .await
                .unwrap();
            swl.check("now", 1_000, 5, &Options::new()).await.unwrap();
            let usage = swl.usage("now", 60_000).await.unwrap();
            assert_eq!(usage.units, 3, "module {module}, {encoding:?}");
            assert!(
                usage.reset_after_ms > 50_000 && usage.reset_after_ms <= 60_000,
                "{usage:?}"
            );
            assert_eq!(swl.units("now", 60_000).await.unwrap(), 3);
            assert_eq!(swl.entries("none").await.unwrap(), Vec::<i64>::new());
            swl.check("at", 60_000, 5, &Options::new().now_ms(1000).cost(2))
                .await
                .unwrap();
            assert_eq!(swl.entries("at").await.unwrap(), [1000, 1000]);
        }
    }
}

#[tokio::test]
async fn errors_name_the_argument_and_change_nothing() {
    for module in [true, false] {
        let server = Server::start(module, Encoding::Zset);
        let client = redis::Client::open(server.url()).unwrap();
        let swl = Swl::new(client.get_multiplexed_async_connection().await.unwrap());
        swl.check("bad", 60_000, 3, &Options::new().now_ms(T))
            .await
            .unwrap();
        for (options, window_ms, message) in [
            (
                Options::new().now_ms(T).cost(100_001),
                60_000,
                "cost must be an integer from 1 to 100000",
            ),
            (
                Options::new().now_ms(T),
                0,
                "window_ms must be an integer from 1 to 9007199254740991",
            ),
            (Options::new().now_ms(T).oldest(), 60_000, "syntax error"),
        ] {
            let Error::Redis(error) = swl.check("bad", window_ms, 3, &options).await.unwrap_err()
            else {
                panic!("an error reply is no uncertain outcome");
            };
            assert_eq!(error.code(), Some("ERR"), "{error}");
            assert_eq!(error.detail(), Some(message), "{error}");
        }
        assert_eq!(entries(&server, module, "bad"), [T as i64]);
    }
}

#[tokio::test]
async fn a_library_from_before_is_replaced() {
    let server = Server::start(false, Encoding::Zset);
    let old = library_source(Encoding::Zset).replace("swl_peek", "swl_peek_old");
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(old)
        .query(&mut server.connect())
        .unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let swl = Swl::new(client.get_multiplexed_async_connection().await.unwrap());
    // It lacks swl_peek: the client replaces it with the one it carries.
    assert!(
        swl.peek("k", 1000, 1, &Options::new())
            .await
            .unwrap()
            .allowed
    );
    let loaded: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("WITHCODE")
        .query(&mut server.connect())
        .unwrap();
    let loaded = format!("{loaded:?}");
    assert!(loaded.contains("swl_peek") && !loaded.contains("swl_peek_old"));
    // On request too, as after an upgrade.
    swl.load_library(true).await.unwrap();
    assert!(
        swl.peek("k", 1000, 1, &Options::new())
            .await
            .unwrap()
            .allowed
    );
}

#[tokio::test]
async fn compact1_makes_compact_logs_of_format_version_1() {
    // What redis-swl 0.3 reads, while it still serves the keys.
    let server = Server::start(false, Encoding::Zset);
    let client = redis::Client::open(server.url()).unwrap();
    let swl = Swl::new(client.get_multiplexed_async_connection().await.unwrap())
        .with_encoding(Encoding::Compact1);
    assert!(
        swl.check("k", 1000, 3, &Options::new())
            .await
            .unwrap()
            .allowed
    );
    let head: Vec<u8> = redis::cmd("GETRANGE")
        .arg("k")
        .arg(0)
        .arg(4)
        .query(&mut server.connect())
        .unwrap();
    assert_eq!(head, b"SWLc\x01");
    let loaded: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("WITHCODE")
        .query(&mut server.connect())
        .unwrap();
    assert!(format!("{loaded:?}").contains("local ENCODING = 'compact1'"));
}

#[test]
fn the_library_is_the_repository_one() {
    let repository = std::fs::read_to_string(common::repository().join("scripts/swl.lua")).unwrap();
    assert!(repository.contains("\nlocal ENCODING = 'compact'\n"));
    assert_eq!(library_source(Encoding::Compact), repository);
    for encoding in [Encoding::Zset, Encoding::Compact1] {
        assert_eq!(
            library_source(encoding),
            repository.replace(
                "\nlocal ENCODING = 'compact'\n",
                &format!("\nlocal ENCODING = '{}'\n", encoding.name())
            )
        );
    }
}
