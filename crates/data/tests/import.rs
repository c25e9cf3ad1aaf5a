//! Importers end to end: the hand-written records of data/records (tricky KIF/KI2/CSA cases and
//! two bad files) and hcpe files of random games through `import`, then `verify_shard`,
//! `shard_stats`, the samples against a replay of the games, and hcpe export back to the same
//! bytes. (The comparison with cshogi is in python/tests/test_data_import.py.)

use std::path::{Path, PathBuf};

use koma_base::durable::{fail_next, Step};
use koma_data::hcp::{encode_hcp, move_to_move16, HcpeRecord, DLSHOGI_EVAL_SCALE};
use koma_data::import::{export_hcpe, import, ImportOptions, Source};
use koma_data::inspect::{list_shards, shard_stats, verify_shard};
use koma_data::{flags, result_for, write_shard, PackedPosition, ShardReader, PLY_UNKNOWN};
use koma_shogi::{Handicap, Position};

fn records_dir() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
        .join("../../data/records")
}

fn quiet(_: &koma_data::import::ImportEvent) {}

#[test]
fn record_directory_imports_replays_and_verifies() {
    let out = tempfile::tempdir().unwrap();
    let summary = import(&[records_dir()], out.path(), &ImportOptions::default(), &mut quiet).unwrap();
    // Both files under bad/ are reported with their line, the rest imported.
    assert_eq!(summary.bad_files, 2, "{:?}", summary.problems);
    let problems: Vec<String> = summary.problems.iter().map(|p| p.to_string()).collect();
    assert!(problems.iter().any(|p| p.contains("illegal_move.csa") && p.contains("line ")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("wrong_origin.kifu") && p.contains("line ")), "{problems:?}");
    assert!(summary.games > 0 && summary.games + summary.skipped.values().sum::<usize>() == summary.games_read);
    assert_eq!(summary.shards.len(), 1);

    let mut samples = 0;
    for shard in &summary.shards {
        let check = verify_shard(shard);
        assert!(check.is_ok(), "{check:?}");
        let reader = ShardReader::open(shard).unwrap();
        let all = reader.read_all().unwrap();
        for game in reader.games().unwrap() {
            assert!(!game.model.is_empty());
            let mut pos = Position::from_sfen(&game.start_sfen).unwrap();
            assert_eq!(game.samples.len(), game.moves.len(), "one sample per move");
            for (ply, (&m, s)) in game.moves.iter().zip(&all[game.samples.clone()]).enumerate() {
                assert_eq!(s.position, PackedPosition::pack(&pos).unwrap());
                assert_eq!((s.played, s.ply as usize), (Some(m), ply));
                assert_eq!(s.policy, vec![(m, 1.0)]);
                assert_eq!(s.result, result_for(pos.side_to_move(), game.result.winner));
                assert_eq!(s.root_wdl, [0.0; 3]);
                assert_eq!(s.flags, flags::FULL_SEARCH | flags::IMPORTED);
                pos.do_move(m);
            }
            samples += game.samples.len();
        }
    }
    assert_eq!(samples, summary.samples);

    let stats = shard_stats(&list_shards(&[out.path().to_path_buf()]).unwrap(), &mut |_, _| {});
    assert_eq!((stats.samples as usize, stats.games as usize), (summary.samples, summary.games));
    assert_eq!(stats.winners.black + stats.winners.white + stats.winners.draw, stats.games);
    assert_eq!(stats.imported, stats.samples);
    assert!((stats.policy.mean_per_sample - 1.0).abs() < 1e-9);

    // The move filter, and strict mode stopping at the first bad file.
    let filtered = tempfile::tempdir().unwrap();
    let options = ImportOptions {
        records: koma_data::import::RecordOptions { min_moves: 10, ..Default::default() },
        ..Default::default()
    };
    let s2 = import(&[records_dir()], filtered.path(), &options, &mut quiet).unwrap();
    assert!(s2.games < summary.games && s2.skipped.get("too_short").copied().unwrap_or(0) > 0, "{s2:?}");
    let strict = ImportOptions { strict: true, ..ImportOptions::default() };
    let err = import(&[records_dir()], tempfile::tempdir().unwrap().path(), &strict, &mut quiet).unwrap_err();
    assert!(err.to_string().contains("bad/"), "{err}");
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// hcpe records of random games from every start (handicaps leave pieces in the box).
fn random_hcpe(games: usize, seed: u64) -> Vec<HcpeRecord> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for g in 0..games {
        let mut pos = Handicap::ALL[g % Handicap::ALL.len()].position();
        let mut game = Vec::new();
        for _ in 0..(10 + rng.below(120)) {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            let m = moves[rng.below(moves.len())];
            let eval = rng.below(4001) as i16 - 2000;
            game.push((
                HcpeRecord {
                    hcp: encode_hcp(&pos).unwrap(),
                    eval,
                    best_move16: move_to_move16(m),
                    game_result: 0,
                    dummy: 0,
                },
                pos.side_to_move(),
            ));
            pos.do_move(m);
        }
        let result = rng.below(3) as u8;
        out.extend(game.into_iter().map(|(r, _)| HcpeRecord { game_result: result, ..r }));
    }
    out
}

