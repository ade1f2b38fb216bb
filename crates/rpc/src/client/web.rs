//! The HTTP and WebSocket client transports (feature `http`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full, Limited};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::{ClientError, Incoming, Notification, Pending, ServerRequest, Transport, outcome, request};
use crate::{BoxFuture, MAX_FRAME_BYTES};

/// A client over a WebSocket (`ws://host:port/rpc`): one message per text frame each way.
pub struct WsTransport {
    pending: Arc<Pending>,
    out: mpsc::Sender<Vec<u8>>,
}

impl WsTransport {
    /// Connects to `url`, sending `Authorization: Bearer <token>` when a token is given.
    ///
    /// # Errors
    ///
    /// [`ClientError::Transport`]: the URL, the connection or the upgrade failed (an HTTP
    /// refusal such as 401 says its status).
    pub async fn connect(url: &str, token: Option<&str>) -> Result<WsTransport, ClientError> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        use tokio_tungstenite::tungstenite::protocol::Message;
        let mut req = url.into_client_request().map_err(|e| ClientError::Transport(e.to_string()))?;
        if let Some(t) = token {
            let v = format!("Bearer {t}").parse().map_err(|_| ClientError::Transport("the token cannot be sent in a header".into()))?;
            req.headers_mut().insert("authorization", v);
        }
        let (ws, _) = tokio_tungstenite::connect_async(req).await.map_err(|e| ClientError::Transport(e.to_string()))?;
        let (mut sink, mut stream) = ws.split();
        let pending = Arc::new(Pending::default());
        let (out, mut rx) = mpsc::channel::<Vec<u8>>(crate::OUTBOUND_QUEUE);
        tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                let Ok(text) = String::from_utf8(m) else { continue };
                if sink.send(Message::text(text)).await.is_err() {
                    break;
                }
            }
            let _ = sink.close().await;
        });
        let (p, replies) = (Arc::clone(&pending), out.downgrade());
        tokio::spawn(async move {
            while let Some(msg) = stream.next().await {
                match msg {
                    Ok(Message::Text(t)) => p.route(t.as_str(), &replies).await,
                    Ok(Message::Binary(b)) => {
                        if let Ok(t) = std::str::from_utf8(&b) {
                            p.route(t, &replies).await;
                        }
                    }
                    Ok(Message::Close(_)) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            p.close();
        });
        Ok(WsTransport { pending, out })
    }

    /// The server's notifications from now on (a second call replaces the first receiver).
    /// Until it is called they are dropped.
    pub fn notifications(&self) -> mpsc::Receiver<Notification> {
        self.pending.subscribe()
    }

    /// The server's requests from now on, each to answer once (a second call replaces the first
    /// receiver). Until it is called, they are refused with -32601.
    pub fn requests(&self) -> mpsc::Receiver<ServerRequest> {
        self.pending.subscribe_requests()
    }
}

impl Transport for WsTransport {
    fn call<'a>(&'a self, method: &'a str, params: Option<Box<RawValue>>) -> BoxFuture<'a, Result<Box<RawValue>, ClientError>> {
        Box::pin(self.pending.call(&self.out, method, params))
    }
    fn notify<'a>(&'a self, method: &'a str, params: Option<Box<RawValue>>) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move { self.out.send(request(None, method, params.as_deref())).await.map_err(|_| ClientError::Closed) })
    }
}

type HttpClient = hyper_util::client::legacy::Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

/// A client over HTTP: each call one `POST` of its request to the URL (`http://host:port/rpc`).
/// Plain HTTP/1.1 (no TLS): for loopback and trusted networks.
pub struct HttpTransport {
    client: HttpClient,
    uri: hyper::Uri,
    token: Option<String>,
    next_id: AtomicU64,
}

impl HttpTransport {
    /// A client of `url`, sending `Authorization: Bearer <token>` when a token is given.
    ///
    /// # Errors
    ///
    /// [`ClientError::Transport`] for a URL that is not one.
    pub fn new(url: &str, token: Option<&str>) -> Result<HttpTransport, ClientError> {
        let uri = url.parse::<hyper::Uri>().map_err(|e| ClientError::Transport(format!("`{url}` is not a URL: {e}")))?;
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        Ok(HttpTransport { client, uri, token: token.map(str::to_owned), next_id: AtomicU64::new(0) })
    }

    async fn post(&self, body: Vec<u8>) -> Result<(hyper::StatusCode, Bytes), ClientError> {
        let mut req = hyper::Request::post(self.uri.clone()).header("content-type", "application/json");
        if let Some(t) = &self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req.body(Full::new(Bytes::from(body))).map_err(|e| ClientError::Transport(e.to_string()))?;
        let resp = self.client.request(req).await.map_err(|e| ClientError::Transport(e.to_string()))?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_FRAME_BYTES).collect().await.map_err(|e| ClientError::Transport(format!("reading the answer: {e}")))?;
        Ok((status, body.to_bytes()))
    }
}

impl Transport for HttpTransport {
    fn call<'a>(&'a self, method: &'a str, params: Option<Box<RawValue>>) -> BoxFuture<'a, Result<Box<RawValue>, ClientError>> {
        Box::pin(async move {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
            let (status, body) = self.post(request(Some(id), method, params.as_deref())).await?;
            let text = std::str::from_utf8(&body).map_err(|_| ClientError::Decode("the answer is not UTF-8".into()))?;
            match serde_json::from_str::<Incoming<'_>>(text) {
                Ok(msg) if msg.error.is_some() || status.is_success() => outcome(text, &msg),
                _ => Err(ClientError::Transport(format!("HTTP {status}: {}", crate::bounded(text, 256)))),
            }
        })
    }
    fn notify<'a>(&'a self, method: &'a str, params: Option<Box<RawValue>>) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            let (status, body) = self.post(request(None, method, params.as_deref())).await?;
            if status.is_success() {
                return Ok(());
            }
            Err(ClientError::Transport(format!("HTTP {status}: {}", crate::bounded(&String::from_utf8_lossy(&body), 256))))
        })
    }
}
