//! A failing evaluator ends self-play with an error that names the model and the cause, within
//! moments, and every game finished before it was still delivered: no hang, no panic, no guessed
//! evaluations standing in for the network.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use koma_mcts::{EvalError, Evaluation, Evaluator, EvaluatorSlot, UniformEvaluator};
use koma_selfplay::{run, InferenceDevice, SelfPlayConfig, StartPositions};
use koma_shogi::Position;

/// Answers like [`UniformEvaluator`] until call `fail_at`, then fails as `how` says.
struct FailsAt {
    calls: AtomicUsize,
    fail_at: usize,
    how: Failure,
}

#[derive(Clone, Copy)]
enum Failure {
    Error,
    NaN,
    Panic,
    WrongCount,
}

impl Evaluator for FailsAt {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        let mut answer = UniformEvaluator.evaluate(positions)?;
        if self.calls.fetch_add(1, Ordering::Relaxed) < self.fail_at {
            return Ok(answer);
        }
        match self.how {
            Failure::Error => Err(EvalError::failed("forward pass failed: CUDA out of memory")),
            Failure::NaN => {
                answer[0].wdl = [f32::NAN, 0.0, 0.0];
                Ok(answer)
            }
            Failure::Panic => panic!("libtorch: CUDA out of memory"),
            Failure::WrongCount => {
                answer.pop();
                Ok(answer)
            }
        }
    }
}

fn config() -> SelfPlayConfig {
    SelfPlayConfig {
        workers: 2,
        games_per_worker: 4,
        simulations: 8,
        cheap_simulations: 2,
        max_plies: 24,
        ..SelfPlayConfig::default()
    }
}

/// Self-play with an evaluator that fails at call `fail_at`; returns the error and the games that
/// reached the sink.
fn fail(how: Failure, fail_at: usize) -> (String, usize) {
    let evaluator = FailsAt { calls: AtomicUsize::new(0), fail_at, how };
    let slot = EvaluatorSlot::new(Arc::new(evaluator), "model-00000300");
    let (sender, receiver) = crossbeam::channel::unbounded();
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let result = run(
        &config(),
        StartPositions::default(),
        &[InferenceDevice::cpu(slot)],
        usize::MAX,
        sender,
        stop,
        Duration::from_millis(20),
        &mut |_| {},
    );
    assert!(started.elapsed() < Duration::from_secs(30), "self-play took {:?} to notice", started.elapsed());
    let error = result.expect_err("self-play went on with a failing network");
    (error.to_string(), receiver.try_iter().count())
}

#[test]
fn a_network_error_stops_self_play_with_the_model_and_cause() {
    let (error, _) = fail(Failure::Error, 5);
    assert!(error.contains("model-00000300") && error.contains("CUDA out of memory"), "{error}");
}

#[test]
fn non_finite_values_are_an_error_not_a_sample() {
    let (error, _) = fail(Failure::NaN, 3);
    assert!(error.contains("model-00000300") && error.contains("non-finite") && error.contains("1 of"), "{error}");
}

#[test]
fn a_panicking_evaluator_is_an_error_not_a_hang() {
    let (error, _) = fail(Failure::Panic, 0);
    assert!(error.contains("panicked") && error.contains("CUDA out of memory"), "{error}");
}

#[test]
fn a_short_answer_is_an_error() {
    let (error, _) = fail(Failure::WrongCount, 2);
    assert!(error.contains("evaluations for"), "{error}");
}

#[test]
fn games_finished_before_the_failure_are_delivered() {
    // 24-ply games at 8 simulations: a few hundred calls finish several games first.
    let (error, games) = fail(Failure::Error, 600);
    assert!(games > 0, "no game reached the sink before the failure ({error})");
}
