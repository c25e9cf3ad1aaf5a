//! Shards and the replay window on samples from real random games: round trips, atomic writes,
//! clear errors for broken files, and window sampling.

use std::io::Write;
use std::path::Path;

use koma_data::{
    flags, result_for, write_shard, DataError, GameSamples, OpenFailures, PackedPosition, ReplayWindow, ResidentShard,
    Sample, SampleWeights, ShardReader, ShardWriter, WindowSize, WindowStorage, OPEN_TRIES,
};
use koma_shogi::{EndReason, GameResult, Handicap, Move, Position, Square};

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// A random game from a random start with made-up search targets.
fn random_game(rng: &mut Rng, index: usize) -> GameSamples {
    let start = Handicap::ALL[index % Handicap::ALL.len()];
    let mut pos = start.position();
    let mut samples = Vec::new();
    let mut moves_played = Vec::new();
    let plies = 20 + rng.below(80);
    for ply in 0..plies {
        let moves = pos.legal_moves();
        if moves.is_empty() {
            break;
        }
        let chosen = moves[rng.below(moves.len())];
        let k = 1 + rng.below(moves.len().min(12));
        let raw: Vec<f32> = (0..k).map(|_| 1.0 + rng.below(100) as f32).collect();
        let sum: f32 = raw.iter().sum();
        let policy: Vec<(Move, f32)> = (0..k).map(|i| (moves[(i * 7) % moves.len()], raw[i] / sum)).collect();
        samples.push(Sample {
            position: PackedPosition::pack(&pos).unwrap(),
            played: Some(chosen),
            policy,
            root_wdl: [0.5, 0.2, 0.3],
            result: 0,
            ply: ply as u16,
            flags: if rng.below(4) == 0 { flags::FULL_SEARCH } else { 0 },
        });
        pos.do_move(chosen);
        moves_played.push(chosen);
    }
    let winner = if rng.below(2) == 0 { Some(pos.side_to_move()) } else { None };
    let start_pos = start.position();
    let mut side = start_pos.side_to_move();
    for s in &mut samples {
        s.result = result_for(side, winner);
        side = !side;
    }
    GameSamples {
        start_sfen: start_pos.to_sfen(),
        result: GameResult {
            winner,
            reason: if winner.is_some() { EndReason::Resignation } else { EndReason::MaxMoves },
        },
        length: samples.len() as u16,
        model: format!("model-{index}"),
        moves: moves_played,
        // Every other game has root value estimates: a shard mixes both kinds.
        root_values: if index.is_multiple_of(2) {
            (0..samples.len()).map(|i| [i as f32 / 100.0, -0.5, 0.25, index as f32 / 1000.0]).collect()
        } else {
            Vec::new()
        },
        samples,
    }
}

fn assert_same(a: &Sample, b: &Sample) {
    assert_eq!(a.position, b.position);
    assert_eq!(a.played, b.played);
    assert_eq!((a.result, a.ply, a.flags, a.root_wdl), (b.result, b.ply, b.flags, b.root_wdl));
    assert_eq!(a.policy.len(), b.policy.len());
    for ((ma, wa), (mb, wb)) in a.policy.iter().zip(&b.policy) {
        assert_eq!(ma, mb);
        assert!((wa - wb).abs() < 1e-4, "weight {wa} vs {wb}");
    }
}

