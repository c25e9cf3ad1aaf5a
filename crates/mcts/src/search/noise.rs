//! The two root noises of search: Dirichlet noise on a PUCT root's priors (AlphaZero) and the
//! Gumbel draws of a Gumbel root (Danihelka et al. 2022), both from koma's one generator.

use koma_base::Rng;
use rand_distr::multi::Dirichlet;
use rand_distr::{Distribution, Gumbel};

/// A sample of the symmetric Dirichlet(`alpha`) distribution over `n` moves; a single move gets
/// all the mass (the distribution needs two components).
pub(crate) fn dirichlet_noise(rng: &mut Rng, alpha: f64, n: usize) -> Vec<f64> {
    if n < 2 {
        return vec![1.0; n];
    }
    Dirichlet::new(&vec![alpha; n]).expect("dirichlet_alpha is validated finite and positive").sample(rng)
}

/// `n` standard Gumbel samples. Drawn in f64, where an infinite sample is a 2^-53 chance rather
/// than f32's 2^-24.
pub(crate) fn gumbel_noise(rng: &mut Rng, n: usize) -> Vec<f32> {
    let gumbel = Gumbel::new(0.0, 1.0).expect("the standard Gumbel distribution is valid");
    (0..n).map(|_| gumbel.sample(rng) as f32).collect()
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    /// Mean and variance of `xs`.
    fn moments(xs: impl Iterator<Item = f64>) -> (f64, f64) {
        let xs: Vec<f64> = xs.collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        (mean, var)
    }

    #[test]
    fn dirichlet_noise_has_the_right_moments() {
        let mut rng = Rng::seed_from_u64(7);
        // 0.03 takes rand_distr's small-alpha (Beta) path, the others its Gamma path.
        for alpha in [0.03, 0.15, 1.0, 3.0] {
            let n = 10;
            let draws: Vec<Vec<f64>> = (0..20_000).map(|_| dirichlet_noise(&mut rng, alpha, n)).collect();
            assert!(draws.iter().all(|d| d.len() == n && (d.iter().sum::<f64>() - 1.0).abs() < 1e-9));
            let (mean, var) = moments(draws.iter().map(|d| d[3]));
            let p = 1.0 / n as f64;
            let expected_var = p * (1.0 - p) / (n as f64 * alpha + 1.0);
            assert!((mean - p).abs() < 0.05 * p, "Dirichlet({alpha}) mean {mean}");
            assert!((var - expected_var).abs() < 0.1 * expected_var, "Dirichlet({alpha}) variance {var}");
        }
        assert_eq!(dirichlet_noise(&mut rng, 0.15, 1), [1.0]);
        assert!(dirichlet_noise(&mut rng, 0.15, 0).is_empty());
    }

    #[test]
    fn gumbel_noise_has_the_right_moments() {
        let mut rng = Rng::seed_from_u64(7);
        let (mean, var) = moments(gumbel_noise(&mut rng, 40_000).into_iter().map(f64::from));
        assert!((mean - 0.5772).abs() < 0.03, "Gumbel mean {mean}");
        assert!((var - 1.6449).abs() < 0.08, "Gumbel variance {var}");
    }
}
