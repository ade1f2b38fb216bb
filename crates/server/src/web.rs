//! The web page: `GET /` and `GET /assets/…` serve a frontend for `/frontend/v2`, built from
//! `clients/web` and embedded in the binary (the bundle is checked in under `crates/server/web`,
//! so building this crate needs no Node.js). The page and its assets need no token: everything
//! the page does afterwards goes through the authenticated WebSocket, with the token a person
//! pastes in (or the URL fragment `#token=…`, which a browser never sends).
//!
//! Every response carries strict headers: a `Content-Security-Policy` that lets the page load
//! scripts, styles and images and open connections only from its own origin (`connect-src
//! 'self'` covers `ws:` to the same host), no inline script, no framing, no forms;
//! `X-Content-Type-Options: nosniff`; `Referrer-Policy: no-referrer`.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;

/// The page's `Content-Security-Policy`.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The prefix every asset is served under.
pub const ASSETS_PREFIX: &str = "/assets/";

/// The embedded files: (path, content type, bytes).
const FILES: &[(&str, &str, &[u8])] = &[
    ("/", "text/html; charset=utf-8", include_bytes!("../web/index.html")),
    ("/assets/app.js", "text/javascript; charset=utf-8", include_bytes!("../web/assets/app.js")),
    ("/assets/app.css", "text/css; charset=utf-8", include_bytes!("../web/assets/app.css")),
    ("/assets/icon.svg", "image/svg+xml", include_bytes!("../web/assets/icon.svg")),
];

/// Adds the page's security headers to a response.
pub fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    headers.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    response
}

fn file(content_type: &'static str, bytes: &'static [u8]) -> Response {
    let mut r = Response::new(Body::from(bytes));
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The page is small and changes with the binary: always ask again.
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    secure(r)
}

/// The routes `GET /` and `GET /assets/…` (one per embedded file), for any router state.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut router = Router::new();
    for &(path, content_type, bytes) in FILES {
        router = router.route(path, get(move || async move { file(content_type, bytes) }));
    }
    router
}

/// The embedded paths (for tests and documentation).
pub fn paths() -> impl Iterator<Item = &'static str> {
    FILES.iter().map(|(p, _, _)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_under_the_prefix_and_non_empty() {
        for &(path, _, bytes) in FILES {
            assert!(path == "/" || path.starts_with(ASSETS_PREFIX), "{path}");
            assert!(!bytes.is_empty(), "{path} is empty");
        }
    }

    #[test]
    fn the_page_loads_only_its_own_assets() {
        let html = std::str::from_utf8(FILES[0].2).expect("utf-8");
        for (i, _) in html.match_indices("src=") {
            let rest = &html[i + 5..];
            assert!(rest.starts_with("/assets/"), "a script or image from elsewhere: {}", &html[i..(i + 60).min(html.len())]);
        }
        assert!(!html.contains("<script>"), "no inline script (the CSP forbids it)");
        assert!(!html.contains("style="), "no inline style (the CSP forbids it)");
    }
}