#[test]
fn packed_positions_round_trip() {
    let mut rng = Rng(99);
    for i in 0..300 {
        let game = random_game(&mut rng, i);
        for s in &game.samples {
            let pos = s.position.unpack().unwrap();
            assert_eq!(PackedPosition::pack(&pos).unwrap(), s.position);
        }
    }
    for h in Handicap::ALL {
        let pos = h.position();
        let back = PackedPosition::pack(&pos).unwrap().unpack().unwrap();
        assert_eq!(back.to_sfen(), Position::from_sfen(&pos.to_sfen()).unwrap().to_sfen());
    }
    // A position whose every piece is in hand, and garbage bytes that must not panic.
    let hands = Position::from_sfen("4k4/9/9/9/9/9/9/9/4K4 b RB2G2S2N2L9Prb2g2s2n2l9p 1").unwrap();
    assert_eq!(PackedPosition::pack(&hands).unwrap().unpack().unwrap().to_sfen(), hands.to_sfen());
    // Eight lances in Black's hand (more than a hand stores) must be refused, not truncated.
    let mut bits: Vec<bool> = vec![false];
    let push = |bits: &mut Vec<bool>, v: u32, w: usize| bits.extend((0..w).map(|i| (v >> i) & 1 == 1));
    push(&mut bits, Square::from_usi("5i").unwrap().index() as u32, 7);
    push(&mut bits, Square::from_usi("5a").unwrap().index() as u32, 7);
    bits.extend(std::iter::repeat_n(false, 79));
    bits.push(false); // no pawns
    bits.extend(std::iter::repeat_n(true, 8)); // eight lances
    bits.push(false);
    let mut bytes = [0u8; 40];
    for (i, &b) in bits.iter().enumerate() {
        if b {
            bytes[i / 8] |= 1 << (i % 8);
        }
    }
    let err = PackedPosition(bytes).unpack().unwrap_err();
    assert!(err.to_string().contains("8 of Lance"), "{err}");
    for seed in 1..2000u64 {
        let mut r = Rng(seed);
        let bytes: [u8; 40] = std::array::from_fn(|_| r.below(256) as u8);
        let _ = PackedPosition(bytes).unpack();
    }
}

/// A shard whose write fails at any step (a full disk) is an error naming it; the shard it was
/// to replace is intact and no temporary is left.
#[test]
fn a_failed_shard_write_keeps_the_old_shard_and_leaves_no_temporary() {
    use koma_base::durable::{fail_next, Step};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.h5");
    let mut rng = Rng(9);
    let old: Vec<GameSamples> = (0..3).map(|i| random_game(&mut rng, i)).collect();
    let n = write_shard(&path, &old).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let new: Vec<GameSamples> = (0..5).map(|i| random_game(&mut rng, i)).collect();
    for step in [Step::Create, Step::Write, Step::SyncFile, Step::Rename] {
        fail_next(&path, step);
        let e = write_shard(&path, &new).unwrap_err();
        assert!(e.to_string().contains("s.h5"), "{step:?}: {e}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{step:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "{step:?}: a temporary was left");
    }
    assert_eq!(ShardReader::open(&path).unwrap().len(), n);
}

#[test]
fn shard_round_trip_and_game_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.h5");
    let mut rng = Rng(5);
    let games: Vec<GameSamples> = (0..12).map(|i| random_game(&mut rng, i)).collect();
    let n = write_shard(&path, &games).unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the shard, no temporary");
    let reader = ShardReader::open(&path).unwrap();
    assert_eq!(reader.len(), n);
    let all: Vec<&Sample> = games.iter().flat_map(|g| &g.samples).collect();
    for (a, b) in all.iter().zip(reader.read_all().unwrap()) {
        assert_same(a, &b);
    }
    let picks = [n - 1, 0, 3, 3];
    for (i, s) in picks.iter().zip(reader.read(&picks).unwrap()) {
        assert_same(all[*i], &s);
    }
    let infos = reader.games().unwrap();
    assert_eq!(infos.len(), games.len());
    for (info, game) in infos.iter().zip(&games) {
        assert_eq!(
            (&info.start_sfen, info.result, info.length, &info.model),
            (&game.start_sfen, game.result, game.length, &game.model)
        );
        assert_eq!(info.samples.len(), game.samples.len());
        assert_eq!(info.moves, game.moves);
    }
    assert!(matches!(reader.read(&[n]), Err(DataError::BadSample { .. })));
    // Root value estimates: each game's own rows, NaN rows for a game without them.
    let values = reader.root_values().unwrap().expect("the shard has root values");
    assert_eq!(values.len(), n);
    for (info, game) in infos.iter().zip(&games) {
        for (k, row) in info.samples.clone().enumerate() {
            match game.root_values.get(k) {
                Some(expected) => assert_eq!(&values[row], expected),
                None => assert!(values[row].iter().all(|v| v.is_nan())),
            }
        }
    }
    assert_eq!(reader.attr_string("selfplay_seed"), None);
    // Attributes given to the writer are kept; a shard of games without estimates has none.
    let plain: Vec<GameSamples> = games.iter().filter(|g| g.root_values.is_empty()).cloned().collect();
    let other = dir.path().join("b.h5");
    koma_data::write_shard_with(&other, &plain, &[("selfplay_seed".into(), "12345".into())]).unwrap();
    let reader = ShardReader::open(&other).unwrap();
    assert_eq!(reader.attr_string("selfplay_seed").as_deref(), Some("12345"));
    assert_eq!(reader.root_values().unwrap(), None);
}

