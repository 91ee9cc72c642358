//! The Understudy Worker: a thin adapter that performs I/O for understudy-core.
use worker::*;

#[event(fetch)]
async fn fetch(_req: Request, _env: Env, _ctx: Context) -> Result<Response> {
    Response::error("not built yet", 503)
}
