//! [E-OBSERVE] Data points for Workers Analytics Engine: written to the dataset bound as
//! [`BINDING`] when there is one and to nothing otherwise (local runs, and Miniflare, whose
//! Analytics Engine is a no-op), by `io.js` (`us_point`), as the request's driver writes its
//! own. What is written is built and tested natively in `understudy_core::metrics::data_point`.

use js_sys::Array;
use understudy_core::metrics::DataPoint;
use wasm_bindgen::prelude::*;

/// The Analytics Engine binding `understudy build` declares in `wrangler.toml`.
pub const BINDING: &str = "UNDERSTUDY_ANALYTICS";

#[wasm_bindgen(module = "/src/io.js")]
extern "C" {
    fn us_point(env: &JsValue, index: &str, blobs: Array, doubles: Array);
}

/// Writes `p` to the dataset of `env` (a refused point is dropped: analytics never fails
/// anything).
pub fn write(env: &JsValue, p: &DataPoint) {
    let blobs = p.blobs.iter().map(|b| JsValue::from_str(b)).collect();
    let doubles = p.doubles.iter().map(|d| JsValue::from_f64(*d)).collect();
    us_point(env, &p.index, blobs, doubles);
}
