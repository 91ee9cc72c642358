//! The Understudy Worker: a thin adapter that performs the I/O understudy-core asks for.
//!
//! `#[event(fetch)]` calls one [`serve::serve`], which always ends in a real response: a
//! handler returning `Err` becomes a bare 500 and a panic kills the isolate, so nothing on
//! the served path returns `Err` or unwraps.
#![forbid(unsafe_code)]

mod analytics;
mod guard;
mod identity;
mod isolate;
mod kv;
mod race;
mod respond;
mod serve;

use worker::{event, Context, Env, Request, Response, Result};

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> Result<Response> {
    Ok(serve::serve(req, env, ctx).await)
}
