//! Scores for `info score cp`: the search's win rate converted to centipawns the way dlshogi
//! does, `cp = -a · ln(1/p − 1)` (the logistic curve's inverse), with `a` the `EvalCoef` option.
//! koma uses a = 600 by default, dlshogi's original coefficient; newer dlshogi versions use 756,
//! which stretches the same win rate to a larger cp (set `EvalCoef` to 756 to match them).

/// The default `EvalCoef`.
pub const DEFAULT_EVAL_COEF: u32 = 600;

/// Win rates are clamped to [1e-5, 1 − 1e-5] before conversion, so |cp| stays below ~6900 at
/// a = 600 and never reaches the range GUIs read as mate.
const P_MIN: f64 = 1e-5;

/// Win rate (P(win) + P(draw)/2, in [0, 1]) to centipawns.
pub fn winrate_to_cp(p: f64, coef: f64) -> i32 {
    let p = if p.is_finite() { p.clamp(P_MIN, 1.0 - P_MIN) } else { 0.5 };
    (-coef * (1.0 / p - 1.0).ln()).round() as i32
}

/// A search value in [-1, 1] (P(win) − P(loss)) as a win rate: with draws counted as half a
/// win, P(win) + P(draw)/2 = (1 + value) / 2.
pub fn value_to_winrate(value: f32) -> f64 {
    ((1.0 + value as f64) / 2.0).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_matches_the_formula() {
        assert_eq!(winrate_to_cp(0.5, 600.0), 0);
        // p = 1/(1+e^-1) gives exactly a.
        let p = 1.0 / (1.0 + (-1.0f64).exp());
        assert_eq!(winrate_to_cp(p, 600.0), 600);
        assert_eq!(winrate_to_cp(1.0 - p, 756.0), -756);
        assert!(winrate_to_cp(1.0, 600.0) < 7000);
        assert!(winrate_to_cp(0.0, 600.0) > -7000);
        assert_eq!(winrate_to_cp(f64::NAN, 600.0), 0);
        assert!(winrate_to_cp(0.7, 600.0) > 0);
        assert_eq!(value_to_winrate(0.0), 0.5);
        assert_eq!(value_to_winrate(-1.0), 0.0);
    }
}