fn expect_error(path: &Path, what: &str) -> String {
    match ShardReader::open(path) {
        Ok(_) => panic!("{what}: opened without error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn broken_shards_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(8);
    let games: Vec<GameSamples> = (0..4).map(|i| random_game(&mut rng, i)).collect();
    let good = dir.path().join("good.h5");
    write_shard(&good, &games).unwrap();

    let truncated = dir.path().join("truncated.h5");
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let msg = expect_error(&truncated, "truncated");
    assert!(msg.contains("truncated.h5"), "{msg}");

    let version = dir.path().join("version.h5");
    std::fs::copy(&good, &version).unwrap();
    {
        let file = hdf5::File::open_rw(&version).unwrap();
        file.delete_attr("format_version").unwrap();
        file.new_attr::<u32>().shape(()).create("format_version").unwrap().as_writer().write_scalar(&99u32).unwrap();
    }
    let msg = expect_error(&version, "version");
    assert!(msg.contains("version 99"), "{msg}");

    let missing = dir.path().join("missing.h5");
    std::fs::copy(&good, &missing).unwrap();
    hdf5::File::open_rw(&missing).unwrap().unlink("policy_weight").unwrap();
    let msg = expect_error(&missing, "missing");
    assert!(msg.contains("\"policy_weight\" is missing"), "{msg}");

    let text = dir.path().join("text.h5");
    std::fs::write(&text, "not hdf5").unwrap();
    expect_error(&text, "text");

    // Policy offsets that do not start at 0 (entries before the first sample's): refused, by
    // the window in memory too, not a panic at a later draw.
    let offset = dir.path().join("offset.h5");
    std::fs::copy(&good, &offset).unwrap();
    {
        let file = hdf5::File::open_rw(&offset).unwrap();
        let mut offsets: Vec<u32> = file.dataset("policy_offsets").unwrap().read_raw().unwrap();
        offsets[0] = offsets[1].min(1);
        assert_eq!(offsets[0], 1, "the first sample has a policy entry");
        file.unlink("policy_offsets").unwrap();
        file.new_dataset_builder().with_data(&offsets).create("policy_offsets").unwrap();
    }
    let msg = expect_error(&offset, "offset");
    assert!(msg.contains("policy_offsets start at 1"), "{msg}");
    assert!(ResidentShard::load(&offset).is_err());

    // Game moves that do not index the moves: samples still read, from disk and from memory;
    // the reads that need continuations fail, naming the shard.
    let moves = dir.path().join("moves.h5");
    std::fs::copy(&good, &moves).unwrap();
    {
        let file = hdf5::File::open_rw(&moves).unwrap();
        let mut offsets: Vec<u32> = file.dataset("game_move_offsets").unwrap().read_raw().unwrap();
        *offsets.last_mut().unwrap() += 1000;
        file.unlink("game_move_offsets").unwrap();
        file.new_dataset_builder().with_data(&offsets).create("game_move_offsets").unwrap();
    }
    let (reader, resident) = (ShardReader::open(&moves).unwrap(), ResidentShard::load(&moves).unwrap());
    assert_eq!(resident.read(&[0, 3]).unwrap(), reader.read(&[0, 3]).unwrap());
    for msg in [
        reader.read_with_continuations(&[0], 1).unwrap_err().to_string(),
        resident.read_with_continuations(&[0], 1).unwrap_err().to_string(),
    ] {
        assert!(msg.contains("moves.h5") && msg.contains("game_move_offsets"), "{msg}");
    }
}

/// A trainer started on a long run's shards loads the window, not the history: a shard behind
/// the window is counted but never read (one that cannot be read whole is not even noticed),
/// while the same shard inside the window is refused by the window in memory and retried.
#[test]
fn shards_behind_the_window_are_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(12);
    let games: Vec<GameSamples> = (0..9).map(|i| random_game(&mut rng, i)).collect();
    let writer = ShardWriter::spawn(dir.path(), "selfplay", 3).unwrap();
    for g in &games {
        writer.sender().send(g.clone()).unwrap();
    }
    let shards = writer.finish().unwrap().shards;
    assert_eq!(shards.len(), 3);
    // The oldest shard's positions have the wrong type: it opens (lengths agree) but does not
    // read whole.
    {
        let file = hdf5::File::open_rw(&shards[0]).unwrap();
        let rows = file.dataset("position").unwrap().shape()[0];
        file.unlink("position").unwrap();
        file.new_dataset_builder().with_data(&vec![0u16; rows]).create("position").unwrap();
    }
    // Still the oldest (the window orders shards by modification time).
    let before = std::fs::metadata(&shards[1]).unwrap().modified().unwrap() - std::time::Duration::from_secs(60);
    std::fs::File::options().write(true).open(&shards[0]).unwrap().set_modified(before).unwrap();
    assert!(ShardReader::open(&shards[0]).is_ok());
    assert!(ResidentShard::load(&shards[0]).is_err());
    let samples = |gs: &[GameSamples]| gs.iter().map(|g| g.samples.len()).sum::<usize>();
    let total = samples(&games);
    let mut window = ReplayWindow::open(
        dir.path(),
        WindowSize::fixed(samples(&games[3..])),
        SampleWeights::default(),
        WindowStorage::Memory,
    )
    .unwrap();
    assert_eq!(window.open_failures(), OpenFailures::default(), "the shard behind the window was read");
    assert_eq!((window.total_samples(), window.shard_count()), (total, 2));
    let held = window.resident_bytes();
    let newest: usize = shards[1..].iter().map(|p| ResidentShard::load(p).unwrap().bytes()).sum();
    assert_eq!(held, newest);
    assert_eq!(window.sample(50, &mut |n| rng.below(n)).unwrap().len(), 50);

    let mut whole =
        ReplayWindow::open(dir.path(), WindowSize::fixed(total), SampleWeights::default(), WindowStorage::Memory)
            .unwrap();
    assert_eq!(whole.open_failures(), OpenFailures { retrying: 1, given_up: 0 });
    assert_eq!(whole.total_samples(), samples(&games[3..]));
    assert_eq!(whole.sample(50, &mut |n| rng.below(n)).unwrap().len(), 50);
}

#[test]
fn writer_thread_and_replay_window() {
    for storage in [WindowStorage::Memory, WindowStorage::Disk] {
        writer_thread_and_replay_window_with(storage);
    }
}

fn writer_thread_and_replay_window_with(storage: WindowStorage) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(77);
    let writer = ShardWriter::spawn(dir.path(), "selfplay", 5).unwrap();
    let sender = writer.sender();
    let games: Vec<GameSamples> = (0..12).map(|i| random_game(&mut rng, i)).collect();
    for g in &games {
        sender.send(g.clone()).unwrap();
    }
    drop(sender);
    let summary = writer.finish().unwrap();
    assert_eq!(summary.shards.len(), 3);
    assert_eq!(summary.games, 12);
    let total: usize = games.iter().map(|g| g.samples.len()).sum();
    assert_eq!(summary.samples, total);

    // A corrupt shard in the directory is skipped with a warning.
    std::fs::write(dir.path().join("zz-corrupt.h5"), "garbage").unwrap();
    let newest: usize = games[10..].iter().map(|g| g.samples.len()).sum();
    let mut window =
        ReplayWindow::open(dir.path(), WindowSize::fixed(newest), SampleWeights::default(), storage).unwrap();
    assert_eq!(window.total_samples(), total);
    assert_eq!(window.len(), newest);
    // The two older shards hold nothing of the window: they are closed (a long run would
    // otherwise keep every shard it ever read open).
    assert_eq!(window.shard_count(), 1);
    let allowed: Vec<PackedPosition> = games[10..].iter().flat_map(|g| g.samples.iter().map(|s| s.position)).collect();
    let mut below = |n: usize| rng.below(n);
    let batch = window.sample(500, &mut below).unwrap();
    assert_eq!(batch.len(), 500);
    assert!(batch.iter().all(|s| allowed.contains(&s.position)), "sampled outside the window");

    // A new shard appears: the window notices it and moves on.
    let writer = ShardWriter::spawn(dir.path(), "selfplay", 5).unwrap();
    let extra = random_game(&mut Rng(3), 99);
    writer.sender().send(extra.clone()).unwrap();
    let summary = writer.finish().unwrap();
    assert!(summary.shards[0].ends_with("selfplay-000003.h5"), "resumed numbering: {:?}", summary.shards);
    assert_eq!(window.refresh().unwrap(), 1);
    assert_eq!(window.total_samples(), total + extra.samples.len());
    // The window now spans the new shard and the end of the one before: both stay open, and
    // draws still come from the window only.
    let shards_needed = if extra.samples.len() >= newest { 1 } else { 2 };
    assert_eq!(window.shard_count(), shards_needed);
    let mut in_window: Vec<PackedPosition> =
        games[10..].iter().flat_map(|g| g.samples.iter().map(|s| s.position)).collect();
    in_window.extend(extra.samples.iter().map(|s| s.position));
    let batch = window.sample(200, &mut |n| rng.below(n)).unwrap();
    assert_eq!(batch.len(), 200);
    assert!(batch.iter().all(|s| in_window.contains(&s.position)), "sampled outside the window");

    // Growing window (KataGo style) never exceeds the samples produced.
    let grow = WindowSize { c: 100.0, alpha: 0.75, beta: 0.4, max: 1_000_000 };
    assert_eq!(grow.of(50), 50);
    assert!(grow.of(10_000) > 100 && grow.of(10_000) < 10_000);
}

