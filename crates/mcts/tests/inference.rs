//! The inference thread merges concurrent requests (from self-play workers or arena games) into
//! one batch, and answers each caller with its own evaluations in order.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use koma_mcts::{EvalError, Evaluation, Evaluator};
use koma_selfplay::{EvaluatorSlot, InferenceServer};
use koma_shogi::Position;

/// Slow enough that requests queue up while a batch runs; the value encodes the move number.
struct Slow;

impl Evaluator for Slow {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        std::thread::sleep(Duration::from_millis(40));
        Ok(positions
            .iter()
            .map(|p| Evaluation { priors: Vec::new(), wdl: [p.move_number() as f32, 0.0, 0.0] })
            .collect())
    }
}

#[test]
fn concurrent_requests_share_batches() {
    let server = InferenceServer::spawn(EvaluatorSlot::new(Arc::new(Slow), "slow"), 64);
    let threads: Vec<_> = (0..8u32)
        .map(|i| {
            let client = server.client();
            std::thread::spawn(move || {
                let pos = Position::from_sfen(&format!(
                    "{} {}",
                    "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -",
                    i + 1
                ))
                .unwrap();
                let answers = client.evaluate(&[&pos, &pos]).unwrap();
                assert_eq!(answers.len(), 2);
                assert!(answers.iter().all(|e| e.wdl[0] == (i + 1) as f32), "thread {i} got another caller's answer");
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let batches = server.stats().batches.load(Ordering::Relaxed);
    assert_eq!(server.stats().positions.load(Ordering::Relaxed), 16);
    assert!(batches < 8, "8 concurrent requests ran as {batches} batches");
}
