//! A small seedable random number generator (xoshiro256**) with the distributions search needs:
//! uniform, Gamma (for Dirichlet noise) and Gumbel. Seeded runs reproduce exactly.

#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn seeded(seed: u64) -> Rng {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^ (x >> 31)
        };
        Rng { s: [next(), next(), next(), next()] }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1), safe to take logarithms of.
    fn open_uniform(&mut self) -> f64 {
        loop {
            let u = self.uniform();
            if u > 0.0 {
                return u;
            }
        }
    }

    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    fn normal(&mut self) -> f64 {
        let u1 = self.open_uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Gamma(shape, 1) by Marsaglia and Tsang, with the shape < 1 boost.
    pub fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            return self.gamma(shape + 1.0) * self.open_uniform().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = self.open_uniform();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    /// A sample of the symmetric Dirichlet distribution with `n` components.
    pub fn dirichlet(&mut self, alpha: f64, n: usize) -> Vec<f64> {
        let mut sample: Vec<f64> = (0..n).map(|_| self.gamma(alpha)).collect();
        let sum: f64 = sample.iter().sum();
        if sum > 0.0 {
            sample.iter_mut().for_each(|x| *x /= sum);
        } else if n > 0 {
            sample.iter_mut().for_each(|x| *x = 1.0 / n as f64);
        }
        sample
    }

    /// A standard Gumbel sample.
    pub fn gumbel(&mut self) -> f64 {
        -(-self.open_uniform().ln()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_and_dirichlet_have_the_right_means() {
        let mut rng = Rng::seeded(7);
        for shape in [0.15, 0.5, 1.0, 3.0] {
            let n = 40_000;
            let mean: f64 = (0..n).map(|_| rng.gamma(shape)).sum::<f64>() / n as f64;
            assert!((mean - shape).abs() < 0.05 * shape.max(0.3), "Gamma({shape}) mean {mean}");
        }
        let d = rng.dirichlet(0.15, 30);
        assert!((d.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let g: f64 = (0..40_000).map(|_| rng.gumbel()).sum::<f64>() / 40_000.0;
        assert!((g - 0.5772).abs() < 0.03, "Gumbel mean {g}");
    }
}
