//! `openagents attach`: a terminal frontend. Prints a runtime's events live over the WebSocket
//! and answers the agent's approval requests at the terminal.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use clap::Args;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Arguments of `openagents attach`.
#[derive(Args)]
pub struct AttachArgs {
    /// The runtime's URL, as `serve --http` printed it.
    #[arg(long)]
    url: String,
    /// A file holding the bearer token.
    #[arg(long)]
    token_file: String,
    /// Replay events after this sequence number first.
    #[arg(long)]
    since: Option<u64>,
    /// Print each message as one JSON line, and deny approvals instead of asking.
    #[arg(long)]
    json: bool,
}

fn fail(m: impl std::fmt::Display) -> ExitCode {
    eprintln!("openagents attach: {m}");
    ExitCode::from(1)
}

fn describe(ev: &serde_json::Value) -> String {
    let e = &ev["event"];
    let kind = e["type"].as_str().unwrap_or("?");
    let body = match kind {
        "text" => e["text"].as_str().unwrap_or_default().to_owned(),
        "turn_started" => format!("{} on {}", e["assignment"].as_str().unwrap_or_default(), e["runner"].as_str().unwrap_or_default()),
        "turn_completed" => e["result"].as_str().unwrap_or_default().to_owned(),
        "turn_failed" => format!("{} ({})", e["error"]["message"].as_str().unwrap_or_default(), e["error"]["code"].as_str().unwrap_or_default()),
        "approval_requested" | "approval_denied" => e["prompt"].as_str().unwrap_or_default().to_owned(),
        _ => {
            let mut rest = e.clone();
            if let Some(o) = rest.as_object_mut() {
                o.remove("type");
            }
            rest.to_string()
        }
    };
    format!("[{}] {kind}: {body}", ev["seq"])
}

/// Attaches and runs until the runtime shuts down or the connection closes.
pub fn attach(args: AttachArgs) -> ExitCode {
    let token = match std::fs::read_to_string(&args.token_file) {
        Ok(t) => t.trim().to_owned(),
        Err(e) => return fail(format!("cannot read the token file {}: {e}", args.token_file)),
    };
    let Some(rest) = args.url.strip_prefix("http://") else { return fail(format!("`{}` is not an http:// URL", args.url)) };
    let ws_url = format!("ws://{}/frontend/v2", rest.trim_end_matches('/'));
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return ExitCode::from(1) };
    rt.block_on(async move {
        let mut request = match ws_url.as_str().into_client_request() {
            Ok(r) => r,
            Err(e) => return fail(e),
        };
        let Ok(auth) = format!("Bearer {token}").parse() else { return fail("the token is not a valid header value") };
        request.headers_mut().insert("authorization", auth);
        let (socket, _) = match tokio_tungstenite::connect_async(request).await {
            Ok(s) => s,
            Err(e) => return fail(format!("cannot attach to {ws_url}: {e}")),
        };
        let (mut sink, mut stream) = socket.split();
        let params = match args.since {
            Some(s) => serde_json::json!({ "since": s }),
            None => serde_json::json!({}),
        };
        let subscribe = serde_json::json!({"jsonrpc": "2.0", "id": "subscribe", "method": "subscribe", "params": params});
        if let Err(e) = sink.send(Message::text(subscribe.to_string())).await {
            return fail(e);
        }
        eprintln!("attached to {ws_url}; Ctrl-C to detach");
        while let Some(msg) = stream.next().await {
            let text = match msg {
                Ok(Message::Text(t)) => t.to_string(),
                Ok(Message::Close(frame)) => {
                    if let Some(f) = frame {
                        eprintln!("closed by the runtime: {} ({})", f.reason, u16::from(f.code));
                    }
                    break;
                }
                Ok(_) => continue,
                Err(e) => return fail(e),
            };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
            if args.json {
                println!("{v}");
            }
            match v["method"].as_str() {
                Some("frontend.v2.event") if !args.json => println!("{}", describe(&v["params"])),
                Some("frontend.v2.approval") => {
                    let prompt = v["params"]["prompt"].as_str().unwrap_or_default().to_owned();
                    let approved = if args.json {
                        false
                    } else {
                        print!("approval requested: {prompt}\napprove? [y/N] ");
                        let _ = std::io::stdout().flush();
                        tokio::task::spawn_blocking(|| {
                            let mut line = String::new();
                            let _ = std::io::stdin().lock().read_line(&mut line);
                            matches!(line.trim(), "y" | "Y" | "yes")
                        })
                        .await
                        .unwrap_or(false)
                    };
                    let reply = serde_json::json!({"jsonrpc": "2.0", "id": v["id"], "result": {"approved": approved}});
                    if let Err(e) = sink.send(Message::text(reply.to_string())).await {
                        return fail(e);
                    }
                }
                Some("frontend.v2.approval_resolved") if !args.json => println!("approval {} settled elsewhere", v["params"]["request_id"]),
                _ => {
                    if !args.json && v.get("error").is_some() {
                        eprintln!("error: {}", v["error"]["message"]);
                    }
                }
            }
        }
        ExitCode::SUCCESS
    })
}
