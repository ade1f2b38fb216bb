// A dispatch written for the methods of `methods.json` (echo, ping), compiled against the
// `Method` enum of `methods_extra.json`, which adds `sleep`: the exhaustive match must not
// compile (E0004), so a new method can never go unhandled.
use openagents_conformance::fixtures::methods_extra::Method;

fn dispatch(method: Method) -> &'static str {
    match method {
        Method::Echo(_) => "echo",
        Method::Ping(_) => "ping",
    }
}

fn main() {
    let _ = dispatch;
}