/// A sample's continuation is its game's next moves (the first is the opponent's reply), also
/// when the positions between were not recorded (cheap searches); shorter at the game's end, and
/// unknown for an unknown ply or when the sample's move is not the game's. The window draws the
/// same samples with or without continuations.
#[test]
fn continuations_are_the_games_next_moves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.h5");
    let mut rng = Rng(17);
    let mut games: Vec<GameSamples> = (0..10).map(|i| random_game(&mut rng, i)).collect();
    // Keep about half the samples of each game (the others as if cheap searches), always the last.
    for g in &mut games {
        let last = g.samples.len() - 1;
        let mut k = 0;
        g.samples.retain(|_| {
            k += 1;
            k - 1 == last || rng.below(2) == 0
        });
    }
    // One sample whose ply is unknown, one whose move is not the game's move at its ply.
    games[0].samples[0].ply = koma_data::PLY_UNKNOWN;
    if games[1].samples.len() > 1 {
        let other = games[1].moves[games[1].samples[0].ply as usize + 1];
        games[1].samples[0].played = Some(other);
    }
    write_shard(&path, &games).unwrap();
    let reader = ShardReader::open(&path).unwrap();
    let all: Vec<(usize, &Sample)> =
        games.iter().enumerate().flat_map(|(g, game)| game.samples.iter().map(move |s| (g, s))).collect();
    let indices: Vec<usize> = (0..reader.len()).rev().collect();
    const PLIES: usize = 6;
    let read = reader.read_with_continuations(&indices, PLIES).unwrap();
    let (mut some, mut none, mut short) = (0, 0, 0);
    for (&i, (sample, continuation)) in indices.iter().zip(&read) {
        let (g, original) = all[i];
        assert_same(original, sample);
        let moves = &games[g].moves;
        let ply = original.ply as usize;
        let expected = if original.ply == koma_data::PLY_UNKNOWN
            || (original.played.is_some() && original.played != moves.get(ply).copied())
        {
            None
        } else {
            Some(moves.iter().skip(ply + 1).take(PLIES).copied().collect::<Vec<_>>())
        };
        assert_eq!(*continuation, expected, "sample {i} (game {g}, ply {ply})");
        let Some(continuation) = continuation else {
            none += 1;
            continue;
        };
        // The moves are legal one after another from the position after the sample's move.
        let mut pos = sample.position.unpack().unwrap();
        if let Some(played) = sample.played {
            pos.do_move(played);
        }
        for &m in continuation {
            assert!(pos.legal_moves().contains(&m));
            pos.do_move(m);
        }
        if !continuation.is_empty() {
            some += 1;
        }
        if continuation.len() < PLIES {
            short += 1;
        }
    }
    assert!(some > 100 && none >= 2 && short >= games.len(), "{some} with a reply, {none} unknown, {short} short");
    // The last sample of every game has no reply.
    for (g, game) in games.iter().enumerate() {
        let last = games[..g].iter().map(|x| x.samples.len()).sum::<usize>() + game.samples.len() - 1;
        let (_, continuation) = &reader.read_with_continuations(&[last], 1).unwrap()[0];
        assert_eq!(continuation.as_ref().and_then(|c| c.first()), None);
    }

    // The shard decoded in memory gives the same samples and continuations.
    let resident = ResidentShard::load(&path).unwrap();
    assert_eq!(resident.len(), reader.len());
    assert_eq!(resident.read_with_continuations(&indices, PLIES).unwrap(), read);

    for storage in [WindowStorage::Memory, WindowStorage::Disk] {
        let mut window =
            ReplayWindow::open(dir.path(), WindowSize::fixed(10_000), SampleWeights::default(), storage).unwrap();
        let (mut r1, mut r2) = (Rng(3), Rng(3));
        let plain = window.sample(64, &mut |n| r1.below(n)).unwrap();
        let with = window.sample_with_continuations(64, 1, &mut |n| r2.below(n)).unwrap();
        assert_eq!(plain.len(), with.len());
        for (a, (b, _)) in plain.iter().zip(&with) {
            assert_same(a, b);
        }
        assert!(with.iter().any(|(_, c)| c.as_ref().is_some_and(|c| c.len() == 1)));
    }
}

