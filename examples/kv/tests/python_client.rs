//! The Python generated from the kv schema (what `openagents-codegen python --schema
//! examples/kv/schema` writes, here through the library's `Config::generate_python`) drives the
//! real `kv-server` with `openagents.rpc` over HTTP, the WebSocket and stdio (a `kv-server
//! --stdio` child of the script's own), `watch` notifications included: tests/python/drive.py,
//! run by the repository's virtualenv (`.venv`, or the one `OPENAGENTS_VENV` names), which
//! `clients/python/ensure-venv.sh` makes when it is missing, as the other suites do.

mod common;

use std::path::{Path, PathBuf};

use common::Server;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    let venv = std::env::var_os("OPENAGENTS_VENV").map_or_else(|| manifest().join("../../.venv"), PathBuf::from);
    let py = venv.join("bin/python");
    if !py.exists() {
        let made = std::process::Command::new("bash").arg(manifest().join("../../clients/python/ensure-venv.sh")).env("OPENAGENTS_VENV", &venv).status();
        assert!(made.is_ok_and(|s| s.success()), "clients/python/ensure-venv.sh could not make the virtualenv at {}", venv.display());
    }
    assert!(py.exists(), "no Python at {} after clients/python/ensure-venv.sh", py.display());
    py
}

#[tokio::test]
async fn the_generated_python_drives_the_server() {
    let py = python();
    let dir = std::env::temp_dir().join(format!("kv-python-{}", std::process::id()));
    let package = dir.join("kv_client");
    std::fs::create_dir_all(&package).expect("temp folder");
    let files = openagents_codegen::Config::new().schema_dir(manifest().join("schema")).generate_python().expect("the kv schema generates Python");
    for (name, text) in files {
        std::fs::write(package.join(name), text).expect("write");
    }
    let server = Server::start(None).await;
    let out = tokio::process::Command::new(&py)
        .arg(manifest().join("tests/python/drive.py"))
        .args(["kv_client", &server.rpc_url(), &server.ws_url(), env!("CARGO_BIN_EXE_kv-server")])
        .env("PYTHONPATH", &dir)
        .output()
        .await
        .expect("python runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "drive.py failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // 8 checks over HTTP, 10 over each of the WebSocket and stdio (3 of them `watch`), and 2 with
    // the asynchronous client over each of those two.
    assert_eq!(stdout.lines().filter(|l| l.starts_with("ok ")).count(), 32, "{stdout}");
}
