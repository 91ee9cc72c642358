//! Turns the core's [`Rendered`] answer into a `worker::Response` without any fallible step
//! left unhandled.

use understudy_core::disclosure::Rendered;
use worker::{Headers, Response, ResponseBuilder};

pub fn to_response(r: Rendered) -> Response {
    let headers = Headers::new();
    for (name, value) in &r.headers {
        // Values come from the policy or were validated; a refused one is dropped, not fatal.
        let _ = headers.set(name, value);
    }
    ResponseBuilder::new()
        .with_status(r.status)
        .with_headers(headers)
        .fixed(r.body.into_bytes())
}
