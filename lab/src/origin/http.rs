//! What the origin's model and control endpoints share about HTTP: reading a bounded
//! request body, and a JSON response.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::answer::SimBody;

/// A request body must arrive within this.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) enum BodyError {
    TooLarge,
    Io,
    Timeout,
}

/// Reads a request body of at most `limit` bytes within [`BODY_TIMEOUT`].
pub(crate) async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, BodyError> {
    let collect = Limited::new(body, limit).collect();
    match tokio::time::timeout(BODY_TIMEOUT, collect).await {
        Err(_) => Err(BodyError::Timeout),
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(BodyError::TooLarge)
            } else {
                Err(BodyError::Io)
            }
        }
    }
}

/// A JSON response with `status`; control answers and request errors use it.
pub(crate) fn json_response(status: StatusCode, body: Bytes) -> Response<SimBody> {
    let mut r = Response::new(SimBody::full(body, None));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}
