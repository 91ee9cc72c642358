//! The drill's isolates placed in regions (`--regions R`): each isolate's requests carry its
//! region's `cf`, as Cloudflare's network would set it, and its first picks the region whose
//! coordinator it reports to.

use std::time::Duration;

use super::driver::{self, Planned};

/// The header workerd reads a request's `cf` from on a local socket (Miniflare's
/// `cfBlobHeader`); Cloudflare's network sets `cf` itself and no client can.
pub const CF_BLOB: &str = "mf-cf-blob";

/// Each of `k` isolates' `cf` blob (JSON) over `regions` regions, round robin; none with one
/// region.
pub(super) fn region_cfs(k: usize, regions: usize) -> Vec<String> {
    use understudy_core::breaker::fleet::place::REGIONS;
    if regions <= 1 {
        return Vec::new();
    }
    (0..k)
        .map(|i| {
            let cf = REGIONS[i % regions.min(REGIONS.len())].sample_cf();
            serde_json::json!({
                "continent": cf.continent,
                "country": cf.country,
                "longitude": cf.longitude,
            })
            .to_string()
        })
        .collect()
}

/// One request to each isolate with its region's `cf`, before anything else reaches it: an
/// isolate picks its region at its first request.
pub(super) async fn place(addrs: &[std::net::SocketAddr], cf: &[String]) -> anyhow::Result<()> {
    for (addr, blob) in addrs.iter().zip(cf) {
        let mut conn = None;
        let p = Planned {
            index: 0,
            due_us: 0,
            method: "GET".into(),
            target: "/__understudy_drill/place".into(),
            headers: vec![(CF_BLOB.into(), blob.clone())],
            user: None,
        };
        let o = driver::once(&mut conn, *addr, &p, Duration::from_secs(5)).await;
        if o.status == 0 {
            anyhow::bail!("the isolate at {addr} did not answer its placing request");
        }
    }
    Ok(())
}
