//! A small HTTP/1.1 client for `openagents submit` and `status`: one JSON-RPC call, and the
//! SSE event stream, against a runtime's URL with a bearer token.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Where a runtime listens.
#[derive(Debug, Clone)]
pub struct Target {
    authority: String,
    base_path: String,
    token: String,
}

impl Target {
    /// Parses `http://host:port/` (only plain HTTP: runtimes bind loopback by default; put TLS in
    /// front with a proxy) and reads the token from `token_file` (private to its owner, at
    /// least `MIN_TOKEN_BYTES` long).
    ///
    /// # Errors
    ///
    /// A message for a malformed URL or an unreadable token file.
    pub fn new(url: &str, token_file: &str) -> Result<Target, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| format!("`{url}` is not an http:// URL"))?;
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        if authority.is_empty() {
            return Err(format!("`{url}` has no host"));
        }
        let token = openagents_sdk::server::read_token_file(std::path::Path::new(token_file)).map_err(|e| e.to_string())?;
        Ok(Target { authority: authority.to_owned(), base_path: format!("/{}", path.trim_end_matches('/')).trim_end_matches('/').to_owned(), token })
    }

    async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, String> {
        let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(&self.authority))
            .await
            .map_err(|_| format!("connecting to {} timed out", self.authority))?
            .map_err(|e| format!("cannot connect to {}: {e}", self.authority))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        sender.send_request(req).await.map_err(|e| format!("request to {} failed: {e}", self.authority))
    }

    /// Calls `method` with `params`; the status code and the response body.
    ///
    /// # Errors
    ///
    /// Connection failures.
    pub async fn call(&self, method: &str, params: serde_json::Value) -> Result<(u16, serde_json::Value), String> {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let req = Request::post(format!("{}/rpc", self.base_path))
            .header("host", &self.authority)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        let resp = self.send(req).await?;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| serde_json::json!({"error": {"message": String::from_utf8_lossy(&bytes)}}));
        Ok((status, value))
    }

    /// Opens the event stream; events arrive through `on_event` as parsed JSON, until the stream
    /// ends.
    ///
    /// # Errors
    ///
    /// Connection failures or a refused request.
    pub async fn events(&self, mut on_event: impl FnMut(serde_json::Value) -> bool) -> Result<(), String> {
        let req = Request::get(format!("{}/events", self.base_path))
            .header("host", &self.authority)
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "text/event-stream")
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let resp = self.send(req).await?;
        if resp.status() != 200 {
            let status = resp.status();
            let bytes = resp.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            return Err(format!("the event stream was refused ({status}): {}", String::from_utf8_lossy(&bytes)));
        }
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| e.to_string())?;
            let Some(data) = frame.data_ref() else { continue };
            buf.extend_from_slice(data);
            while let Some(end) = find(&buf, b"\n\n") {
                let block: Vec<u8> = buf.drain(..end + 2).collect();
                for line in String::from_utf8_lossy(&block).lines() {
                    if let Some(data) = line.strip_prefix("data:") {
                        if let Ok(v) = serde_json::from_str(data.trim_start()) {
                            if !on_event(v) {
                                return Ok(());
                            }
                        }
                    }
                }
            }
            if buf.len() > openagents_protocol::SERVER_MAX_LINE_BYTES {
                return Err("an event larger than SERVER_MAX_LINE_BYTES".into());
            }
        }
        Ok(())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
