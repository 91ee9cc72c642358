//! [E-CASCADE] [E-LIVE] Workers KV: tier reads raced against their timeout (a KV read cannot
//! be aborted, so the edge just stops waiting) and background write-through.

use std::pin::pin;
use std::time::Duration;

use futures_util::future::{select, Either};
use understudy_core::cascade::KvRead;
use understudy_core::writethrough::KvWrite;
use worker::{console_log, Delay, Env};

use crate::isolate;

pub async fn read(env: &Env, binding: &str, key: &str, timeout_ms: u64) -> KvRead {
    let store = match env.kv(binding) {
        Ok(s) => s,
        Err(_) => return KvRead::Error(format!("KV binding `{binding}` is not bound")),
    };
    let get = store.get(key).text_with_metadata::<serde_json::Value>();
    let timer = Delay::from(Duration::from_millis(timeout_ms));
    match select(pin!(get), pin!(timer)).await {
        Either::Left((Ok((value, metadata)), _)) => KvRead::Value { value, metadata },
        Either::Left((Err(e), _)) => KvRead::Error(e.to_string()),
        Either::Right(((), _)) => KvRead::TimedOut,
    }
}

/// Performs the planned writes; a failed one is reported to the engine, which forgets it so
/// a later live answer writes again.
pub async fn write_all(env: Env, writes: Vec<KvWrite>, correlation_id: String) {
    for w in writes {
        let result = async {
            let store = env.kv(&w.binding).map_err(|e| e.to_string())?;
            store
                .put(&w.key, w.value.as_str())
                .map_err(|e| e.to_string())?
                .metadata(&w.metadata)
                .map_err(|e| e.to_string())?
                .execute()
                .await
                .map_err(|e| e.to_string())
        }
        .await;
        if let Err(e) = result {
            if let Ok(line) = isolate::with_engine(|en| en.write_failed(&w, &e, &correlation_id)) {
                console_log!("{}", line);
            }
        }
    }
}
