//! Many clients at once on one key: a module command runs alone, so the
//! limit holds exactly.

mod support;

use std::sync::Arc;
use std::thread;

use support::{for_each_encoding, scores, Server};

fn hammer(
    server: &Arc<Server>,
    clients: usize,
    per_client: usize,
    args: &'static [&'static str],
) -> i64 {
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let server = Arc::clone(server);
            thread::spawn(move || {
                let mut con = server.connect();
                (0..per_client)
                    .map(|_| {
                        let reply: Vec<i64> = redis::cmd("SWL.CHECK")
                            .arg("hot")
                            .arg(args)
                            .query(&mut con)
                            .unwrap();
                        reply[0]
                    })
                    .sum::<i64>()
            })
        })
        .collect();
    workers
        .into_iter()
        .map(|w| w.join().expect("client thread"))
        .sum()
}

#[test]
fn concurrent_clients_are_admitted_exactly_limit_times() {
    for_each_encoding(|encoding| {
        let server = Arc::new(Server::with(encoding.config()));
        let admitted = hammer(&server, 32, 500, &["3600000", "100", "*"]);
        assert_eq!(admitted, 100);
        assert_eq!(scores(&mut server.connect(), "hot").len(), 100);
    });
}

#[test]
fn no_short_window_ever_holds_more_than_the_limit() {
    for_each_encoding(|encoding| {
        let server = Arc::new(Server::with(encoding.config()));
        // 5 per 20 ms on the real clock; the hour-long window with a limit it
        // never reaches only keeps every admitted entry in the log to inspect.
        let admitted = hammer(
            &server,
            16,
            400,
            &["20", "5", "*", "WINDOW", "3600000", "1000000"],
        );
        let log = scores(&mut server.connect(), "hot");
        assert_eq!(log.len() as i64, admitted);
        assert!(
            admitted > 5,
            "the clock moved on during the run: {admitted}"
        );
        // Any 6 consecutive admitted entries span at least the window: no
        // window (t - 20, t] ever held more than 5.
        for six in log.windows(6) {
            assert!(six[5] - six[0] >= 20.0, "6 entries within 20 ms: {six:?}");
        }
    });
}
