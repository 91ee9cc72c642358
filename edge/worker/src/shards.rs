//! [V-STORE] The Worker's side of the outbox: requests to the shards (Durable Objects named
//! by the engine), all at once, each with a time limit — a shard that does not answer is a
//! failed call (the engine answers 503 and nothing is acknowledged), never a hung request.

use std::pin::pin;
use std::time::Duration;

use futures_util::future::{join_all, select, Either};
use understudy_core::events::protocol::{self, ShardReply, ShardRequest, BINDING, SHARD_URL};
use worker::{Delay, Env, Headers, Method, Request, RequestInit};

/// Longest wait for one shard's answer.
const SHARD_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn call_all(
    env: &Env,
    calls: Vec<(String, ShardRequest)>,
) -> Vec<Result<ShardReply, String>> {
    join_all(calls.iter().map(|(shard, req)| call(env, shard, req))).await
}

async fn call(env: &Env, shard: &str, req: &ShardRequest) -> Result<ShardReply, String> {
    let stub = env
        .durable_object(BINDING)
        .and_then(|ns| ns.id_from_name(shard).and_then(|id| id.get_stub()))
        .map_err(|e| format!("outbox binding `{BINDING}`: {e}"))?;
    let body = protocol::encode(req);
    let headers = Headers::new();
    headers
        .set("content-type", "application/octet-stream")
        .map_err(|e| e.to_string())?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(js_sys::Uint8Array::from(body.as_slice()).into()));
    let request = Request::new_with_init(SHARD_URL, &init).map_err(|e| e.to_string())?;
    let work = async {
        let mut resp = stub
            .fetch_with_request(request)
            .await
            .map_err(|e| format!("shard {shard}: {e}"))?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| format!("shard {shard}: {e}"))?;
        protocol::decode::<ShardReply>(&bytes)
            .map_err(|e| format!("shard {shard} answered {}: {e}", resp.status_code()))
    };
    let out = match select(pin!(work), pin!(Delay::from(SHARD_TIMEOUT))).await {
        Either::Left((r, _)) => r,
        Either::Right(((), _)) => Err(format!("shard {shard} did not answer in time")),
    };
    out
}