/// The window in memory draws exactly what the window on disk draws for the same random numbers
/// (samples, order, continuations), over shards that the window's start cuts, with down-weighted
/// early plies, and after new shards join; a shard read whole from memory equals its point reads.
#[test]
fn the_window_in_memory_draws_what_the_window_on_disk_draws() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(41);
    let games: Vec<GameSamples> = (0..30).map(|i| random_game(&mut rng, i)).collect();
    let writer = ShardWriter::spawn(dir.path(), "selfplay", 4).unwrap();
    for g in &games[..20] {
        writer.sender().send(g.clone()).unwrap();
    }
    let first = writer.finish().unwrap();
    let total: usize = games[..20].iter().map(|g| g.samples.len()).sum();
    let size = WindowSize::fixed(total * 2 / 3);
    let weights = SampleWeights { early_plies: 6, early_probability: 0.3 };
    let mut memory = ReplayWindow::open(dir.path(), size, weights, WindowStorage::Memory).unwrap();
    let mut disk = ReplayWindow::open(dir.path(), size, weights, WindowStorage::Disk).unwrap();
    assert_eq!(memory.storage(), WindowStorage::Memory);
    assert_eq!((memory.len(), memory.shard_count()), (disk.len(), disk.shard_count()));
    assert!(memory.shard_count() < first.shards.len(), "the window's start cuts the shards");
    assert_eq!(disk.resident_bytes(), 0);
    // The open shards' columns: at least 66 bytes a sample of the window, at most what all the
    // shards hold (66 a sample, 4 a policy entry, 2 a game move, 4 per game and shard).
    let bytes = memory.resident_bytes();
    let all: usize = games[..20]
        .iter()
        .map(|g| g.samples.iter().map(|s| 66 + 4 * s.policy.len()).sum::<usize>() + 2 * g.moves.len() + 4)
        .sum::<usize>()
        + 8 * first.shards.len();
    assert!(bytes >= 66 * memory.len() && bytes <= all, "{bytes} bytes, window of {}, at most {all}", memory.len());

    let same = |memory: &mut ReplayWindow, disk: &mut ReplayWindow, seed: u64| {
        let (mut a, mut b) = (Rng(seed), Rng(seed));
        let from_memory = memory.sample_with_continuations(700, 4, &mut |n| a.below(n)).unwrap();
        let from_disk = disk.sample_with_continuations(700, 4, &mut |n| b.below(n)).unwrap();
        assert_eq!(from_memory.len(), 700);
        assert_eq!(from_memory, from_disk);
        let (mut a, mut b) = (Rng(seed + 1), Rng(seed + 1));
        assert_eq!(memory.sample(300, &mut |n| a.below(n)).unwrap(), disk.sample(300, &mut |n| b.below(n)).unwrap());
    };
    same(&mut memory, &mut disk, 9);

    let writer = ShardWriter::spawn(dir.path(), "selfplay", 4).unwrap();
    for g in &games[20..] {
        writer.sender().send(g.clone()).unwrap();
    }
    writer.finish().unwrap();
    assert_eq!(memory.refresh().unwrap(), disk.refresh().unwrap());
    assert_eq!((memory.total_samples(), memory.shard_count()), (disk.total_samples(), disk.shard_count()));
    same(&mut memory, &mut disk, 19);

    // Whole-shard reads against point reads, repeats and any order.
    let path = &first.shards[1];
    let (reader, resident) = (ShardReader::open(path).unwrap(), ResidentShard::load(path).unwrap());
    let indices: Vec<usize> = (0..200).map(|_| rng.below(reader.len())).collect();
    assert_eq!(resident.read(&indices).unwrap(), reader.read(&indices).unwrap());
    assert!(resident.read(&[reader.len()]).is_err(), "an index past the end is an error");
}

