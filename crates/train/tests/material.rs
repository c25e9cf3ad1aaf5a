//! The material value target end to end: the continuation the targets ask of a shard
//! ([`ContinuationTargets::continuation_plies`]) and the batch built from it give, for every
//! sample, the material balance of its game replayed from the start to `material_plies` plies
//! after the sample (or to the game's end), for the side to move, as the target's win
//! probability.

use koma_data::{write_shard, ShardReader};
use koma_shogi::material::material;
use koma_shogi::Position;
use koma_train::synth::{random_games, SynthPolicy};
use koma_train::{ContinuationTargets, HostBatch, LossConfig};

#[test]
fn material_targets_match_the_games_replayed_from_their_start() {
    let games = random_games(16, 11, SynthPolicy::Random);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("games.h5");
    write_shard(&path, &games).unwrap();
    let reader = ShardReader::open(&path).unwrap();
    let indices: Vec<usize> = (0..reader.len()).collect();
    let mut changed = 0;
    for plies in [1, 2, 5] {
        let loss =
            LossConfig { result_weight: 1.0, material_weight: 1.0, material_plies: plies, ..LossConfig::default() };
        let targets = ContinuationTargets { replies: false, material_weight: 1.0 };
        let read = reader.read_with_continuations(&indices, targets.continuation_plies(&loss)).unwrap();
        let mut rows = read.iter();
        for game in &games {
            // Every position of the game, from its start.
            let mut positions = vec![Position::from_sfen(&game.start_sfen).unwrap()];
            for &m in &game.moves {
                let mut next = positions.last().unwrap().clone();
                next.do_move(m);
                positions.push(next);
            }
            for sample in &game.samples {
                let (read_sample, continuation) = rows.next().unwrap();
                assert_eq!(read_sample.ply, sample.ply);
                let ply = sample.ply as usize;
                let here = &positions[ply];
                let later = &positions[(ply + plies).min(game.moves.len())];
                let balance = material(later, here.side_to_move());
                changed += usize::from(balance != material(here, here.side_to_move()));
                let p = (1.0 / (1.0 + (-(balance as f64) / loss.material_scale).exp())) as f32;
                let b = HostBatch::from_samples_with_continuations(
                    std::slice::from_ref(read_sample),
                    std::slice::from_ref(continuation),
                    &loss,
                    targets,
                );
                let v = &b.value;
                assert!(
                    (v[0] - p).abs() < 1e-6 && v[1] == 0.0 && (v[2] - (1.0 - p)).abs() < 1e-6,
                    "game sample at ply {ply}, {plies} plies: balance {balance}, target {v:?}"
                );
            }
        }
        assert!(rows.next().is_none());
    }
    // Random games capture often: the test sees the balance move.
    assert!(changed > 100, "{changed}");
}
