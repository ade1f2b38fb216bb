//! The browser `Origin` check and CORS: which pages may call the server across origins
//! ([`crate::RpcServer::allow_origins`]), the preflight answer, and the headers that let an
//! allowed page read a response. Decided as openagents' runtime decides them.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};

/// How long a browser may cache a CORS preflight answer: ten minutes, as openagents' runtime
/// (`CORS_MAX_AGE`), so a page does not ask before every call, and a changed list reaches
/// browsers soon.
pub const CORS_MAX_AGE: Duration = Duration::from_secs(600);

/// An entry of [`crate::RpcServer::allow_origins`] that is not one browser origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    /// A wildcard (`*`, `https://*.example.com`): an allowed origin is listed exactly, so no page
    /// a caller did not name can call the server from a browser that holds its token.
    #[error("`{0}` is a wildcard: list each allowed origin exactly, as `https://app.example.com` or `http://localhost:3000`")]
    Wildcard(String),
    /// Not `http://` or `https://`, a host, and an optional port, with nothing after.
    #[error("`{origin}` is not a browser origin ({why}): write `scheme://host[:port]`, as `https://app.example.com` or `http://localhost:3000`")]
    NotAnOrigin {
        /// The entry as given (at most 128 bytes of it).
        origin: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// An origin as browsers serialize it: `scheme://host[:port]`, lowercase, the scheme's default
/// port left out.
pub(crate) fn normalize(origin: &str) -> Result<String, OriginError> {
    let not = |why| OriginError::NotAnOrigin { origin: crate::bounded(origin, 128).into_owned(), why };
    if origin.contains('*') {
        return Err(OriginError::Wildcard(crate::bounded(origin, 128).into_owned()));
    }
    let lower = origin.trim().to_ascii_lowercase();
    let (scheme, rest) = lower.split_once("://").ok_or_else(|| not("no `scheme://`"))?;
    let default_port = match scheme {
        "http" => "80",
        "https" => "443",
        _ => return Err(not("the scheme is not http or https")),
    };
    if rest.is_empty() {
        return Err(not("no host"));
    }
    if rest.contains(['/', '?', '#', '@', ' ']) {
        return Err(not("an origin has no path, query, fragment or user"));
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => (h, Some(p)),
        _ => (rest, None),
    };
    if host.is_empty() || (host.contains(':') && !(host.starts_with('[') && host.ends_with(']'))) {
        return Err(not("the host is empty, or an IPv6 address without brackets"));
    }
    match port {
        None => Ok(format!("{scheme}://{host}")),
        Some(p) if !p.bytes().all(|b| b.is_ascii_digit()) || p.parse::<u16>().is_err() || p.starts_with('0') => Err(not("the port is not a number from 1 to 65535")),
        Some(p) if p == default_port => Ok(format!("{scheme}://{host}")),
        Some(p) => Ok(format!("{scheme}://{host}:{p}")),
    }
}

/// What a request's `Origin` is to the server.
#[derive(Debug)]
pub(crate) enum Caller {
    /// No `Origin`: not a browser's request (or a same-origin `GET`), not checked.
    NoOrigin,
    /// A page of the server's own origin.
    Own,
    /// A page of an allowed origin: its `Origin` value, to echo in CORS headers.
    Allowed(HeaderValue),
    /// Any other page.
    Foreign,
}

/// Who a request comes from: see [`Caller`]. Origins are compared normalized (case and a default
/// port do not matter). A page is the server's own when its origin is `http://` or `https://`
/// and the request's `Host`, and that host is an IP address or `localhost`: names a DNS
/// rebinding page can take (its own, pointed at this server's address) count only when listed
/// in `allowed`, as openagents' runtime counts only the hosts it answers to. An `Origin` that is
/// no origin (`null`, a wildcard) is foreign.
pub(crate) fn caller(allowed: &[String], headers: &HeaderMap) -> Caller {
    let Some(value) = headers.get(header::ORIGIN) else { return Caller::NoOrigin };
    let Some(origin) = value.to_str().ok().and_then(|t| normalize(t).ok()) else { return Caller::Foreign };
    if allowed.contains(&origin) {
        return Caller::Allowed(value.clone());
    }
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else { return Caller::Foreign };
    let scheme = origin.split_once("://").map_or("", |(s, _)| s);
    match normalize(&format!("{scheme}://{host}")) {
        Ok(own) if own == origin && rebind_proof(host) => Caller::Own,
        _ => Caller::Foreign,
    }
}

/// Whether the `Host` value `host` names this server by a name DNS cannot point elsewhere: an
/// IP address (with or without a port) or `localhost`.
fn rebind_proof(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => return rest.split(']').next().is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok()),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    name.parse::<std::net::Ipv4Addr>().is_ok() || name.eq_ignore_ascii_case("localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_normalized_or_refused() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("https://App.Example.com", Ok("https://app.example.com")),
            ("https://app.example.com:443", Ok("https://app.example.com")),
            ("http://localhost:80", Ok("http://localhost")),
            ("http://localhost:3000", Ok("http://localhost:3000")),
            ("http://[::1]:8080", Ok("http://[::1]:8080")),
            ("http://[::1]", Ok("http://[::1]")),
            ("*", Err("wildcard")),
            ("https://*.example.com", Err("wildcard")),
            ("null", Err("not")),
            ("ftp://example.com", Err("not")),
            ("https://example.com/", Err("not")),
            ("https://example.com/app", Err("not")),
            ("https://", Err("not")),
            ("https://example.com:0", Err("not")),
            ("https://example.com:99999", Err("not")),
            ("https://example.com:", Err("not")),
            ("https://example.com:+443", Err("not")),
            ("https://example.com:4 43", Err("not")),
            ("http://::1", Err("not")),
        ];
        for (input, expected) in cases {
            match (normalize(input), expected) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{input}"),
                (Err(OriginError::Wildcard(_)), Err("wildcard")) | (Err(OriginError::NotAnOrigin { .. }), Err("not")) => {}
                (got, want) => panic!("{input}: got {got:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn own_origin_only_under_a_name_dns_cannot_rebind() {
        let check = |origin: &str, host: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ORIGIN, HeaderValue::from_str(origin).expect("value"));
            h.insert(header::HOST, HeaderValue::from_str(host).expect("value"));
            matches!(caller(&[], &h), Caller::Own)
        };
        assert!(check("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(check("https://LOCALHOST:8080", "localhost:8080"));
        assert!(check("http://[::1]:8080", "[::1]:8080"));
        assert!(check("http://127.0.0.1", "127.0.0.1:80"), "a default port is no port");
        assert!(check("https://localhost:443", "LOCALHOST"));
        assert!(!check("http://localhost:80/", "localhost"), "not an origin");
        assert!(!check("http://127.0.0.1:8080", "127.0.0.1:8080/x"), "not a host");
        assert!(!check("http://127.0.0.1:8081", "127.0.0.1:8080"), "another port");
        assert!(!check("http://rebound.example:8080", "rebound.example:8080"), "a DNS name must be listed");
        assert!(!check("null", "127.0.0.1:8080"));
    }
}