/// A shard that goes bad after older shards were closed: dropping it shifts the window back over
/// closed shards, and the draws must stay within the shards still open (no index underflow).
#[test]
fn a_bad_shard_dropped_after_older_ones_closed_keeps_draws_in_open_shards() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(5);
    let writer = ShardWriter::spawn(dir.path(), "selfplay", 4).unwrap();
    let games: Vec<GameSamples> = (0..12).map(|i| random_game(&mut rng, i)).collect();
    for g in &games {
        writer.sender().send(g.clone()).unwrap();
    }
    let summary = writer.finish().unwrap();
    assert_eq!(summary.shards.len(), 3);
    let samples = |gs: &[GameSamples]| gs.iter().map(|g| g.samples.len()).sum::<usize>();
    // The window: the last 3 games of the middle shard and the whole newest one.
    // On disk: a shard in memory is read once, so only the disk window meets a shard gone bad.
    let mut window = ReplayWindow::open(
        dir.path(),
        WindowSize::fixed(samples(&games[5..])),
        SampleWeights::default(),
        WindowStorage::Disk,
    )
    .unwrap();
    assert_eq!(window.shard_count(), 2, "the oldest shard is closed");
    // Dropping the newest shard moves the window's start back before the middle shard's.
    assert!(samples(&games[8..]) > samples(&games[4..5]));
    // The newest shard is overwritten on disk while open: its samples cannot be read.
    let newest = &summary.shards[2];
    let size = std::fs::metadata(newest).unwrap().len() as usize;
    std::fs::OpenOptions::new().write(true).open(newest).unwrap().write_all(&vec![0u8; size]).unwrap();
    let batch = window.sample(300, &mut |n| rng.below(n)).unwrap();
    assert_eq!(window.shard_count(), 1, "the bad shard is dropped");
    assert_eq!(batch.len(), 300);
    let middle: Vec<PackedPosition> = games[4..8].iter().flat_map(|g| g.samples.iter().map(|s| s.position)).collect();
    assert!(batch.iter().all(|s| middle.contains(&s.position)), "drawn from a closed or dropped shard");
}

