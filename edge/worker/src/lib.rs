//! The Understudy Worker: the I/O around `understudy_core::engine`, and nothing else.
//!
//! The `fetch` export calls one [`serve::serve`], which starts the engine and hands its
//! output to the JS driver (`src/io.js`): it performs each command the engine gives (a
//! rate-limiter call, a fetch, an abort, a KV read), arms the one timer the engine asks for,
//! and reports what ended, with the time. Every decision — parameters, breaker, races,
//! hedges, retries, cascade, disclosure, counters, the log line — is the engine's
//! (docs/adr/005-one-engine.md, docs/adr/010-the-engine-owns-time.md). A handler whose
//! promise rejects becomes a bare 500 and a panic traps the module, so nothing on the
//! served path returns `Err` or unwraps, and the driver renders any exception through the
//! engine (or, when the engine cannot run, its last-resort answer).
#![forbid(unsafe_code)]

mod analytics;
mod body;
mod coordinator;
mod isolate;
mod outbox;
mod recovery;
mod serve;
mod shards;
mod shim;

pub use coordinator::BreakerCoordinator;
pub use outbox::OutboxShard;

/// The heap (see `Cargo.toml`): talc, in the configuration its authors give for a
/// single-threaded WebAssembly module that grows its memory as it needs.
#[cfg(all(not(target_feature = "atomics"), target_family = "wasm"))]
#[global_allocator]
static TALC: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

use wasm_bindgen::prelude::{wasm_bindgen, JsValue};

/// Decodes the bake and builds the engine when the module is instantiated, while the isolate
/// starts (the JS entry publishes the bake before the glue instantiates the module): the
/// platform starts an isolate during the client's TLS handshake, so this work leaves the
/// first request's path. A bake that cannot be used is left for the first request to report
/// (503 `BAKE_INVALID`).
#[wasm_bindgen(start)]
pub fn understudy_warm() {
    recovery::arm();
    let _ = isolate::with_engine(|_| ());
    serve::init();
}

/// The raw `Request` and `Response` of the runtime: nothing on the way in or out is converted
/// that the engine does not read (workers-rs' own `Request` would copy `request.cf` on every
/// request). A plain export rather than `#[event(fetch)]`: it returns the promise the JS loop
/// settles ([`serve`]), so no Rust future stands between the runtime and the answer.
#[wasm_bindgen]
pub fn fetch(req: JsValue, env: JsValue, ctx: JsValue) -> js_sys::Promise {
    serve::serve(req, env, ctx)
}
