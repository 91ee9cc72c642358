//! Each request's randomness — its correlation ID, its trace and span IDs, its retry jitter —
//! comes from one small generator seeded by the driver: `Math.random` in the Worker, the
//! request's index in `simulate`. The engine never reaches for entropy itself, so a
//! simulation is reproducible and a test can assert exact IDs and waits.
//!
//! xorshift64* (Vigna): fast, tiny, and good enough for labels and jitter. None of these
//! values is a secret.

use crate::retry::Random;

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; zero is remapped, xorshift cannot leave zero).
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for chunk in out.chunks_mut(8) {
            let n = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&n[..chunk.len()]);
        }
        out
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Random for Rng {
    fn unit(&mut self) -> f64 {
        Rng::unit(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_values_and_units_stay_below_one() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        assert_eq!(a.bytes::<16>(), b.bytes::<16>());
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
        let mut z = Rng::new(0);
        assert_ne!(z.next_u64(), 0);
        assert!((0..10_000).all(|_| (0.0..1.0).contains(&a.unit())));
    }
}
