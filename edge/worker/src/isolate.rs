//! What lives as long as the isolate: the bake (read once from the JS entry's global), the
//! compiled parameter rules, and the write-through map. State is per isolate, never shared
//! between isolates or locations.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;

use understudy_core::bake::{self, Bake};
use understudy_core::breaker::Breaker;
use understudy_core::metrics::Counters;
use understudy_core::request::Validator;
use understudy_core::writethrough::WriteThrough;
use wasm_bindgen::{JsCast, JsValue};

/// The global the JS entry sets to the `understudy.bake` custom section's bytes
/// (`WebAssembly.Module.customSections(module, "understudy.bake")[0]`, as a `Uint8Array`).
pub const BAKE_GLOBAL: &str = "__UNDERSTUDY_BAKE";

pub struct Loaded {
    pub bake: Bake,
    pub validator: Validator,
    /// [E-BREAKER] This isolate's breaker (see docs/adr/002-per-isolate-breaker.md).
    pub breaker: RefCell<Breaker>,
}

thread_local! {
    static LOADED: OnceCell<Rc<Loaded>> = const { OnceCell::new() };
    static WRITES: RefCell<WriteThrough> = RefCell::new(WriteThrough::default());
    static COUNTERS: RefCell<Counters> = RefCell::new(Counters::default());
}

/// The bake, decoded on first use. A failure is not cached: it costs one global lookup per
/// request until a fixed deployment replaces the isolate.
pub fn loaded() -> Result<Rc<Loaded>, String> {
    if let Some(l) = LOADED.with(|c| c.get().cloned()) {
        return Ok(l);
    }
    let bytes = bake_bytes()?;
    let bake = bake::decode(&bytes).map_err(|e| e.to_string())?;
    let validator = Validator::new(&bake.policy)
        .map_err(|e| format!("the baked policy is invalid: {e}; re-bake"))?;
    let breaker = RefCell::new(Breaker::new(&bake.policy.breaker));
    let l = Rc::new(Loaded {
        bake,
        validator,
        breaker,
    });
    LOADED.with(|c| {
        let _ = c.set(l.clone());
    });
    Ok(l)
}

fn bake_bytes() -> Result<Vec<u8>, String> {
    let v = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str(BAKE_GLOBAL))
        .map_err(|_| format!("`globalThis.{BAKE_GLOBAL}` cannot be read"))?;
    if v.is_undefined() || v.is_null() {
        return Ok(Vec::new()); // decode() reports it as missing
    }
    if let Some(a) = v.dyn_ref::<js_sys::Uint8Array>() {
        return Ok(a.to_vec());
    }
    if v.is_instance_of::<js_sys::ArrayBuffer>() {
        return Ok(js_sys::Uint8Array::new(&v).to_vec());
    }
    Err(format!("`globalThis.{BAKE_GLOBAL}` is not a Uint8Array; the JS entry must set it from the module's custom section"))
}

/// Runs `f` on the isolate's write-through map (never held across an await).
pub fn with_writes<T>(f: impl FnOnce(&mut WriteThrough) -> T) -> T {
    WRITES.with(|w| f(&mut w.borrow_mut()))
}

/// Runs `f` on the isolate's counters (never held across an await).
pub fn with_counters<T>(f: impl FnOnce(&mut Counters) -> T) -> T {
    COUNTERS.with(|c| f(&mut c.borrow_mut()))
}

/// Wall-clock milliseconds. Inside a Worker this only advances across I/O.
pub fn now() -> understudy_core::Millis {
    understudy_core::Millis(js_sys::Date::now() as u64)
}

/// 16 bytes for minting correlation IDs. `Math.random` suffices: the IDs are unique
/// labels, not secrets.
pub fn random16() -> [u8; 16] {
    let mut out = [0u8; 16];
    for chunk in out.chunks_mut(4) {
        let n = (js_sys::Math::random() * 4_294_967_296.0) as u32;
        chunk.copy_from_slice(&n.to_le_bytes());
    }
    out
}
