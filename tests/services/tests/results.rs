//! Results of every shape through a generated service and its generated client, over an
//! in-memory line connection: a named type (checked against its schema), a list of one, a string
//! and an open object (decoded exactly); a result the schema refuses is a `ClientError::Decode`.

use openagents_rpc::{ClientError, Context, LineTransport, RpcError, RpcServer, serve_lines};
use openagents_rt::RawObject;
use openagents_services_check::results::{self, ByName, Item, Nothing, service};

/// Answers by the request; `item` of the name `bad` answers a size the schema refuses.
struct Shop;

impl service::Service for Shop {
    async fn item(&self, _: &Context, p: ByName) -> Result<Item, RpcError> {
        Ok(Item { size: if p.name == "bad" { -1 } else { p.name.len() as i64 }, name: p.name })
    }
    async fn list(&self, _: &Context, _: Option<Nothing>) -> Result<Vec<Item>, RpcError> {
        Ok(vec![Item { name: "a".into(), size: 1 }, Item { name: "bb".into(), size: 2 }])
    }
    async fn name(&self, _: &Context, _: Option<Nothing>) -> Result<String, RpcError> {
        Ok("shop".into())
    }
    async fn info(&self, cx: &Context, _: Option<Nothing>) -> Result<RawObject, RpcError> {
        RawObject::from_serialize(&serde_json::json!({ "caller": cx.identity().name() })).map_err(|e| RpcError::new(openagents_rpc::codes::INTERNAL_ERROR, e.to_string()))
    }
}

#[tokio::test]
async fn results_of_every_shape_reach_the_generated_client() {
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let server = RpcServer::new(service::ServiceHandler::new(Shop));
    let (sr, sw) = tokio::io::split(server_end);
    tokio::spawn(async move { serve_lines(&server, tokio::io::BufReader::new(sr), sw).await });
    let (cr, cw) = tokio::io::split(client_end);
    let shop = service::Client::new(LineTransport::new(cr, cw));
    assert_eq!(shop.item(ByName { name: "hat".into() }).await.expect("item"), Item { name: "hat".into(), size: 3 });
    assert_eq!(shop.list(None).await.expect("list").len(), 2);
    assert_eq!(shop.list(Some(Nothing::default())).await.expect("list with {}").len(), 2);
    assert_eq!(shop.name(None).await.expect("name"), "shop");
    let info = shop.info(None).await.expect("info").parse::<serde_json::Value>().expect("an object");
    assert_eq!(info.get("caller"), Some(&serde_json::json!("stdio")));
    // The server answered a size below the schema's minimum: the client refuses the result.
    match shop.item(ByName { name: "bad".into() }).await {
        Err(ClientError::Decode(m)) => assert!(m.contains("item") && m.contains("/size"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Params the schema refuses, sent anyway: the server's -32602.
    match shop.item(ByName { name: String::new() }).await {
        Err(ClientError::Rpc(e)) => assert_eq!(e.code, openagents_rpc::codes::INVALID_PARAMS),
        other => panic!("{other:?}"),
    }
    let _ = results::Method::NAMES;
}
