//! `openagents attach`: a terminal frontend. Prints a runtime's events live over the WebSocket
//! and answers the agent's approval requests at the terminal.
//!
//! Everything it prints may come from a runner, so nothing reaches the terminal raw: control
//! characters (an ANSI escape could rewrite the question on screen) and the invisible
//! characters that reorder or hide text are shown escaped (`\x1b`, `\u{202e}`), and the
//! prompt's exact text is printed, quoted, before the question. Messages are decoded exactly
//! (a key given twice is refused), an approval request through its generated type.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use clap::Args;
use futures_util::{SinkExt, StreamExt};
use openagents_protocol::FrontendApprovalRequest;
use openagents_protocol::rt;
use serde_json::Value;
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

/// Whether `c` must not reach a terminal raw: a control character (C0, DEL, C1), or one that
/// reorders or hides text (bidirectional overrides and isolates, zero-width characters).
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// `s` for a terminal: control characters escaped (`\n`, `\r`, `\t`, `\x1b`, `\x9b`),
/// characters that reorder or hide text as `\u{…}`, and `\` doubled so an escape shown is never
/// ambiguous; with `quote`, `"` is escaped too.
pub(crate) fn printable(s: &str, quote: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' if quote => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A JSON line for a terminal: serde_json escapes C0 controls itself; DEL, C1 controls and the
/// characters that reorder or hide text become `\uXXXX` escapes, so the line is still the same
/// JSON (they can only occur inside strings).
pub(crate) fn json_line(v: &Value) -> String {
    let text = v.to_string();
    if !text.chars().any(is_unsafe) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A message decoded exactly: one JSON document, no key given twice at any depth.
fn exact_json(text: &str) -> Option<Value> {
    rt::parse_value_exact(text.as_bytes()).ok()
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
    printable(&format!("[{}] {kind}: {body}", ev["seq"]), false)
}

/// Attaches and runs until the runtime shuts down or the connection closes.
pub fn attach(args: AttachArgs) -> ExitCode {
    let token = match openagents_sdk::server::read_token_file(std::path::Path::new(&args.token_file)) {
        Ok(t) => t,
        Err(e) => return fail(e),
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
                        eprintln!("closed by the runtime: {} ({})", printable(f.reason.as_str(), false), u16::from(f.code));
                    }
                    break;
                }
                Ok(_) => continue,
                Err(e) => return fail(e),
            };
            let Some(v) = exact_json(&text) else {
                eprintln!("openagents attach: ignoring a message that is not exact JSON (not JSON, or a key given twice)");
                continue;
            };
            if args.json {
                println!("{}", json_line(&v));
            }
            match v["method"].as_str() {
                Some("frontend.v2.event") if !args.json => println!("{}", describe(&v["params"])),
                Some("frontend.v2.approval") => {
                    let request = match rt::parse_validated::<FrontendApprovalRequest>(text.as_bytes()) {
                        Ok(r) => r,
                        Err(e) => {
                            // Unreadable: answer a denial when the request can be named.
                            eprintln!("openagents attach: denying an approval request that is not valid: {}", printable(&e.to_string(), false));
                            if let Some(id) = v["id"].as_str() {
                                let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {"approved": false}});
                                if let Err(e) = sink.send(Message::text(reply.to_string())).await {
                                    return fail(e);
                                }
                            }
                            continue;
                        }
                    };
                    let approved = if args.json {
                        false
                    } else {
                        // The exact text first, quoted and escaped, so nothing in it can restyle,
                        // move or hide what is being approved.
                        print!(
                            "approval requested ({}); the prompt's exact text, control characters escaped:\n  \"{}\"\napprove? [y/N] ",
                            printable(&request.id, false),
                            printable(&request.params.prompt, true)
                        );
                        let _ = std::io::stdout().flush();
                        tokio::task::spawn_blocking(|| {
                            let mut line = String::new();
                            let _ = std::io::stdin().lock().read_line(&mut line);
                            matches!(line.trim(), "y" | "Y" | "yes")
                        })
                        .await
                        .unwrap_or(false)
                    };
                    let reply = serde_json::json!({"jsonrpc": "2.0", "id": request.id, "result": {"approved": approved}});
                    if let Err(e) = sink.send(Message::text(reply.to_string())).await {
                        return fail(e);
                    }
                }
                Some("frontend.v2.approval_resolved") if !args.json => println!("approval {} settled elsewhere", printable(&v["params"]["request_id"].to_string(), false)),
                _ => {
                    if !args.json && v.get("error").is_some() {
                        eprintln!("error: {}", printable(&v["error"]["message"].to_string(), false));
                    }
                }
            }
        }
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_unsafe_reaches_the_terminal() {
        let cases: &[(&str, bool, &str)] = &[
            ("plain text", false, "plain text"),
            ("\u{1b}[2K\rMay I?", false, "\\x1b[2K\\rMay I?"),
            ("a\nb\tc\u{7f}\u{9b}", false, "a\\nb\\tc\\x7f\\x9b"),
            ("rm \u{202e}txt.exe", false, "rm \\u{202e}txt.exe"),
            ("say \"hi\" \\x1b", true, "say \\\"hi\\\" \\\\x1b"),
            ("é ✓", false, "é ✓"),
        ];
        for (input, quote, want) in cases {
            assert_eq!(printable(input, *quote), *want, "{input:?}");
        }
        let line = json_line(&serde_json::json!({"p": "\u{1b}x\u{9b}y\u{202e}"}));
        assert_eq!(line, r#"{"p":"\u001bx\u009by\u202e"}"#);
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap()["p"], "\u{1b}x\u{9b}y\u{202e}");
    }
}
