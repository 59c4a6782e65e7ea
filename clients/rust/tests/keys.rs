//! Who a request counts against: the default key is the TCP peer whatever
//! the headers say, and forwarded_for reads X-Forwarded-For only as far as
//! the hops are trusted proxies.
#![cfg(feature = "axum")]

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use redis_swl_client::{client_address, forwarded_for, KeyFn};

fn key_of(key: &KeyFn, peer: &str, forwarded: &[&str]) -> String {
    let mut request = http::Request::new(());
    request
        .extensions_mut()
        .insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    for value in forwarded {
        request
            .headers_mut()
            .append("x-forwarded-for", value.parse().unwrap());
    }
    key(&request.into_parts().0)
}

#[test]
fn the_default_key_is_the_peer_address_whatever_the_headers() {
    let key: KeyFn = Arc::new(client_address);
    assert_eq!(
        key_of(&key, "192.0.2.7:5000", &["198.51.100.1"]),
        "192.0.2.7"
    );
    assert_eq!(key_of(&key, "[::ffff:192.0.2.7]:5000", &[]), "192.0.2.7");
    assert_eq!(key_of(&key, "[2001:db8::1]:5000", &[]), "2001:db8::1");
    // Served without ConnectInfo, every request is one client.
    assert_eq!(key(&http::Request::new(()).into_parts().0), "unknown");
}

#[test]
fn forwarded_for_is_read_only_from_trusted_proxies() {
    let key = forwarded_for(vec![
        "10.0.0.1".parse().unwrap(),
        "10.0.0.2".parse().unwrap(),
    ]);
    // A client that is not a proxy cannot choose its key.
    assert_eq!(
        key_of(&key, "192.0.2.7:5000", &["198.51.100.1"]),
        "192.0.2.7"
    );
    // Behind a proxy: the address it saw, not what the client wrote.
    assert_eq!(
        key_of(&key, "10.0.0.1:5000", &["203.0.113.9, 192.0.2.7"]),
        "192.0.2.7"
    );
    // Behind two proxies, over two header lines.
    assert_eq!(
        key_of(
            &key,
            "10.0.0.1:5000",
            &["203.0.113.9", "192.0.2.7, 10.0.0.2"]
        ),
        "192.0.2.7"
    );
    // Without a usable entry, the proxy's own address is the key.
    assert_eq!(key_of(&key, "10.0.0.1:5000", &[]), "10.0.0.1");
    assert_eq!(key_of(&key, "10.0.0.1:5000", &["garbage"]), "10.0.0.1");
    // Entries with a port or in brackets, as some proxies write them.
    assert_eq!(
        key_of(&key, "10.0.0.1:5000", &["192.0.2.7:5555"]),
        "192.0.2.7"
    );
    assert_eq!(
        key_of(&key, "10.0.0.1:5000", &["[2001:db8::1]"]),
        "2001:db8::1"
    );
}

#[test]
fn bytes_a_client_writes_do_not_hide_what_the_proxy_added() {
    let key = forwarded_for(vec!["10.0.0.1".parse().unwrap()]);
    let mut request = http::Request::new(());
    request
        .extensions_mut()
        .insert(ConnectInfo("10.0.0.1:5000".parse::<SocketAddr>().unwrap()));
    let line = http::HeaderValue::from_bytes(b"\xff, 192.0.2.7").unwrap();
    request.headers_mut().append("x-forwarded-for", line);
    assert_eq!(key(&request.into_parts().0), "192.0.2.7");
}
