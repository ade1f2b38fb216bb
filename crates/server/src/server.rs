//! One network listener for a runtime, built in one place: [`Server::builder`] takes the engine,
//! the address, the credentials and what to serve (HTTP, the WebSocket, the web page), and
//! [`ServerBuilder::start`] binds and answers a [`ServerHandle`]. The seed's entry points
//! (`run_http`, `run_http_authorized`, `run_http_authorized_with_lease_ttl`,
//! `run_frontend_websocket`) are thin wrappers over it.
//!
//! ```no_run
//! # async fn example(engine: openagents_server::RpcEngine, credentials: Vec<openagents_server::RuntimeHttpCredential>) -> std::io::Result<()> {
//! use openagents_server::{HttpOptions, Server, WsOptions};
//! let server = Server::builder(engine).bind("127.0.0.1:0").credentials(credentials).http(HttpOptions::default()).websocket(WsOptions::default()).start().await?;
//! println!("listening on {}", server.addr());
//! server.shutdown().await;
//! server.wait().await;
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use openagents_protocol::ErrorCode;

use crate::auth::{Grant, RuntimeHttpCredential};
use crate::engine::RpcEngine;
use crate::listener::{self, Access, HttpOptions};
use crate::ws::WsOptions;

/// A runtime's network listener.
pub struct Server;

impl Server {
    /// A builder for a listener serving `engine`.
    pub fn builder(engine: RpcEngine) -> ServerBuilder {
        ServerBuilder { engine, bind: "127.0.0.1:0".into(), credentials: Vec::new(), http: None, websocket: None, lease_ttl: None }
    }
}

/// What a listener serves; see [`Server::builder`].
#[must_use = "a builder does nothing until `start`"]
pub struct ServerBuilder {
    engine: RpcEngine,
    bind: String,
    credentials: Vec<RuntimeHttpCredential>,
    http: Option<HttpOptions>,
    websocket: Option<WsOptions>,
    lease_ttl: Option<Duration>,
}

impl ServerBuilder {
    /// The address to bind (`host:port`; port 0 picks a free one). Default `127.0.0.1:0`. The
    /// loopback-by-default policy is the caller's: this binds whatever it is given.
    pub fn bind(mut self, addr: impl Into<String>) -> Self {
        self.bind = addr.into();
        self
    }

    /// The credentials, each with its exact grant (at least one is needed).
    pub fn credentials(mut self, credentials: Vec<RuntimeHttpCredential>) -> Self {
        self.credentials = credentials;
        self
    }

    /// Serve HTTP: `POST /rpc`, `GET /events`, `GET /metrics`, and the web page when
    /// `options.web`; `options.allowed_origins` also applies to the WebSocket.
    pub fn http(mut self, options: HttpOptions) -> Self {
        self.http = Some(options);
        self
    }

    /// Serve the WebSocket, `/frontend/v2`.
    pub fn websocket(mut self, options: WsOptions) -> Self {
        self.websocket = Some(options);
        self
    }

    /// How long a controller keeps the lease without activity.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = Some(ttl);
        self
    }

    /// Binds and serves in a background task until the engine shuts down. The probes
    /// (`/healthz`, `/readyz`) are on every listener.
    ///
    /// # Errors
    ///
    /// When the address cannot be bound, no credential is given, or nothing is to be served.
    pub async fn start(self) -> std::io::Result<ServerHandle> {
        let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, m.to_owned());
        if self.credentials.is_empty() {
            return Err(invalid("a network runtime needs at least one credential"));
        }
        if self.http.is_none() && self.websocket.is_none() {
            return Err(invalid("a network runtime serves HTTP, the WebSocket, or both"));
        }
        if let Some(ttl) = self.lease_ttl {
            self.engine.set_lease_ttl(ttl);
        }
        let tcp = listener::bind(&self.bind).await?;
        let addr = tcp.local_addr()?;
        let serves_http = self.http.is_some();
        let options = self.http.clone().unwrap_or_default();
        let web = serves_http && options.web;
        let access = Access::new(self.engine.clone(), self.credentials, options, &self.bind);
        let mut router: Router<Access> = crate::http::probes();
        if let Some(ws) = self.websocket {
            router = router.merge(crate::ws::routes(ws));
        }
        if web {
            // The page needs no token, so it is what a DNS rebinding page would load under its
            // own name: only a `Host` the runtime answers to gets it (else 421).
            let host_checked = axum::middleware::from_fn_with_state(access.clone(), |State(access): State<Access>, request: Request, next: Next| async move {
                match access.check_host(&request) {
                    Ok(()) => next.run(request).await,
                    Err(refusal) => refusal,
                }
            });
            router = router.merge(crate::web::router::<Access>().route_layer(host_checked));
        }
        let not_found = match (serves_http, self.websocket.is_some()) {
            (true, true) => "not found: the endpoints are POST /rpc, GET /events, GET /metrics, GET /frontend/v2 (WebSocket), GET /healthz and GET /readyz\n",
            (true, false) => "not found: the endpoints are POST /rpc, GET /events, GET /metrics, GET /healthz and GET /readyz\n",
            _ => "not found: the only endpoint is GET /frontend/v2 (WebSocket), besides GET /healthz and GET /readyz\n",
        };
        if serves_http {
            router = router.merge(crate::http::routes());
        }
        // A known path with another verb is a transport refusal like the others: 405, with the
        // verbs it takes and a JSON-RPC error object as its body.
        let router = router
            .method_not_allowed_fallback(|| async {
                listener::reject(ErrorCode::InvalidRequest, StatusCode::METHOD_NOT_ALLOWED, "this path does not take that HTTP method: POST /rpc; GET /events, /metrics, /healthz, /readyz, /frontend/v2".into())
            })
            .fallback(move || async move { (StatusCode::NOT_FOUND, not_found) })
            .with_state(access.clone());
        let direct = serves_http.then_some(crate::http::DirectRpc);
        let task = tokio::spawn(listener::accept_loop(tcp, router, access, direct));
        Ok(ServerHandle { addr, engine: self.engine, task: Some(task) })
    }
}

