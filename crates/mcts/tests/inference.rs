//! The inference thread merges concurrent requests (from self-play workers or arena games) into
//! one batch, answers each caller with its own evaluations in order, and, once a batch failed,
//! answers every caller with the failure's cause.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam::channel::{unbounded, Receiver, Sender};
use koma_mcts::{EvalError, Evaluation, Evaluator, EvaluatorSlot, InferenceServer};
use koma_shogi::Position;

/// Slow enough that requests queue up while a batch runs; the value encodes the move number. It
/// keeps the largest batch it was given.
#[derive(Default)]
struct Slow {
    largest: std::sync::atomic::AtomicUsize,
}

impl Evaluator for Slow {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        self.largest.fetch_max(positions.len(), Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(40));
        Ok(positions
            .iter()
            .map(|p| Evaluation { priors: Vec::new(), wdl: [p.move_number() as f32, 0.0, 0.0] })
            .collect())
    }
}

#[test]
fn concurrent_requests_share_batches() {
    let server = InferenceServer::spawn(EvaluatorSlot::new(Arc::new(Slow::default()), "slow"), 64);
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

/// Fails the first batch once `release` says so, after saying on `entered` that it has it.
struct FailsWhenReleased {
    entered: Sender<()>,
    release: Receiver<()>,
}

impl Evaluator for FailsWhenReleased {
    fn evaluate(&self, _: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        let _ = self.entered.send(());
        let _ = self.release.recv();
        Err(EvalError::failed("CUDA out of memory"))
    }
}

#[test]
fn a_request_queued_behind_a_failing_batch_gets_the_cause_not_just_stopped() {
    let (entered, has_batch) = unbounded();
    let (release, released) = unbounded();
    let slot = EvaluatorSlot::new(Arc::new(FailsWhenReleased { entered, release: released }), "model-00000300");
    let server = InferenceServer::spawn(slot, 1);
    let ask = |server: &InferenceServer| {
        let client = server.client();
        std::thread::spawn(move || client.evaluate(&[&Position::startpos()]).map(|_| ()))
    };
    let in_batch = ask(&server);
    has_batch.recv().unwrap();
    let queued = ask(&server);
    std::thread::sleep(Duration::from_millis(100));
    release.send(()).unwrap();
    for answer in [in_batch, queued] {
        let error = answer.join().unwrap().unwrap_err().to_string();
        assert!(error.contains("model-00000300") && error.contains("CUDA out of memory"), "{error}");
    }
}

struct AlwaysFails;

impl Evaluator for AlwaysFails {
    fn evaluate(&self, _: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        Err(EvalError::failed("CUDA out of memory"))
    }
}

/// The failure is recorded before the failed batch is answered: whoever got the error finds the
/// service stopped at once (the USI engine restarts its service on exactly that), every time.
#[test]
fn a_caller_that_got_the_error_finds_the_service_stopped() {
    for _ in 0..200 {
        let server = InferenceServer::spawn(EvaluatorSlot::new(Arc::new(AlwaysFails), "model-7"), 1);
        assert!(server.is_serving());
        let error = server.client().evaluate(&[&Position::startpos()]).unwrap_err();
        assert!(error.to_string().contains("CUDA out of memory"), "{error}");
        assert!(!server.is_serving(), "the error arrived before the service recorded it");
        assert_eq!(server.failure().map(|e| e.to_string()), Some(error.to_string()));
    }
}

/// Answers once `release` says so, after saying on `entered` that it has the batch.
struct AnswersWhenReleased {
    entered: Sender<()>,
    release: Receiver<()>,
}

impl Evaluator for AnswersWhenReleased {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        self.entered.send(()).unwrap();
        self.release.recv().unwrap();
        Ok(positions.iter().map(|_| Evaluation { priors: Vec::new(), wdl: [1.0, 0.0, 0.0] }).collect())
    }
}

#[test]
fn a_caller_with_a_deadline_stops_waiting_for_a_batch_still_running_and_the_service_goes_on() {
    let (entered_tx, entered) = unbounded();
    let (release, release_rx) = unbounded();
    let evaluator = AnswersWhenReleased { entered: entered_tx, release: release_rx };
    let server = InferenceServer::spawn(EvaluatorSlot::new(Arc::new(evaluator), "held"), 8);
    let client = server.client();
    let start = Position::startpos();
    // Gives up once the batch is inside the evaluator (which holds it until released).
    let give_up = || entered.try_recv().is_ok();
    let error = client.evaluate_until(&[&start], &give_up).unwrap_err();
    assert!(matches!(error, EvalError::Cancelled(_)), "{error}");
    // The batch it left is still running: the service finishes it and then answers the next.
    release.send(()).unwrap();
    let next = std::thread::spawn(move || client.evaluate(&[&Position::startpos()]).map(|e| e.len()));
    entered.recv().unwrap();
    release.send(()).unwrap();
    assert_eq!(next.join().unwrap().unwrap(), 1);
    // Evaluators on the caller's thread cannot be interrupted: the default just evaluates.
    let never = || -> bool { panic!("an evaluator on the caller's thread has nothing to give up") };
    let uniform = koma_mcts::UniformEvaluator.evaluate_until(&[&start], &never).unwrap();
    assert_eq!(uniform.len(), 1);
}

#[test]
fn a_request_abandoned_before_its_batch_starts_is_never_evaluated() {
    let (entered_tx, entered) = unbounded();
    let (release, release_rx) = unbounded();
    let evaluator = AnswersWhenReleased { entered: entered_tx, release: release_rx };
    let server = InferenceServer::spawn(EvaluatorSlot::new(Arc::new(evaluator), "held"), 1);
    let client = server.client();
    let start = Position::startpos();
    // A batch the evaluator holds, so that the next request waits in the queue.
    let running = {
        let client = client.clone();
        std::thread::spawn(move || client.evaluate(&[&Position::startpos()]).map(|e| e.len()))
    };
    entered.recv().unwrap();
    let error = client.evaluate_until(&[&start, &start], &|| true).unwrap_err();
    assert!(matches!(error, EvalError::Cancelled(_)), "{error}");
    release.send(()).unwrap();
    assert_eq!(running.join().unwrap().unwrap(), 1);
    // The next request is served; the abandoned one's two positions never reached the evaluator.
    let next = std::thread::spawn(move || client.evaluate(&[&Position::startpos()]).map(|e| e.len()));
    entered.recv().unwrap();
    release.send(()).unwrap();
    assert_eq!(next.join().unwrap().unwrap(), 1);
    assert_eq!(server.stats().positions.load(Ordering::Relaxed), 2);
}

#[test]
fn a_request_that_would_overfill_a_batch_opens_the_next_one() {
    let slow = Arc::new(Slow::default());
    let server = InferenceServer::spawn(EvaluatorSlot::new(slow.clone(), "slow"), 8);
    let client = server.client();
    let mut pos = Position::startpos();
    pos.do_move(pos.legal_moves()[0]);
    // Twelve requests of 3 queue behind the first: batches of 8 would take 2 whole requests and
    // part of a third; they take 2 (6 positions), and the third opens the next batch.
    let pending: Vec<_> = (0..12).map(|_| client.submit(vec![pos.clone(); 3])).collect();
    for p in pending {
        let answers = client.receive(p).unwrap();
        assert_eq!(answers.len(), 3);
        assert!(answers.iter().all(|e| e.wdl[0] == pos.move_number() as f32));
    }
    let largest = slow.largest.load(Ordering::Relaxed);
    assert!(largest <= 8, "a batch of {largest}");
    assert_eq!(server.stats().positions.load(Ordering::Relaxed), 36);
}
