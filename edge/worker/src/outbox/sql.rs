//! The object's SQL storage (`ctx.storage.sql`), one synchronous statement per call through
//! `io.js`, its cells as plain values (no per-row struct decoding: a serde decoder per row
//! type costs kilobytes of the module each).

use js_sys::{Array, ArrayBuffer, Number, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

pub type Sql<T> = Result<T, String>;

// One statement through the object's SQL API (`ctx.storage.sql.exec`), every row as an
// array of cells (`io.js`); synchronous, as the API is.
#[wasm_bindgen(module = "/src/io.js")]
extern "C" {
    #[wasm_bindgen(catch)]
    fn us_sql(sql: &JsValue, query: &str, bind: Array) -> Result<Array, JsValue>;
}

/// The object's SQL storage (`ctx.storage.sql`).
pub struct SqlStorage(pub JsValue);

/// A cell, or a statement's bound value.
pub enum V {
    Null,
    Integer(i64),
    Float(f64),
    String(String),
    Blob(Vec<u8>),
}

impl From<&str> for V {
    fn from(s: &str) -> V {
        V::String(s.to_string())
    }
}

impl V {
    fn js(self) -> JsValue {
        match self {
            V::Null => JsValue::NULL,
            V::Integer(i) => JsValue::from(i as f64),
            V::Float(f) => JsValue::from(f),
            V::String(s) => JsValue::from(s),
            V::Blob(b) => Uint8Array::from(b.as_slice()).into(),
        }
    }

    fn of(v: JsValue) -> V {
        if v.is_null() || v.is_undefined() {
            V::Null
        } else if let Some(b) = v.as_bool() {
            V::Integer(i64::from(b))
        } else if let Some(s) = v.as_string() {
            V::String(s)
        } else if let Some(n) = v.as_f64() {
            if Number::is_safe_integer(&v) {
                V::Integer(n as i64)
            } else {
                V::Float(n)
            }
        } else if let Some(b) = v.dyn_ref::<ArrayBuffer>() {
            V::Blob(Uint8Array::new(b).to_vec())
        } else if let Some(b) = v.dyn_ref::<Uint8Array>() {
            V::Blob(b.to_vec())
        } else {
            V::Null
        }
    }
}

impl SqlStorage {
    /// Runs `query` with `bind`: every row's cells.
    pub fn exec(&self, query: &str, bind: Vec<V>) -> Sql<Vec<Vec<V>>> {
        let args = Array::new();
        for v in bind {
            args.push(&v.js());
        }
        let rows = us_sql(&self.0, query, args).map_err(|e| {
            e.dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
                .or_else(|| e.as_string())
                .unwrap_or_else(|| "the SQL statement failed".to_string())
        })?;
        Ok(rows
            .iter()
            .map(|row| Array::from(&row).iter().map(V::of).collect())
            .collect())
    }
}
