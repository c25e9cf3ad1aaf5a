//! Published perft counts. The deepest counts are `#[ignore]`d to keep the default suite quick;
//! run them with `cargo test --release -p koma-shogi -- --ignored`.

use koma_shogi::{perft, Position};

const STARTPOS: &str = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1";
const MIDGAME: &str = "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w GR5pnsg 1";
const MAX_MOVES_593: &str = "R8/2K1S1SSk/4B4/9/9/9/9/9/1L1L1L3 b RBGSNLP3g3n17p 1";
const PROMOTED: &str = "k+n7/sg7/9/9/9/9/+r5K1g/7L1/2LN1R1+Bb b RBGSNLP 1";
const MOVE_91: &str = "l7l/3s5/prnp2kp1/2p1Gppnp/1P7/PnPP1P3/3BP2PP/1S1G5/LN1K1G1+rL b SBG3ps 91";
const KINGS_ONLY: &str = "9/9/9/3k5/9/5K3/9/9/9 b RB2G2S2N2L9Prb2g2s2n2l9p 1";

fn check(sfen: &str, counts: &[u64]) {
    let mut pos = Position::from_sfen(sfen).unwrap();
    for (i, &expected) in counts.iter().enumerate() {
        let depth = i as u32 + 1;
        assert_eq!(perft(&mut pos, depth), expected, "perft({depth}) of {sfen}");
    }
    assert_eq!(pos.to_sfen(), Position::from_sfen(sfen).unwrap().to_sfen(), "perft left the position changed");
}

#[test]
fn startpos_shallow() {
    check(STARTPOS, &[30, 900, 25470, 719731]);
}

#[test]
#[ignore]
fn startpos_deep() {
    check(STARTPOS, &[30, 900, 25470, 719731, 19861490, 547581517]);
}

#[test]
fn midgame_shallow() {
    check(MIDGAME, &[207, 28684, 4809015]);
}

#[test]
#[ignore]
fn midgame_deep() {
    check(MIDGAME, &[207, 28684, 4809015, 516925165]);
}

#[test]
fn max_moves_shallow() {
    check(MAX_MOVES_593, &[593, 105677]);
}

#[test]
#[ignore]
fn max_moves_deep() {
    check(MAX_MOVES_593, &[593, 105677, 53393368]);
}

#[test]
fn promoted_shallow() {
    check(PROMOTED, &[45, 1148, 414441]);
}

#[test]
#[ignore]
fn promoted_deep() {
    check(PROMOTED, &[45, 1148, 414441, 13033326]);
}

#[test]
fn move_91_shallow() {
    check(MOVE_91, &[180, 15217, 2067680]);
}

#[test]
#[ignore]
fn move_91_deep() {
    check(MOVE_91, &[180, 15217, 2067680, 129175973]);
}

#[test]
fn kings_only_shallow() {
    check(KINGS_ONLY, &[524, 248257]);
}

#[test]
#[ignore]
fn kings_only_deep() {
    check(KINGS_ONLY, &[524, 248257, 112911856]);
}
