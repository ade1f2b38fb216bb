//! A third-party client, jsonrpsee's HTTP client (what a Rust user of another framework has),
//! against the real `kv-server`: calls by name with object params, a batch, and the service's
//! errors as plain JSON-RPC error objects.

mod common;

use common::Server;
use jsonrpsee::core::client::{BatchResponse, ClientT};
use jsonrpsee::core::params::{BatchRequestBuilder, ObjectParams};
use jsonrpsee::http_client::HttpClientBuilder;
use serde_json::{Value, json};

fn object(pairs: &[(&str, Value)]) -> ObjectParams {
    let mut p = ObjectParams::new();
    for (k, v) in pairs {
        p.insert(k, v).expect("encodes");
    }
    p
}

#[tokio::test]
async fn jsonrpsee_http_client_drives_the_service() {
    let server = Server::start(None).await;
    let client = HttpClientBuilder::default().build(server.rpc_url()).expect("client");
    let entry: Value = client.request("put", object(&[("key", json!("j/a")), ("value", json!({"kind": "flag", "flag": true}))])).await.expect("put");
    assert_eq!(entry, json!({"key": "j/a", "value": {"kind": "flag", "flag": true}, "version": 1}));
    let entry: Value = client.request("get", object(&[("key", json!("j/a"))])).await.expect("get");
    assert_eq!(entry["version"], 1);
    // The service's errors, and the core's, reach it as JSON-RPC error objects.
    let cases: &[(&str, ObjectParams, i32, Option<Value>)] = &[
        ("get", object(&[("key", json!("j/missing"))]), -32040, Some(json!({"code": "not_found"}))),
        ("put", object(&[("key", json!("j/a")), ("value", json!({"kind": "text", "text": "x"})), ("if_version", json!(9))]), -32041, Some(json!({"code": "version_conflict"}))),
        ("put", object(&[("key", json!("j/a")), ("value", json!({"kind": "colour"}))]), -32602, None),
        ("nope", ObjectParams::new(), -32601, None),
    ];
    for (method, params, code, data) in cases {
        match client.request::<Value, _>(method, params.clone()).await {
            Err(jsonrpsee::core::client::Error::Call(e)) => {
                assert_eq!(e.code(), *code, "{method}: {e}");
                if let Some(d) = data {
                    assert_eq!(e.data().map(|r| serde_json::from_str::<Value>(r.get()).expect("JSON")), Some(d.clone()), "{method}");
                }
            }
            other => panic!("{method}: {other:?}"),
        }
    }
    let mut batch = BatchRequestBuilder::new();
    batch.insert("get", object(&[("key", json!("j/a"))])).expect("encodes");
    batch.insert("delete", object(&[("key", json!("j/a"))])).expect("encodes");
    batch.insert("get", object(&[("key", json!("j/a"))])).expect("encodes");
    let answers: BatchResponse<'_, Value> = client.batch_request(batch).await.expect("batch");
    let (ok, err) = (answers.num_successful_calls(), answers.num_failed_calls());
    assert_eq!((ok, err), (2, 1), "get, delete, then not_found");
}