/// A running listener. Dropping it leaves the listener running until the engine shuts down.
pub struct ServerHandle {
    addr: SocketAddr,
    engine: RpcEngine,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Shuts the runtime down, as the `shutdown` method does: the active turn interrupted, a
    /// final event, every accept loop stopped.
    pub async fn shutdown(&self) {
        self.engine.shutdown().await;
    }

    /// Waits until the listener has stopped (after the engine's shutdown) and its connections
    /// have ended (each finishes its request in flight within 2 s).
    pub async fn wait(mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Stops this listener now, without shutting the runtime down.
    pub fn abort(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Serves HTTP and the WebSocket on `bind` with one admin credential for `token`, in a
/// background task until the engine shuts down. Returns the bound address.
///
/// # Errors
///
/// When the address cannot be bound.
pub async fn run_http(engine: RpcEngine, bind: &str, token: &str) -> std::io::Result<SocketAddr> {
    run_http_authorized(engine, bind, vec![RuntimeHttpCredential::new("default", token, Grant::admin())]).await
}

/// [`run_http`] with several independently scoped credentials.
///
/// # Errors
///
/// When the address cannot be bound, or no credential is given.
pub async fn run_http_authorized(engine: RpcEngine, bind: &str, credentials: Vec<RuntimeHttpCredential>) -> std::io::Result<SocketAddr> {
    run_http_with(engine, bind, credentials, HttpOptions::default()).await
}

/// [`run_http_authorized`] with the operator's [`HttpOptions`] (allowed browser origins, the web
/// page).
///
/// # Errors
///
/// As [`run_http_authorized`].
pub async fn run_http_with(engine: RpcEngine, bind: &str, credentials: Vec<RuntimeHttpCredential>, options: HttpOptions) -> std::io::Result<SocketAddr> {
    Ok(Server::builder(engine).bind(bind).credentials(credentials).http(options).websocket(WsOptions::default()).start().await?.addr())
}

/// [`run_http_with`] with only the web page switch.
///
/// # Errors
///
/// As [`run_http_authorized`].
pub async fn run_http_authorized_web(engine: RpcEngine, bind: &str, credentials: Vec<RuntimeHttpCredential>, web: bool) -> std::io::Result<SocketAddr> {
    run_http_with(engine, bind, credentials, HttpOptions { web, ..HttpOptions::default() }).await
}

/// [`run_http_authorized`] with an explicit controller lease duration.
///
/// # Errors
///
/// As [`run_http_authorized`].
pub async fn run_http_authorized_with_lease_ttl(engine: RpcEngine, bind: &str, credentials: Vec<RuntimeHttpCredential>, lease_ttl: Duration) -> std::io::Result<SocketAddr> {
    let server = Server::builder(engine).bind(bind).credentials(credentials).http(HttpOptions::default()).websocket(WsOptions::default()).lease_ttl(lease_ttl);
    Ok(server.start().await?.addr())
}

/// Lifetime handle for an authenticated frontend WebSocket listener on its own port. Dropping
/// the handle detaches the listener without closing the runtime.
pub struct FrontendWebSocketServer {
    handle: ServerHandle,
}

impl FrontendWebSocketServer {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.handle.addr()
    }
}

impl Drop for FrontendWebSocketServer {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// Serves only `/frontend/v2` (and the probes; anything else: 404) on `bind`, with
/// `credentials`, until the engine shuts down or the returned handle is dropped. When HTTP is on
/// too, use [`run_http_authorized`]: it serves `/frontend/v2` on the same port.
///
/// # Errors
///
/// When the address cannot be bound or no credential is given.
pub async fn run_frontend_websocket(engine: RpcEngine, bind: &str, credentials: Vec<RuntimeHttpCredential>) -> std::io::Result<FrontendWebSocketServer> {
    let handle = Server::builder(engine).bind(bind).credentials(credentials).websocket(WsOptions::default()).start().await?;
    Ok(FrontendWebSocketServer { handle })
}
