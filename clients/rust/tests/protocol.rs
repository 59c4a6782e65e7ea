//! The client protocol (clients/spec/protocol.md) against its vectors
//! (clients/vectors/protocol.json): for each case, the commands the client
//! sends and what it makes of the replies. The stand-in is the one thing a
//! client sends commands with, a redis-rs connection, answering as the
//! vectors say: the vectors are the server.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use redis_swl_client::{library_source, Encoding, Options, Swl};
use serde_json::Value as Json;

/// The exchanges a step must cause, in order.
#[derive(Clone, Default)]
struct Scripted {
    expected: Arc<Mutex<VecDeque<Json>>>,
}

impl Scripted {
    fn answer(&self, command: Vec<String>) -> redis::RedisResult<Value> {
        let exchange = self
            .expected
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| panic!("sent {command:?} after the step's last exchange"));
        let want: Vec<String> = exchange["send"]
            .as_array()
            .unwrap()
            .iter()
            .map(|arg| arg.as_str().unwrap().to_string())
            .collect();
        assert_eq!(command, want);
        if let Some(error) = exchange["error"].as_str() {
            // As a connection reads an error reply.
            return redis::parse_redis_value(format!("-{error}\r\n").as_bytes());
        }
        if exchange["timeout"].as_bool() == Some(true) {
            let timeout = std::io::Error::new(std::io::ErrorKind::TimedOut, "timeout");
            return Err(timeout.into());
        }
        Ok(value_of(&exchange["reply"]))
    }
}

fn value_of(json: &Json) -> Value {
    match json {
        Json::Number(n) => Value::Int(n.as_i64().unwrap()),
        Json::String(s) => Value::BulkString(s.as_bytes().to_vec()),
        Json::Array(items) => Value::Array(items.iter().map(value_of).collect()),
        other => panic!("no reply of {other}"),
    }
}

impl ConnectionLike for Scripted {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let library = library_source(Encoding::Compact).as_bytes();
        let command = cmd
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) if bytes == library => "$LIBRARY".to_string(),
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                redis::Arg::Cursor => "0".to_string(),
            })
            .collect();
        let answer = self.answer(command);
        Box::pin(async move { answer })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _: &'a Pipeline,
        _: usize,
        _: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        panic!("the client sends no pipelines")
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[tokio::test]
async fn the_client_speaks_the_protocol() {
    let path = common::repository().join("clients/vectors/protocol.json");
    let vectors: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for case in vectors["cases"].as_array().unwrap() {
        let server = Scripted::default();
        let swl = Swl::new(server.clone());
        for (n, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            let where_ = format!("{}, step {}", case["name"], n + 1);
            *server.expected.lock().unwrap() = step["exchanges"]
                .as_array()
                .unwrap()
                .iter()
                .cloned()
                .collect();
            let call = &step["call"];
            let (key, window, limit) = (
                call["key"].as_str().unwrap_or_default(),
                call["window_ms"].as_u64().unwrap_or_default(),
                call["limit"].as_u64().unwrap_or_default(),
            );
            let options = Options::new().now_ms(call["now_ms"].as_u64().unwrap_or_default());
            let outcome = match call["op"].as_str().unwrap() {
                "check" => swl.check(key, window, limit, &options).await.map(Some),
                "peek" => swl.peek(key, window, limit, &options).await.map(Some),
                "refund" => swl.refund(key, window, limit, &options).await.map(Some),
                "load_library" => swl
                    .load_library(call["replace"].as_bool().unwrap())
                    .await
                    .map(|()| None)
                    .map_err(redis_swl_client::Error::Redis),
                op => panic!("{where_}: unknown op {op}"),
            };
            let result = &step["result"];
            match outcome {
                Ok(verdict) if result["verdict"].is_array() => {
                    let v = verdict.unwrap();
                    let got = vec![
                        i64::from(v.allowed),
                        v.limit as i64,
                        v.remaining as i64,
                        v.retry_after_ms,
                        v.reset_after_ms,
                        v.window_ms as i64,
                    ];
                    let want: Vec<i64> = result["verdict"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_i64().unwrap())
                        .collect();
                    assert_eq!(got, want, "{where_}");
                }
                Ok(None) => assert_eq!(result["ok"], Json::Bool(true), "{where_}"),
                Ok(Some(v)) => panic!("{where_}: {v:?}, want {result}"),
                Err(error) if result["uncertain"] == Json::Bool(true) => {
                    assert!(error.is_uncertain_outcome(), "{where_}: {error}");
                }
                Err(error) => {
                    assert!(!error.is_uncertain_outcome(), "{where_}: {error}");
                    let text = result["error"]
                        .as_str()
                        .unwrap_or_else(|| panic!("{where_}: {error}"));
                    assert!(
                        error
                            .to_string()
                            .to_lowercase()
                            .contains(&text.to_lowercase()),
                        "{where_}: {error}"
                    );
                }
            }
            assert!(
                server.expected.lock().unwrap().is_empty(),
                "{where_}: not sent"
            );
        }
    }
}
