//! Security round 2, token hygiene, against the real binary: a token file that group or others
//! may access is refused (as ssh refuses such a key) by `serve`, a credentials file's
//! `token_file`, and `submit`, `status` and `attach`; so is a token shorter than
//! `MIN_TOKEN_BYTES` (32); the token file `serve` generates is private; and the `Bearer` scheme
//! matches without regard to case.

mod security_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;

use security_common::*;

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_token_file_group_or_others_may_access_is_refused_everywhere() {
    let s = Setup::new("loose", "");
    for mode in [0o644, 0o640, 0o604, 0o660, 0o602] {
        let loose = s.file("loose.token", TOKEN, mode).display().to_string();
        match s.serve(&["--token-file", &loose]) {
            Ok(server) => panic!("mode {mode:o}: serve started with a token file others may read: {}", server.stop()),
            Err((code, err)) => {
                assert_eq!(code, Some(2), "mode {mode:o}: {err}");
                assert!(err.contains("is accessible by group or others") && err.contains(&format!("mode {mode:03o}")), "mode {mode:o}: {err}");
                assert!(err.contains(&format!("chmod 600 {loose}")), "mode {mode:o}: says what to do: {err}");
                assert!(!err.contains(TOKEN), "mode {mode:o}: never the token: {err}");
            }
        }
    }
    // A credentials file's token_file, named with the file and line.
    let loose = s.file("watcher.token", TOKEN, 0o644).display().to_string();
    let creds = s.file("credentials.toml", &format!("[credentials.watcher]\ntoken_file = \"{loose}\"\nrole = \"observer\"\n"), 0o600);
    match s.serve(&["--credentials", &creds.display().to_string()]) {
        Ok(server) => panic!("serve started with a credential whose token file others may read: {}", server.stop()),
        Err((code, err)) => {
            assert_eq!(code, Some(2), "{err}");
            assert!(err.contains(&format!("{}:1: credential `watcher`: the token file {loose} is accessible by group or others", creds.display())), "{err}");
        }
    }

    // The clients refuse it too, before connecting; the same token in a private file works.
    let server = s.serve(&[]).expect("serve starts with its generated token");
    let generated = server.token_file.clone().expect("a generated token file");
    let token = std::fs::read_to_string(&generated).expect("the generated token");
    let loose = s.file("client.token", &token, 0o644).display().to_string();
    let private = s.file("private.token", &token, 0o600).display().to_string();
    let url = server.url.clone();
    for (what, args) in [
        ("status", vec!["status", "--url", &url, "--token-file", &loose]),
        ("submit", vec!["submit", "--url", &url, "--token-file", &loose, "hello"]),
        ("attach", vec!["attach", "--url", &url, "--token-file", &loose]),
    ] {
        let out = run(s.command(&args), b"");
        assert!(!out.status.success(), "{what} used a token file others may read: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(&format!("the token file {loose} is accessible by group or others (mode 644)")), "{what}: {err}");
        assert!(!err.contains(&token), "{what}: never the token: {err}");
    }
    let out = run(s.command(&["status", "--url", &url, "--token-file", &private]), b"");
    assert!(out.status.success(), "a private token file works: {}", stderr(&out));
    let out = run(s.command(&["status", "--url", &url, "--token-file", &s.file("read-only.token", &token, 0o400).display().to_string()]), b"");
    assert!(out.status.success(), "a read-only private token file works: {}", stderr(&out));
}

#[test]
fn a_token_shorter_than_32_bytes_is_refused() {
    let s = Setup::new("short", "");
    for (what, token, len) in [("31 bytes", &TOKEN[..31], 31), ("empty", "", 0), ("whitespace", "  \n", 0), ("31 bytes and a newline", &format!("{}\n", &TOKEN[..31]), 31)] {
        let f = s.file("short.token", token, 0o600).display().to_string();
        match s.serve(&["--token-file", &f]) {
            Ok(server) => panic!("{what}: serve started with a short token: {}", server.stop()),
            Err((code, err)) => {
                assert_eq!(code, Some(2), "{what}: {err}");
                assert!(err.contains(&format!("the token in {f} is {len} bytes; a token must be at least 32 bytes")), "{what}: {err}");
            }
        }
        let out = run(s.command(&["status", "--url", "http://127.0.0.1:9/", "--token-file", &f]), b"");
        assert!(!out.status.success() && stderr(&out).contains("a token must be at least 32 bytes"), "{what}: status: {}", stderr(&out));
    }
    let short = s.file("watcher.token", "observer-token-0123456789", 0o600).display().to_string();
    let creds = s.file("credentials.toml", &format!("[credentials.watcher]\ntoken_file = \"{short}\"\nrole = \"observer\"\n"), 0o600);
    match s.serve(&["--credentials", &creds.display().to_string()]) {
        Ok(server) => panic!("serve started with a short credential token: {}", server.stop()),
        Err((_, err)) => assert!(err.contains("credential `watcher`: the token in") && err.contains("is 25 bytes"), "{err}"),
    }
    // The operator configuration's `token` is held to the same length.
    std::fs::write(s.dir.join("config.toml"), "[capabilities.server]\nenabled = true\ntoken = \"tok-short\"\n").expect("config");
    match s.serve(&[]) {
        Ok(server) => panic!("serve started with a short configured token: {}", server.stop()),
        Err((_, err)) => assert!(err.contains("is 9 bytes; a token must be at least 32 bytes"), "{err}"),
    }
    std::fs::write(s.dir.join("config.toml"), "[capabilities.server]\nenabled = true\n").expect("config");
    // Exactly 32 bytes is enough.
    let f = s.file("ok.token", &TOKEN[..32], 0o600).display().to_string();
    let server = s.serve(&["--token-file", &f]).unwrap_or_else(|(c, e)| panic!("32 bytes: {c:?} {e}"));
    let out = run(s.command(&["status", "--url", &server.url, "--token-file", &f]), b"");
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn the_generated_token_file_is_private_and_long() {
    let s = Setup::new("generated", "");
    let server = s.serve(&[]).expect("serve starts");
    let path = server.token_file.clone().expect("a generated token file");
    let meta = std::fs::metadata(&path).expect("the token file exists");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{}", path.display());
    assert_eq!(std::fs::read_to_string(&path).expect("readable").trim().len(), 64);
}

/// `POST /rpc` `status` with the raw `Authorization` header value `auth`: the status code.
fn status_with(url: &str, auth: &str) -> u16 {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(BOUND)).expect("timeout");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
    let req = format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).expect("write");
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

#[test]
fn the_bearer_scheme_matches_without_regard_to_case() {
    let s = Setup::new("bearer", "");
    let f = s.file("admin.token", TOKEN, 0o600).display().to_string();
    let server = s.serve(&["--token-file", &f]).unwrap_or_else(|(c, e)| panic!("{c:?} {e}"));
    let cases = [
        (format!("Bearer {TOKEN}"), 200),
        (format!("bearer {TOKEN}"), 200),
        (format!("BEARER {TOKEN}"), 200),
        (format!("bEaReR {TOKEN}"), 200),
        (format!("Basic {TOKEN}"), 401),
        (format!("Bearer{TOKEN}"), 401),
        (format!("BEARER {}", &TOKEN[1..]), 401),
    ];
    for (auth, want) in cases {
        assert_eq!(status_with(&server.url, &auth), want, "Authorization: {}", auth.split(' ').next().unwrap_or_default());
    }
}
