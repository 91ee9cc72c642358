//! [V-STORE] The Worker's side of the outbox: requests to the shards (Durable Objects named
//! by the engine), all at once. How long the request waits for them is the engine's
//! decision (its timer: a shard that does not answer in time is a failed call, the engine
//! answers 503 and nothing is acknowledged), never a hung request. The calls run in
//! JavaScript: one crossing and one awaited promise for all of them.

use js_sys::{Array, Promise, Uint8Array};
use understudy_core::events::protocol::{self, ShardReply, ShardRequest, BINDING, SHARD_URL};
use wasm_bindgen::prelude::*;
use worker::wasm_bindgen_futures::JsFuture;
use worker::Env;

#[wasm_bindgen(inline_js = r#"
// One [kind, bytes or message, status] per call: kind 1 answered, 2 failed.
export async function us_shards(ns, url, names, bodies) {
  return Promise.all(names.map(async (name, i) => {
    try {
      const stub = ns.get(ns.idFromName(name));
      const res = await stub.fetch(url, { method: "POST", body: bodies[i] });
      return [1, new Uint8Array(await res.arrayBuffer()), res.status];
    } catch (e) {
      return [2, String((e && e.message) || e).split("\n")[0], 0];
    }
  }));
}
"#)]
extern "C" {
    fn us_shards(ns: &JsValue, url: &str, names: Array, bodies: Array) -> Promise;
}

pub async fn call_all(
    env: &Env,
    calls: Vec<(String, ShardRequest)>,
) -> Vec<Result<ShardReply, String>> {
    let ns = match js_sys::Reflect::get(env.as_ref(), &JsValue::from_str(BINDING)) {
        Ok(ns) if ns.is_object() => ns,
        _ => {
            return calls
                .iter()
                .map(|_| Err(format!("outbox binding `{BINDING}` is not bound")))
                .collect()
        }
    };
    let names = Array::new();
    let bodies = Array::new();
    for (shard, req) in &calls {
        names.push(&JsValue::from_str(shard));
        bodies.push(&Uint8Array::from(protocol::encode(req).as_slice()).into());
    }
    let answers = match JsFuture::from(us_shards(&ns, SHARD_URL, names, bodies)).await {
        Ok(v) => Array::from(&v),
        Err(e) => {
            let e = understudy_core::classify::bounded(&format!("{e:?}"));
            return calls.iter().map(|_| Err(e.clone())).collect();
        }
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
