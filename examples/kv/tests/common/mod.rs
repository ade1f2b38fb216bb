//! Starting the real `kv-server` binary on loopback for the tests.

#![allow(dead_code)]

use std::process::Stdio;

use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

/// A running `kv-server --http 127.0.0.1:0`: the process and its base URL (`http://ADDR`).
pub struct Server {
    pub child: Child,
    pub base: String,
}

impl Server {
    /// Starts it (with `--token` when given) and waits for its readiness line.
    pub async fn start(token: Option<&str>) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kv-server"));
        cmd.args(["--http", "127.0.0.1:0"]).stdout(Stdio::piped()).kill_on_drop(true);
        if let Some(t) = token {
            cmd.args(["--token", t]);
        }
        let mut child = cmd.spawn().expect("kv-server starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        tokio::io::BufReader::new(stdout).read_line(&mut line).await.expect("a readiness line");
        let base = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("a readiness line, got {line:?}")).to_owned();
        Server { child, base }
    }

    /// `http://ADDR/rpc`.
    pub fn rpc_url(&self) -> String {
        format!("{}/rpc", self.base)
    }

    /// `ws://ADDR/rpc`.
    pub fn ws_url(&self) -> String {
        format!("{}/rpc", self.base.replacen("http://", "ws://", 1))
    }
}

/// `kv-server --stdio`, ready for a `LineTransport`.
pub fn stdio_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kv-server"));
    cmd.arg("--stdio");
    cmd
}