fn hcpe_bytes(records: &[HcpeRecord]) -> Vec<u8> {
    records.iter().flat_map(|r| r.to_bytes()).collect()
}

#[test]
fn hcpe_import_export_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let records = random_hcpe(30, 17);
    let input = dir.path().join("games.hcpe");
    std::fs::write(&input, hcpe_bytes(&records)).unwrap();
    let out = dir.path().join("shards");
    let options = ImportOptions { source: Source::Hcpe, positions_per_shard: 500, ..ImportOptions::default() };
    let summary = import(std::slice::from_ref(&input), &out, &options, &mut quiet).unwrap();
    assert_eq!((summary.hcpe_records, summary.bad_records, summary.samples), (records.len(), 0, records.len()));
    assert_eq!(summary.shards.len(), records.len().div_ceil(500));
    for shard in &summary.shards {
        let check = verify_shard(shard);
        assert!(check.is_ok(), "{check:?}");
        let reader = ShardReader::open(shard).unwrap();
        let games = reader.games().unwrap();
        assert_eq!(games.len(), 1);
        assert!(games[0].start_sfen.is_empty() && games[0].moves.is_empty());
        assert!(reader.read_all().unwrap().iter().all(|s| s.ply == PLY_UNKNOWN && s.root_wdl[1] == 0.0));
    }
    let back = dir.path().join("back.hcpe");
    let exported = export_hcpe(&summary.shards, &back, DLSHOGI_EVAL_SCALE, &mut |_| {}).unwrap();
    assert_eq!(exported.records, records.len());
    assert!(std::fs::read(&back).unwrap() == std::fs::read(&input).unwrap(), "export differs from the imported file");
    // An export that fails at any step (a full disk) leaves the earlier export whole, no temporary.
    for step in [Step::Create, Step::Write, Step::SyncFile, Step::Rename] {
        fail_next(&back, step);
        let e = export_hcpe(&summary.shards, &back, DLSHOGI_EVAL_SCALE, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("back.hcpe"), "{step:?}: {e}");
        assert!(std::fs::read(&back).unwrap() == std::fs::read(&input).unwrap(), "{step:?}");
        let temporaries = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains(".tmp"));
        assert_eq!(temporaries.count(), 0, "{step:?}");
    }

    let stats = shard_stats(&summary.shards, &mut |_, _| {});
    assert_eq!(
        (stats.games, stats.position_sets, stats.samples_ply_unknown as usize),
        (0, summary.shards.len() as u64, records.len())
    );
}

