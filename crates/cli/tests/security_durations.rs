//! Security round 2, durations, against the real binary: a duration read from a flag or from
//! the operator's registry is bounded (at most one day), and an absurd one is refused at
//! startup with a clear error (the registry's naming file and line) instead of overflowing a
//! deadline later (`--lease-ttl 18446744073709551615` used to make every `submit` panic).

mod security_common;

use security_common::*;

#[test]
fn an_absurd_lease_ttl_is_refused_at_startup() {
    let s = Setup::new("lease", "");
    for value in ["18446744073709551615", "86401", "0", "-1"] {
        match s.serve(&[&format!("--lease-ttl={value}")]) {
            Ok(server) => {
                // What the old code did: start, then panic on the first submit.
                let token = server.token_file.clone().map(|p| p.display().to_string()).unwrap_or_default();
                let out = run(s.command(&["submit", "--url", &server.url, "--token-file", &token, "hello"]), b"");
                panic!("--lease-ttl {value} was accepted (submit: {:?}): {}", out.status.code(), server.stop());
            }
            Err((code, err)) => {
                assert_eq!(code, Some(2), "--lease-ttl {value}: {err}");
                assert!(err.contains("--lease-ttl") && err.contains(value), "--lease-ttl {value}: names the flag and the value: {err}");
            }
        }
    }
}

#[test]
fn the_longest_lease_ttl_serves_turns() {
    let s = Setup::new("lease-max", "");
    let server = s.serve(&["--lease-ttl", "86400"]).unwrap_or_else(|(c, e)| panic!("{c:?} {e}"));
    let token = server.token_file.clone().expect("a generated token file").display().to_string();
    let out = run(s.command(&["submit", "--url", &server.url, "--token-file", &token, "hello"]), b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().last(), Some("hello"));
    let out = run(s.command(&["status", "--url", &server.url, "--token-file", &token]), b"");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status is JSON");
    assert_eq!(status["lease"]["holder"], "admin", "{status}");
    assert_eq!(status["counters"]["completed"], 1, "{status}");
}

#[test]
fn an_absurd_runner_timeout_is_refused_naming_file_and_line() {
    // (timeout_s as written, what the message says)
    let cases = [("9223372036854775807", "timeout_s must be at most 86400 (one day), is 9223372036854775807"), ("86401", "timeout_s must be at most 86400 (one day), is 86401")];
    for (value, message) in cases {
        let s = Setup::new("timeout", &format!("timeout_s = {value}\n"));
        let registry = s.dir.join("runners.toml");
        // The `ask` runner's `timeout_s` is the registry's line 6.
        let want = format!("{}:6: runner `ask`: {message}", registry.display());
        match s.serve(&[]) {
            Ok(server) => panic!("timeout_s = {value} was accepted: {}", server.stop()),
            Err((code, err)) => {
                assert_eq!(code, Some(2), "{value}: {err}");
                assert!(err.contains(&want), "{value}: {err}");
            }
        }
        let out = run(s.command(&["serve", "--stdio", "--runner", "echo"]), b"");
        assert_eq!(out.status.code(), Some(2), "{value}: serve --stdio: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains(&want), "{value}: {}", String::from_utf8_lossy(&out.stderr));
        let out = run(s.command(&["run", "--runner", "echo", "hello"]), b"");
        assert_eq!(out.status.code(), Some(2), "{value}: run: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains(&want), "{value}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // One day is allowed.
    let s = Setup::new("timeout-max", "timeout_s = 86400\n");
    let out = run(s.command(&["run", "--runner", "ask", "hello"]), b"");
    assert_eq!(out.status.code(), Some(1), "a denied ask turn fails, it does not panic: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("denied: hello"), "{}", String::from_utf8_lossy(&out.stderr));
}
