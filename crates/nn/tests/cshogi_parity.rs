//! Features and move labels against cshogi's dlshogi encoding, bit for bit, on more than 10,000
//! random positions: random playouts from every handicap start (both sides to move) and random
//! placements of the full piece set over board and hands (full hands, promoted pieces, checks
//! and double checks). Every legal move of every position is labelled and compared.
//!
//! The comparison runs in the project venv's Python (python/koma/dlshogi_oracle.py, embedded),
//! which calls `cshogi.dlshogi.make_input_features` and `make_move_label`.

mod common;

use std::io::Write;
use std::process::Command;
use std::time::Instant;

use common::{playout_positions, random_position, require_python_modules, Rng};
use koma_nn::encoding::{self, InputBatch, INPUT1_LEN, INPUT2_LEN};
use koma_shogi::{Color, PieceType, Position};

const ORACLE: &str = include_str!("../../../python/koma/dlshogi_oracle.py");

fn test_positions() -> Vec<Position> {
    let mut rng = Rng::new(0x6b6f6d61);
    // 12 handicaps × 25 games × up to 240 plies, one position in 3: ≈ 12,000.
    let mut positions = playout_positions(&mut rng, 25, 240, 3);
    // Random placements until 3,000 more, at least 1,200 of them in check.
    let (mut placed, mut checks) = (0, 0);
    while placed < 3000 || checks < 1200 {
        if let Some(p) = random_position(&mut rng) {
            let in_check = p.in_check();
            if placed < 3000 || in_check {
                placed += 1;
                checks += in_check as usize;
                positions.push(p);
            }
        }
    }
    positions
}

fn hand_is_full(pos: &Position) -> bool {
    Color::ALL.iter().any(|&c| {
        let h = pos.hand(c);
        h.count(PieceType::Pawn) >= 8
            || [PieceType::Lance, PieceType::Knight, PieceType::Silver, PieceType::Gold]
                .iter()
                .any(|&pt| h.count(pt) >= 4)
            || [PieceType::Bishop, PieceType::Rook].iter().any(|&pt| h.count(pt) >= 2)
    })
}

#[test]
fn features_and_labels_match_cshogi() {
    let python = require_python_modules("cshogi, numpy");
    let positions = test_positions();
    let n = positions.len();
    let white = positions.iter().filter(|p| p.side_to_move() == Color::White).count();
    let checks = positions.iter().filter(|p| p.in_check()).count();
    let double_checks = positions.iter().filter(|p| p.checkers().count() > 1).count();
    let full_hands = positions.iter().filter(|p| hand_is_full(p)).count();
    eprintln!("{n} positions: {white} White to move, {checks} in check ({double_checks} double), {full_hands} with a full hand");
    assert!(n >= 10_000);
    assert!(white >= 3_000 && n - white >= 3_000);
    assert!(checks >= 1_000 && double_checks >= 20);
    assert!(full_hands >= 1_000);

    let start = Instant::now();
    let mut batch = InputBatch::new();
    batch.encode(&positions);
    eprintln!("encoded {n} positions in {:.1} ms", start.elapsed().as_secs_f64() * 1e3);

    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let positions_path = dir.join("positions.tsv");
    let features_path = dir.join("features.bin");
    let mut text = String::new();
    let mut labels = Vec::new();
    for pos in &positions {
        let moves = pos.legal_moves();
        labels.clear();
        encoding::legal_labels(pos, &moves, &mut labels);
        let usis: Vec<String> = moves.iter().map(|m| m.to_usi()).collect();
        let labs: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        text += &format!("{}\t{}\t{}\t{}\n", pos.to_sfen(), usis.join(","), labs.join(","), pos.in_check() as u8);
    }
    std::fs::write(&positions_path, text).unwrap();
    let mut f = std::io::BufWriter::new(std::fs::File::create(&features_path).unwrap());
    for i in 0..n {
        let (a, b) = batch.get(i);
        assert_eq!((a.len(), b.len()), (INPUT1_LEN, INPUT2_LEN));
        f.write_all(a).unwrap();
        f.write_all(b).unwrap();
    }
    f.flush().unwrap();
    drop(f);

    let start = Instant::now();
    let out = Command::new(&python)
        .args(["-c", ORACLE])
        .arg(&positions_path)
        .arg(&features_path)
        .output()
        .expect("running the cshogi oracle");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("cshogi oracle ({:.1} s): {stdout}", start.elapsed().as_secs_f64());
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "koma's encoding differs from cshogi's: {stdout}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).expect("oracle summary");
    assert_eq!(summary["positions"].as_u64(), Some(n as u64));
    assert!(summary["moves"].as_u64().unwrap() > 500_000);
    for key in ["feature_mismatches", "label_mismatches", "movelist_mismatches", "check_mismatches"] {
        assert_eq!(summary[key].as_u64(), Some(0), "{key}: {stdout}");
    }
}