#[test]
fn corrupt_hcpe_names_file_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = random_hcpe(2, 5);
    // Record 3: both kings on one square. Record 6: an illegal best move. Record 8: result 9.
    let mut bits = u128::from_le_bytes(records[3].hcp[..16].try_into().unwrap());
    let white = (bits >> 8) & 0x7f;
    bits = (bits & !(0x7f << 1)) | (white << 1);
    records[3].hcp[..16].copy_from_slice(&bits.to_le_bytes());
    records[6].best_move16 = move_to_move16(koma_shogi::Move::from_usi("5i1a").unwrap());
    records[8].game_result = 9;
    let mut bytes = hcpe_bytes(&records);
    bytes.extend_from_slice(&[0u8; 20]);
    let input = dir.path().join("bad.hcpe");
    std::fs::write(&input, &bytes).unwrap();
    let options = ImportOptions { source: Source::Hcpe, ..ImportOptions::default() };
    let summary = import(std::slice::from_ref(&input), &dir.path().join("out"), &options, &mut quiet).unwrap();
    let problems: Vec<String> = summary.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(summary.bad_records, 3, "{problems:?}");
    assert_eq!(summary.samples, records.len() - 3);
    assert!(
        problems[0].contains("bad.hcpe") && problems[0].contains("record 3:") && problems[0].contains("king"),
        "{problems:?}"
    );
    assert!(problems[1].contains("record 6:") && problems[1].contains("illegal"), "{problems:?}");
    assert!(problems[2].contains("record 8:") && problems[2].contains("gameResult 9"), "{problems:?}");
    let n = records.len();
    assert!(
        problems[3].contains(&format!("record {n} is truncated")) && problems[3].contains("multiple of 38"),
        "{problems:?}"
    );
    assert_eq!(summary.bad_files, 1);

    let strict = ImportOptions { strict: true, ..options };
    let err = import(&[input], &dir.path().join("strict"), &strict, &mut quiet).unwrap_err().to_string();
    assert!(err.contains("bad.hcpe") && err.contains("record 3:"), "{err}");
}

#[test]
fn verify_reports_broken_datasets() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(9);
    let mut pos = Handicap::ALL[0].position();
    let (mut moves, mut game_samples) = (Vec::new(), Vec::new());
    for ply in 0..20 {
        let legal = pos.legal_moves();
        let m = legal[rng.below(legal.len())];
        game_samples.push(koma_data::Sample {
            position: PackedPosition::pack(&pos).unwrap(),
            played: Some(m),
            policy: vec![(m, 0.75), (legal[0], 0.25)],
            root_wdl: [0.5, 0.25, 0.25],
            result: 0,
            ply,
            flags: flags::FULL_SEARCH,
        });
        moves.push(m);
        pos.do_move(m);
    }
    let game = koma_data::GameSamples {
        start_sfen: Handicap::ALL[0].position().to_sfen(),
        result: koma_shogi::GameResult { winner: None, reason: koma_shogi::EndReason::MaxMoves },
        length: moves.len() as u16,
        model: String::new(),
        moves,
        samples: game_samples,
        root_values: Vec::new(),
    };
    let good = dir.path().join("good.h5");
    write_shard(&good, &[game]).unwrap();
    assert!(verify_shard(&good).is_ok(), "{:?}", verify_shard(&good));

    let broken = |name: &str, dataset: &str, edit: &dyn Fn(&mut Vec<u16>)| {
        let path = dir.path().join(name);
        std::fs::copy(&good, &path).unwrap();
        let file = hdf5::File::open_rw(&path).unwrap();
        let mut values: Vec<u16> = file.dataset(dataset).unwrap().read_raw().unwrap();
        edit(&mut values);
        file.unlink(dataset).unwrap();
        file.new_dataset_builder().with_data(&ndarray::Array1::from(values)).create(dataset).unwrap();
        drop(file);
        verify_shard(&path)
    };
    // An illegal move played (no piece goes from 5i to 1a).
    let check = broken("move.h5", "move", &|v| v[5] = koma_shogi::Move::from_usi("5i1a").unwrap().to_u16());
    assert!(!check.is_ok() && check.problems.iter().any(|p| p.contains("sample 5")), "{check:?}");
    // A game move changed: the replay fails or samples stop matching.
    let check = broken("gamemove.h5", "game_moves", &|v| v.swap(2, 3));
    assert!(!check.is_ok(), "{check:?}");
    // A sample's ply moved: its position is not the game's at that ply.
    let check = broken("ply.h5", "ply", &|v| v[4] = 6);
    assert!(check.problems.iter().any(|p| p.contains("sample 4") && p.contains("ply 6")), "{check:?}");
    // Not a shard at all.
    let text = dir.path().join("text.h5");
    std::fs::write(&text, "nope").unwrap();
    assert!(verify_shard(&text).problems[0].contains("text.h5"));
}
