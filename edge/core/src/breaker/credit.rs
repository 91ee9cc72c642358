//! Which requests probe while a breaker recovers: a credit that grows by `probe_fraction`
//! per request, in millionths of a request, and a request that finds a whole credit is a
//! probe. Integers, so 2% is exactly one request in fifty — the isolate's own breaker and
//! the fleet-led probing of [`super::member`] count the same way.

const PPM: u64 = 1_000_000;

#[derive(Debug, Clone)]
pub struct ProbeCredit {
    fraction_ppm: u64,
    credit_ppm: u64,
}

impl ProbeCredit {
    pub fn new(probe_fraction: f64) -> ProbeCredit {
        ProbeCredit {
            fraction_ppm: ((probe_fraction * PPM as f64).round() as u64).clamp(1, PPM),
            credit_ppm: 0,
        }
    }

    /// The next request probes (probing just began, or a probe's slot was given back).
    pub fn next_probes(&mut self) {
        self.credit_ppm = PPM - self.fraction_ppm;
    }

    /// A request arrived: whether it is a probe.
    pub fn take(&mut self) -> bool {
        self.credit_ppm += self.fraction_ppm;
        if self.credit_ppm >= PPM {
            self.credit_ppm -= PPM;
            true
        } else {
            false
        }
    }
}
