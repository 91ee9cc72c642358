//! What lives as long as the isolate: the engine (the bake, decoded once, and the breaker,
//! write-through map and counters it keeps). State is per isolate, never shared between
//! isolates or locations (docs/adr/002-per-isolate-breaker.md).

use std::cell::RefCell;
use std::collections::HashMap;

use understudy_core::bake::{self, Bake};
use understudy_core::engine::Engine;
use understudy_core::Millis;
use wasm_bindgen::{JsCast, JsValue};

/// The global the JS entry sets to the `understudy.bake` custom section's bytes
/// (`WebAssembly.Module.customSections(module, "understudy.bake")[0]`, as a `Uint8Array`).
pub const BAKE_GLOBAL: &str = "__UNDERSTUDY_BAKE";

thread_local! {
    static ENGINE: RefCell<Option<Engine<'static>>> = const { RefCell::new(None) };
    static BINDINGS: RefCell<HashMap<String, Option<String>>> = RefCell::new(HashMap::new());
}

/// A secret's or var's value, read once per isolate with `read`.
pub fn binding(name: &str, read: impl FnOnce() -> Option<String>) -> Option<String> {
    if let Some(v) = BINDINGS.with(|b| b.borrow().get(name).cloned()) {
        return v;
    }
    let v = read();
    BINDINGS.with(|b| b.borrow_mut().insert(name.to_string(), v.clone()));
    v
}

/// Runs `f` on the isolate's engine, decoding the bake on first use. Never held across an
/// await. A bake that cannot be used is not cached: it costs one global lookup per request
/// until a fixed deployment replaces the isolate.
pub fn with_engine<T>(f: impl FnOnce(&mut Engine<'static>) -> T) -> Result<T, String> {
    ENGINE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let bake = load()?;
            // The bake lives exactly as long as the isolate: leaking it once gives the engine
            // (and every request's flight) a `'static` borrow of it.
            let bake: &'static Bake = Box::leak(Box::new(bake));
            *slot = Some(Engine::new(bake)?);
        }
        match slot.as_mut() {
            Some(engine) => Ok(f(engine)),
            None => Err("the engine could not be created".to_string()),
        }
    })
}

fn load() -> Result<Bake, String> {
    let v = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str(BAKE_GLOBAL))
        .map_err(|_| format!("`globalThis.{BAKE_GLOBAL}` cannot be read"))?;
    let bytes = if v.is_undefined() || v.is_null() {
        Vec::new() // decode() reports it as missing
    } else if let Some(a) = v.dyn_ref::<js_sys::Uint8Array>() {
        a.to_vec()
    } else if v.is_instance_of::<js_sys::ArrayBuffer>() {
        js_sys::Uint8Array::new(&v).to_vec()
    } else {
        return Err(format!("`globalThis.{BAKE_GLOBAL}` is not a Uint8Array; the JS entry must set it from the module's custom section"));
    };
    bake::decode(&bytes).map_err(|e| e.to_string())
}

/// Wall-clock milliseconds. Inside a Worker this only advances across I/O.
pub fn now() -> Millis {
    Millis(js_sys::Date::now() as u64)
}

/// A seed for the request's random source (correlation and trace IDs, retry jitter).
/// `Math.random` suffices: none of these is a secret.
pub fn seed() -> u64 {
    let hi = (js_sys::Math::random() * 4_294_967_296.0) as u64;
    let lo = (js_sys::Math::random() * 4_294_967_296.0) as u64;
    (hi << 32) | lo
}

/// Fills `buf` from `crypto.getRandomValues` (the seal's nonces must be unpredictable and
/// never repeat); `false` when the runtime has no Web Crypto.
pub fn random_bytes(buf: &mut [u8]) -> bool {
    let got = (|| -> Result<(), JsValue> {
        let crypto = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("crypto"))?;
        let fill: js_sys::Function =
            js_sys::Reflect::get(&crypto, &JsValue::from_str("getRandomValues"))?.dyn_into()?;
        let array = js_sys::Uint8Array::new_with_length(buf.len() as u32);
        fill.call1(&crypto, &array)?;
        array.copy_to(buf);
        Ok(())
    })();
    got.is_ok()
}
