//! Seeded random numbers: xoshiro256** seeded through splitmix64 (public
//! domain algorithms by Blackman and Vigna), and the few distributions the
//! traffic models need. Own code so that a seed gives the same trace on
//! every machine and crate version.

#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        Rng {
            s: [
                splitmix(&mut x),
                splitmix(&mut x),
                splitmix(&mut x),
                splitmix(&mut x),
            ],
        }
    }

    /// An independent generator for a sub-component, from this one.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1].
    fn open_unit(&mut self) -> f64 {
        1.0 - self.unit()
    }

    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.open_unit().ln()
    }

    /// Pareto with the given mean and shape (> 1): scale = mean (a-1)/a.
    pub fn pareto(&mut self, mean: f64, shape: f64) -> f64 {
        let scale = mean * (shape - 1.0) / shape;
        scale / self.open_unit().powf(1.0 / shape)
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.open_unit();
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_numbers_and_sane_means() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut r = Rng::new(1);
        let n = 200_000;
        let mean = |f: &mut dyn FnMut() -> f64| (0..n).map(|_| f()).sum::<f64>() / n as f64;
        assert!((mean(&mut || r.unit()) - 0.5).abs() < 0.01);
        assert!((mean(&mut || r.exp(3.0)) - 3.0).abs() < 0.05);
        // Shape 2.5 keeps the sample mean stable enough to check.
        assert!((mean(&mut || r.pareto(4.0, 2.5)) - 4.0).abs() < 0.15);
        assert!(mean(&mut || r.normal()).abs() < 0.01);
    }
}
