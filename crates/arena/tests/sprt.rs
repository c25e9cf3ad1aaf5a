//! The SPRT on simulated matches stops with the right decision at about the promised rates.

use koma_arena::stats::{score_of, Pentanomial, Sprt, SprtDecision};
use koma_base::Rng;
use rand::{RngExt, SeedableRng};

/// One game's points for a player `elo` stronger, with a 30% draw rate where possible.
fn game(rng: &mut Rng, elo: f64) -> f64 {
    let s = score_of(elo);
    let draw = 0.3f64.min(2.0 * s.min(1.0 - s));
    let win = s - draw / 2.0;
    let u: f64 = rng.random();
    if u < win {
        1.0
    } else if u < win + draw {
        0.5
    } else {
        0.0
    }
}

fn run_sprt(rng: &mut Rng, true_elo: f64, sprt: &Sprt) -> SprtDecision {
    let mut penta = Pentanomial::default();
    for _ in 0..200_000 {
        penta.add_pair(game(rng, true_elo) + game(rng, true_elo));
        match sprt.decide(penta.llr(sprt.elo0, sprt.elo1)) {
            SprtDecision::Continue => {}
            decision => return decision,
        }
    }
    SprtDecision::Continue
}

#[test]
fn sprt_decides_right_at_the_promised_rates() {
    let sprt = Sprt::parse("0,30,0.05,0.05").unwrap();
    let mut rng = Rng::seed_from_u64(12345);
    let runs = 300;
    let h1_when_better = (0..runs).filter(|_| run_sprt(&mut rng, 30.0, &sprt) == SprtDecision::H1).count();
    let h0_when_equal = (0..runs).filter(|_| run_sprt(&mut rng, 0.0, &sprt) == SprtDecision::H0).count();
    eprintln!("H1 at elo1: {h1_when_better}/{runs}, H0 at elo0: {h0_when_equal}/{runs}");
    // Expected about 95% each; allow for simulation noise (±3 standard errors ≈ 4%).
    assert!(h1_when_better as f64 / runs as f64 > 0.90, "H1 accepted in {h1_when_better}/{runs} runs at elo1");
    assert!(h0_when_equal as f64 / runs as f64 > 0.90, "H0 accepted in {h0_when_equal}/{runs} runs at elo0");
    // A much stronger player is accepted quickly and essentially always.
    let strong = (0..100).filter(|_| run_sprt(&mut rng, 200.0, &sprt) == SprtDecision::H1).count();
    assert_eq!(strong, 100);
}
