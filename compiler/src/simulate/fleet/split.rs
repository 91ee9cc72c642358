//! [F-SCOPE] Which isolate a request goes to, and which region an isolate belongs to
//! (`simulate --isolates` and `drill --isolates` split the same way), and the dice of a run.

use super::spec::{FleetSpec, Split};

/// A 64-bit mix of `x` (splitmix64's finaliser): the split's and the losses' dice.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A uniform draw in [0, 1) from `x`.
pub fn unit(x: u64) -> f64 {
    (mix(x) >> 11) as f64 / (1u64 << 53) as f64
}

/// Which isolate request `i` goes to (`simulate --isolates` and `drill --isolates` split
/// the same way).
pub struct Splitter {
    /// Cumulative shares (Zipf), empty for uniform.
    cdf: Vec<f64>,
    n: usize,
}

impl Splitter {
    pub fn new(split: Split, n: usize) -> Splitter {
        let cdf = match split {
            Split::Uniform => Vec::new(),
            Split::Zipf(s) => {
                let w: Vec<f64> = (0..n).map(|k| 1.0 / ((k + 1) as f64).powf(s)).collect();
                let total: f64 = w.iter().sum();
                let mut acc = 0.0;
                w.iter()
                    .map(|x| {
                        acc += x / total;
                        acc
                    })
                    .collect()
            }
        };
        Splitter { cdf, n }
    }

    pub fn isolate(&self, i: u64) -> usize {
        let u = unit(i ^ 0x5eed);
        if self.cdf.is_empty() {
            return ((u * self.n as f64) as usize).min(self.n - 1);
        }
        self.cdf.partition_point(|c| *c <= u).min(self.n - 1)
    }
}

/// Which region each of `n` isolates belongs to: by a hash of its index against the
/// regions' shares (a Zipf split's busy isolates land in every region), or round robin
/// (`--regions R`).
pub fn regions_of(spec: &FleetSpec, n: usize) -> Vec<u16> {
    if spec.round_robin {
        let r = spec.regions.len().max(1);
        return (0..n).map(|k| (k % r) as u16).collect();
    }
    let mut cdf = Vec::new();
    let mut acc = 0.0;
    for (_, share) in &spec.regions {
        acc += share;
        cdf.push(acc);
    }
    (0..n)
        .map(|k| {
            let u = unit(mix(k as u64) ^ 0x7e61_0a5e);
            cdf.partition_point(|c| *c <= u).min(cdf.len() - 1) as u16
        })
        .collect()
}
