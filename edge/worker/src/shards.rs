//! [V-STORE] The Worker's side of the outbox: requests to the shards (Durable Objects named
//! by the engine), all at once. How long the request waits for them is the engine's
//! decision (its timer: a shard that does not answer in time is a failed call, the engine
//! answers 503 and nothing is acknowledged), never a hung request. The driver makes the
//! calls (`callShards` in `src/io.js`): this module says which, and reads what came back.

use js_sys::{Array, Uint8Array};
use understudy_core::events::protocol::{self, ShardReply, ShardRequest, BINDING, SHARD_URL};
use wasm_bindgen::prelude::*;

/// The driver's instruction: `[2, binding, url, names, bodies]`, each call's shard and
/// encoded request.
pub fn ask(calls: &[(String, ShardRequest)]) -> JsValue {
    let names = Array::new();
    let bodies = Array::new();
    for (shard, req) in calls {
        names.push(&JsValue::from_str(shard));
        bodies.push(&Uint8Array::from(protocol::encode(req).as_slice()).into());
    }
    let out = Array::new();
    out.push(&JsValue::from(2));
    out.push(&JsValue::from_str(BINDING));
    out.push(&JsValue::from_str(SHARD_URL));
    out.push(&names);
    out.push(&bodies);
    out.into()
}

/// What each call came back with: `got` is one `[kind, bytes or message, status]` per call
/// (kind 1 answered, 2 failed), or why none was made.
pub fn heard(calls: &[(String, ShardRequest)], got: &JsValue) -> Vec<Result<ShardReply, String>> {
    let Some(answers) = got.dyn_ref::<Array>() else {
        let why = got
            .as_string()
            .unwrap_or_else(|| "the shards were not called".into());
        return calls.iter().map(|_| Err(why.clone())).collect();
    };
    calls
        .iter()
        .enumerate()
        .map(|(i, (shard, _))| {
            let a = Array::from(&answers.get(i as u32));
            match a.get(0).as_f64().unwrap_or(2.0) as u8 {
                1 => {
                    let bytes = a
                        .get(1)
                        .dyn_into::<Uint8Array>()
                        .map(|b| b.to_vec())
                        .unwrap_or_default();
                    protocol::decode::<ShardReply>(&bytes).map_err(|e| {
                        format!(
                            "shard {shard} answered {}: {e}",
                            a.get(2).as_f64().unwrap_or(0.0)
                        )
                    })
                }
                _ => Err(format!(
                    "shard {shard}: {}",
                    a.get(1).as_string().unwrap_or_default()
                )),
            }
        })
        .collect()
}
