//! The kv server: the generated `service::Service` implemented by `kv::Store`, served by
//! openagents-rpc.
//!
//! ```text
//! kv-server --stdio                       one JSON-RPC message per line on stdin/stdout
//! kv-server --http 127.0.0.1:8080         POST /rpc, the WebSocket GET /rpc, GET /health
//!           [--token TOKEN]               require `Authorization: Bearer TOKEN` (HTTP, WebSocket)
//! ```
//!
//! With `--http` it prints `listening on http://ADDR` once it accepts (port 0 picks a free one).
//! Ctrl-C (or SIGTERM) stops it gracefully: calls in flight answer first.

use std::process::ExitCode;

use kv::{Store, service};
use openagents_rpc::{Identity, RpcServer};

const USAGE: &str = "usage: kv-server --stdio | kv-server --http ADDR [--token TOKEN]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut stdio, mut http, mut token) = (false, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--stdio" => stdio = true,
            "--http" => http = it.next().cloned(),
            "--token" => token = it.next().cloned(),
            "--help" | "-h" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("kv-server: unknown argument `{other}`\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    if stdio == http.is_some() {
        eprintln!("kv-server: give --stdio or --http ADDR\n{USAGE}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kv-server: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let mut server = RpcServer::new(service::ServiceHandler::new(Store::default()));
    if let Some(token) = token {
        server = server.authenticator(move |t: &str| (t == token).then(|| Identity::new("token")));
    }
    let result = runtime.block_on(async move {
        let shutdown = server.shutdown().clone();
        tokio::spawn(async move {
            stop_signal().await;
            shutdown.trigger();
        });
        match http {
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(&addr).await?;
                println!("listening on http://{}", listener.local_addr()?);
                server.serve_http(listener).await
            }
            None => server.serve_stdio().await,
        }
    });
    // Stdin is read on a blocking thread that a stop signal cannot interrupt: the calls in flight
    // have answered by now, so the runtime goes without waiting for that read.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kv-server: {e}");
            ExitCode::from(1)
        }
    }
}

/// Ctrl-C, or SIGTERM on Unix.
async fn stop_signal() {
    #[cfg(unix)]
    {
        let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