/// A shard that fails to open is tried again at later refreshes, after a wait that doubles:
/// one that becomes readable joins the window; one that never does is given up after
/// `OPEN_TRIES` tries, and both counts are reported.
#[test]
fn a_shard_that_fails_to_open_is_retried_with_backoff_then_given_up() {
    for storage in [WindowStorage::Memory, WindowStorage::Disk] {
        a_shard_that_fails_to_open_is_retried_with(storage);
    }
}

fn a_shard_that_fails_to_open_is_retried_with(storage: WindowStorage) {
    let dir = tempfile::tempdir().unwrap();
    let flaky = dir.path().join("flaky.h5");
    let broken = dir.path().join("broken.h5");
    let mut window =
        ReplayWindow::open(dir.path(), WindowSize::fixed(1000), SampleWeights::default(), storage).unwrap();
    window.set_first_retry(std::time::Duration::from_millis(50));
    std::fs::write(&flaky, "not yet").unwrap();
    std::fs::write(&broken, "garbage").unwrap();
    let game = random_game(&mut Rng(5), 1);
    let repaired = dir.path().join("repaired.h5.part");
    write_shard(&repaired, std::slice::from_ref(&game)).unwrap();
    assert_eq!(window.refresh().unwrap(), 0);
    assert_eq!(window.open_failures(), OpenFailures { retrying: 2, given_up: 0 });
    // Not due yet: nothing is tried, though the shard is readable now.
    std::fs::rename(&repaired, &flaky).unwrap();
    assert_eq!(window.refresh().unwrap(), 0);
    assert_eq!(window.total_samples(), 0);
    // Due: the repaired shard opens; the broken one fails again and waits twice as long.
    std::thread::sleep(std::time::Duration::from_millis(60));
    assert_eq!(window.refresh().unwrap(), 1);
    assert_eq!(window.total_samples(), game.samples.len());
    assert_eq!(window.open_failures(), OpenFailures { retrying: 1, given_up: 0 });
    let mut tries = 2;
    while window.open_failures().retrying > 0 {
        std::thread::sleep(std::time::Duration::from_millis(50 << (tries - 1)));
        window.refresh().unwrap();
        tries += 1;
        assert!(tries <= OPEN_TRIES + 1, "still retrying after {tries} tries");
    }
    assert_eq!(tries, OPEN_TRIES);
    assert_eq!(window.open_failures(), OpenFailures { retrying: 0, given_up: 1 });
    assert_eq!(window.total_samples(), game.samples.len());
}
