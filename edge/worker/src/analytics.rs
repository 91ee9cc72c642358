//! [E-OBSERVE] Data points for Workers Analytics Engine, behind a small trait: the Worker
//! writes to the dataset bound as [`BINDING`] when there is one and to nothing otherwise
//! (local runs, and Miniflare, whose Analytics Engine is a no-op). What is written is built
//! and tested natively in `understudy_core::metrics::data_point`.

use understudy_core::metrics::DataPoint;
use worker::{AnalyticsEngineDataPointBuilder, AnalyticsEngineDataset, Env};

/// The Analytics Engine binding `understudy build` declares in `wrangler.toml`.
pub const BINDING: &str = "UNDERSTUDY_ANALYTICS";

pub trait Sink {
    fn write(&self, point: &DataPoint);
}

/// No dataset bound: data points go nowhere.
pub struct Nowhere;

impl Sink for Nowhere {
    fn write(&self, _: &DataPoint) {}
}

impl Sink for AnalyticsEngineDataset {
    fn write(&self, p: &DataPoint) {
        let point = AnalyticsEngineDataPointBuilder::new()
            .indexes([p.index.as_str()])
            .blobs(p.blobs.iter().map(String::as_str))
            .doubles(p.doubles)
            .build();
        // Analytics must never fail a request: a refused point is dropped.
        let _ = self.write_data_point(&point);
    }
}

thread_local! {
    /// Whether the dataset is bound, learnt on this isolate's first data point: an unbound
    /// binding is not looked up (and its error built) on every request.
    static BOUND: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// The sink for this request's environment.
pub fn sink(env: &Env) -> Box<dyn Sink> {
    if BOUND.with(|b| b.get()) == Some(false) {
        return Box::new(Nowhere);
    }
    match env.analytics_engine(BINDING) {
        Ok(ds) => {
            BOUND.with(|b| b.set(Some(true)));
            Box::new(ds)
        }
        Err(_) => {
            BOUND.with(|b| b.set(Some(false)));
            Box::new(Nowhere)
        }
    }
}
