//! `koma plan`: a run's timeline before it starts, from its config and two throughputs (network
//! evaluations per second in self-play, samples per second the trainer can take). It says what a
//! config costs: when the first trained model comes, how many new samples and minutes each model
//! takes, how the replay window grows, the learning rate and trainer step at each hour, when the
//! schedule and the run end, and the disk the shards take. docs/plan.md explains the arithmetic.
//!
//! The model is deliberately simple and stated: self-play keeps `workers × games_per_worker` games
//! in flight in each of its processes, all started at once, so the first games end about one game
//! latency (games in flight ÷ games per second) after the start, and from then on samples reach
//! the shards at a constant rate (`evals/s ÷ evaluations per move × full_search_fraction`); the
//! trainer starts once the window holds `min_window_samples` and then trains at its capacity,
//! never more than `samples_per_new_sample` × the samples produced so far (the follow ratio is
//! cumulative, as the loader enforces it). The host's CPU is checked against the device: the
//! measured CPU time an evaluation costs (search, encode, decode) times the evaluations each
//! process asks for, against the cores of its host.

use serde::Serialize;

use crate::config::PipelineConfig;

/// What the plan needs beyond the config.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Throughput {
    /// Network evaluations per second of all self-play together (what `koma bench selfplay`
    /// reports as evals/s, measured next to the trainer when they share a device).
    pub evals_per_s: f64,
    /// Samples per second the trainer takes when it never waits for data (`koma bench train`).
    pub train_samples_per_s: f64,
    /// Mean game length in plies.
    pub plies_per_game: f64,
    /// Network evaluations per simulation (below 1 with evaluation caches and terminal nodes).
    pub evals_per_simulation: f64,
    /// Shard bytes on disk per sample (`koma bench data`: 60.5).
    pub bytes_per_sample: f64,
    /// Self-play processes sharing `evals_per_s` (one per GPU of a Slurm array), each with the
    /// config's `workers × games_per_worker` games in flight.
    pub selfplay_processes: f64,
    /// CPU cores of each self-play process's host.
    pub host_cores: f64,
    /// Host CPU time an evaluation costs in self-play (search, encode, decode): `koma bench
    /// selfplay --simulate-device`'s CPU figure less the device's spin, in µs.
    pub host_cpu_us_per_eval: f64,
    /// Where the figures come from, for the report.
    pub source: String,
}

/// One row of the timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanRow {
    pub hours: f64,
    pub games: f64,
    /// Samples self-play produced so far.
    pub samples: f64,
    /// The replay window's size then.
    pub window: usize,
    pub trainer_step: u64,
    /// Samples the trainer has seen.
    pub samples_seen: f64,
    pub learning_rate: f64,
    pub models: u64,
    /// The material target's weight then (`[train.loss] material_weight`, decaying).
    pub material_weight: f64,
    /// Shards on disk, GB.
    pub disk_gb: f64,
}

/// A run's timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub throughput: Throughput,
    pub simulations_per_move: f64,
    pub games_per_hour: f64,
    pub samples_per_hour: f64,
    /// Samples per second the trainer takes once started (its capacity or the follow ratio's
    /// limit, whichever is lower), and which one limits it.
    pub train_samples_per_s: f64,
    pub trainer_limited_by: String,
    /// When the trainer's first step comes (the window holds `min_window_samples`).
    pub first_step_minutes: f64,
    /// When the first trained model is published.
    pub first_model_minutes: f64,
    /// Between two models once the trainer runs steadily.
    pub minutes_per_model: f64,
    pub new_samples_per_model: f64,
    /// When the learning-rate schedule reaches its end (warm-up plus decay; `None` for a
    /// constant schedule).
    pub schedule_end_hours: Option<f64>,
    /// When the run stops (`[run] minutes` or `steps`; `None`: until Ctrl-C).
    pub run_end_hours: Option<f64>,
    /// When the window reaches its `max`.
    pub window_full_hours: Option<f64>,
    pub disk_gb_per_hour: f64,
    /// Games being played at once, all self-play processes together.
    pub games_in_flight: f64,
    /// How long a game takes from its first move to its last: games in flight ÷ games per second.
    pub game_latency_minutes: f64,
    /// How old a sample is, on average, when its shard reaches the trainer: half a game's latency
    /// (its move was played that long before the game ended) and half a shard's filling.
    pub data_age_minutes: f64,
    /// The same in models published meanwhile.
    pub data_age_models: f64,
    /// Half-played games one self-play process loses when it restarts (a `scancel`, a time
    /// limit), and their samples.
    pub restart_loses_games: f64,
    pub restart_loses_samples: f64,
    /// Host cores each self-play process needs for its share of `evals_per_s`, its host's cores,
    /// and which of device and host limits self-play.
    pub host_cores_needed: f64,
    pub bottleneck: String,
    pub rows: Vec<PlanRow>,
    /// What looks wrong about the config at these throughputs.
    pub warnings: Vec<String>,
}

/// The plan of `config` at `throughput`, with rows up to `horizon_hours` (or the run's end,
/// whichever comes first). An error when a throughput is not positive.
pub fn plan(config: &PipelineConfig, throughput: &Throughput, horizon_hours: f64) -> Result<Plan, String> {
    for (name, value) in [
        ("evals/s", throughput.evals_per_s),
        ("trainer samples/s", throughput.train_samples_per_s),
        ("plies per game", throughput.plies_per_game),
        ("evaluations per simulation", throughput.evals_per_simulation),
        ("self-play processes", throughput.selfplay_processes),
        ("host cores", throughput.host_cores),
    ] {
        if !(value > 0.0 && value.is_finite()) {
            return Err(format!("{name} = {value}: must be a positive number"));
        }
    }
    let sp = &config.selfplay;
    let train = &config.train;
    let f = sp.full_search_fraction as f64;
    let simulations_per_move = f * sp.simulations as f64 + (1.0 - f) * sp.cheap_simulations as f64;
    let moves_per_s = throughput.evals_per_s / (simulations_per_move * throughput.evals_per_simulation);
    let samples_per_s = moves_per_s * f;
    let games_per_s = moves_per_s / throughput.plies_per_game;
    let processes = throughput.selfplay_processes;
    let games_in_flight = processes * (sp.workers.max(1) * sp.games_per_worker.max(1)) as f64;
    let latency_s = games_in_flight / games_per_s;
    // Samples in the shards by time t: none until the first games end, then the steady rate.
    let produced = |t: f64| samples_per_s * (t - latency_s).max(0.0);
    let ratio = train.follow.samples_per_new_sample;
    let ratio_limit = if ratio > 0.0 { ratio * samples_per_s } else { f64::INFINITY };
    let (train_rate, limited_by) = if throughput.train_samples_per_s <= ratio_limit {
        (throughput.train_samples_per_s, "its own speed (it never waits for data)")
    } else {
        (ratio_limit, "the follow ratio (samples_per_new_sample: it waits for self-play)")
    };
    let window = train.window.window_size();
    let min_window = train.follow.min_window_samples.max(1) as f64;
    let largest_window = window.of(usize::MAX / 2) as f64;
    if largest_window < min_window {
        return Err(format!(
            "[train.follow] min_window_samples = {} is more than the window ever holds ({largest_window} samples: \
             [train.window] size, or c, beta and max): the trainer would wait forever",
            train.follow.min_window_samples
        ));
    }
    // The window holds everything produced until it outgrows `c`, so the first step comes when
    // the samples produced reach `min_window_samples` (or the window's formula does).
    let first_step_s = time_until(|t| window.of(produced(t) as usize) as f64 >= min_window, samples_per_s)?;
    let batch = train.batch_size.max(1) as f64;
    // Samples trained by time t: the trainer's capacity since its first step, capped by the ratio.
    let seen_at = |t: f64| -> f64 {
        if t < first_step_s {
            return 0.0;
        }
        let by_speed = throughput.train_samples_per_s * (t - first_step_s);
        if ratio > 0.0 {
            by_speed.min(ratio * produced(t))
        } else {
            by_speed
        }
    };
    let step_at = |t: f64| (seen_at(t) / batch).floor() as u64;
    let every = train.checkpoint_every.max(1);
    let first_model_s = time_until(|t| step_at(t) >= every, 1.0 / first_step_s.max(1.0))?;
    let model_samples = every as f64 * batch;
    let seconds_per_model = model_samples / train_rate;
    let lr = &train.lr;
    let schedule_end_steps = match lr.schedule {
        koma_train::Schedule::Constant => None,
        // Over the run's budget: it ends with the run (below).
        koma_train::Schedule::Cosine if lr.over_budget() => None,
        koma_train::Schedule::Cosine => Some(lr.warmup_steps + lr.decay_steps),
        koma_train::Schedule::Step => {
            Some(lr.warmup_steps + lr.milestones.iter().copied().max().unwrap_or(lr.step_size.max(1) * 3))
        }
    };
    let time_of_step = |step: u64| time_until(|t| step_at(t) >= step, 1.0);
    let run_end_s = match (config.run.minutes > 0.0, config.run.steps > 0) {
        (true, true) => Some((config.run.minutes * 60.0).min(time_of_step(config.run.steps)?)),
        (true, false) => Some(config.run.minutes * 60.0),
        (false, true) => Some(time_of_step(config.run.steps)?),
        (false, false) => None,
    };
    let schedule_end_s = if lr.over_budget() { run_end_s } else { schedule_end_steps.map(time_of_step).transpose()? };
    // The share of the budget spent at time t, for a schedule over it: the trainer's, with the
    // plan's clock.
    let budget_spent = |t: f64, step: u64| {
        let by_time = (config.run.minutes > 0.0).then(|| t / (config.run.minutes * 60.0));
        koma_train::budget::run_share(step, (config.run.steps > 0).then_some(config.run.steps), 0.0, by_time, None)
            .unwrap_or(0.0)
    };
    let window_full_s =
        time_until(|t| window.of(produced(t) as usize) >= window.max, samples_per_s).ok().filter(|&t| t < 1e12);
    let disk_gb_per_hour = samples_per_s * 3600.0 * throughput.bytes_per_sample / 1e9;
    let end_s = run_end_s.unwrap_or(f64::INFINITY).min(horizon_hours * 3600.0);
    let row = |t: f64| {
        let samples = produced(t);
        let seen = seen_at(t);
        let step = step_at(t);
        PlanRow {
            hours: t / 3600.0,
            games: games_per_s * (t - latency_s).max(0.0),
            samples,
            window: window.of(samples as usize),
            trainer_step: step,
            samples_seen: seen,
            learning_rate: if step == 0 { 0.0 } else { lr.at(step - 1, budget_spent(t, step - 1)) },
            models: step / every,
            material_weight: train.loss.material_weight_at(seen as u64),
            disk_gb: samples * throughput.bytes_per_sample / 1e9,
        }
    };
    let mut times: Vec<f64> = vec![first_model_s];
    let mut hour = 0.25;
    while hour * 3600.0 < end_s {
        times.push(hour * 3600.0);
        hour = if hour < 1.0 {
            hour * 2.0
        } else if hour < 24.0 {
            hour + hour.max(1.0)
        } else {
            hour * 2.0
        };
    }
    times.extend(schedule_end_s.filter(|&t| t < end_s));
    times.extend(window_full_s.filter(|&t| t < end_s));
    if end_s.is_finite() {
        times.push(end_s);
    }
    times.retain(|&t| t <= end_s);
    times.sort_by(f64::total_cmp);
    times.dedup_by(|a, b| (*a - *b).abs() < 1.0);
    let rows: Vec<PlanRow> = times.into_iter().map(row).collect();

    let mut warnings = Vec::new();
    let minutes = |s: f64| s / 60.0;
    // A sample's move was played on average half a game before the game ended; its shard waits
    // for `games_per_shard` games of its process, half of that on average.
    let shard_fill_s = config.run.games_per_shard.max(1) as f64 / (games_per_s / processes);
    let data_age_s = 0.5 * latency_s + 0.5 * shard_fill_s;
    // The search, encoding and decoding; an accelerator's services also spin a core each while
    // their batch is on the device, which `--host-cores` should leave out (docs/plan.md).
    let host_cores_needed = throughput.evals_per_s / processes * throughput.host_cpu_us_per_eval * 1e-6;
    let bottleneck = if host_cores_needed > throughput.host_cores {
        warnings.push(format!(
            "each self-play host needs {host_cores_needed:.1} cores for {:.0} evaluations/s at {:.1} CPU µs each, and \
             has {:.0}: the host's CPU, not the device, limits self-play (fewer simulations, more cores, or a \
             smaller evals/s in this plan)",
            throughput.evals_per_s / processes,
            throughput.host_cpu_us_per_eval,
            throughput.host_cores
        ));
        "the host's CPU"
    } else {
        "the device"
    };
    if latency_s > seconds_per_model {
        warnings.push(format!(
            "a game lasts {:.1} minutes, longer than the {:.1} minutes between models: most of a game's moves are \
             played by a model already replaced, and its samples reach the trainer {:.1} models late (fewer \
             games_per_worker, or a larger checkpoint_every)",
            minutes(latency_s),
            minutes(seconds_per_model),
            data_age_s / seconds_per_model
        ));
    }
    if minutes(first_model_s) > 30.0 {
        warnings.push(format!(
            "the first trained model comes after {:.0} minutes: self-play plays model 0 (random) until then \
             (lower min_window_samples or checkpoint_every)",
            minutes(first_model_s)
        ));
    }
    if minutes(seconds_per_model) > 20.0 {
        warnings.push(format!(
            "{:.0} minutes and {:.0} new samples per model: self-play learns of the trainer's progress rarely \
             (KataGo publishes about every 250 k samples trained with many GPUs; lower checkpoint_every)",
            minutes(seconds_per_model),
            seconds_per_model * samples_per_s
        ));
    }
    if let Some(end) = schedule_end_s.filter(|&t| t > 14.0 * 86400.0) {
        warnings.push(format!(
            "the learning-rate schedule ends after {:.0} days at this throughput: not a config for one device of \
             this speed (shorten decay_steps / milestones, or run it on more devices)",
            end / 86400.0
        ));
    }
    if lr.over_budget() && run_end_s.is_none() {
        warnings.push(if config.run.cpu_minutes > 0.0 {
            "decay_steps = 0 anneals the learning rate over the run's cpu_minutes, which this plan cannot time: \
             the learning rates shown stay at base"
                .to_string()
        } else {
            "decay_steps = 0 anneals the learning rate over the run's budget, and this config sets neither minutes \
             nor steps: the pipeline starts it only with --minutes, --cpu-minutes or --steps"
                .to_string()
        });
    }
    if let Some(end) = run_end_s.filter(|&t| t > 30.0 * 86400.0) {
        warnings.push(format!("the run ends after {:.0} days at this throughput", end / 86400.0));
    }
    if ratio > 0.0 && throughput.train_samples_per_s < 0.5 * ratio_limit {
        warnings.push(format!(
            "the trainer can take only {:.0} samples/s, {:.0}% of what the follow ratio allows: each sample is \
             trained {:.1} times instead of {ratio}; the window goes stale (a faster trainer, fewer self-play \
             evaluations, or a lower samples_per_new_sample)",
            throughput.train_samples_per_s,
            100.0 * throughput.train_samples_per_s / ratio_limit,
            throughput.train_samples_per_s / samples_per_s
        ));
    }
    Ok(Plan {
        throughput: throughput.clone(),
        simulations_per_move,
        games_per_hour: games_per_s * 3600.0,
        samples_per_hour: samples_per_s * 3600.0,
        train_samples_per_s: train_rate,
        trainer_limited_by: limited_by.to_string(),
        first_step_minutes: minutes(first_step_s),
        first_model_minutes: minutes(first_model_s),
        minutes_per_model: minutes(seconds_per_model),
        new_samples_per_model: seconds_per_model * samples_per_s,
        schedule_end_hours: schedule_end_s.map(|s| s / 3600.0),
        run_end_hours: run_end_s.map(|s| s / 3600.0),
        window_full_hours: window_full_s.map(|s| s / 3600.0),
        disk_gb_per_hour,
        games_in_flight,
        game_latency_minutes: minutes(latency_s),
        data_age_minutes: minutes(data_age_s),
        data_age_models: data_age_s / seconds_per_model,
        restart_loses_games: games_in_flight / processes,
        restart_loses_samples: games_in_flight / processes * 0.5 * throughput.plies_per_game * f,
        host_cores_needed,
        bottleneck: bottleneck.to_string(),
        rows,
        warnings,
    })
}

/// The first time (seconds) at which `reached` holds, for a condition that stays true once true:
/// doubling, then bisection to a second. `scale` is a first guess of the time's order.
fn time_until(reached: impl Fn(f64) -> bool, scale: f64) -> Result<f64, String> {
    let mut hi = (1.0 / scale.max(1e-9)).clamp(1.0, 1e6);
    while !reached(hi) {
        hi *= 2.0;
        if hi > 1e13 {
            return Err("never reached at these throughputs".into());
        }
    }
    let mut lo = 0.0;
    if reached(lo) {
        return Ok(0.0);
    }
    while hi - lo > 1.0 {
        let mid = 0.5 * (lo + hi);
        if reached(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throughput(evals: f64, train: f64) -> Throughput {
        Throughput {
            evals_per_s: evals,
            train_samples_per_s: train,
            plies_per_game: 100.0,
            evals_per_simulation: 1.0,
            bytes_per_sample: 60.0,
            selfplay_processes: 1.0,
            host_cores: 16.0,
            host_cpu_us_per_eval: 12.0,
            source: "test".into(),
        }
    }

    /// The embedded default at the figures measured on the 2-core machine (docs/benchmarks.md:
    /// ~900 evals/s, ~180 trainer samples/s): the arithmetic by hand.
    #[test]
    fn the_embedded_default_by_hand() {
        let config = PipelineConfig::embedded_default();
        let p = plan(&config, &throughput(900.0, 180.0), 1.0).unwrap();
        let sp = &config.selfplay;
        let f = sp.full_search_fraction as f64;
        let per_move = f * sp.simulations as f64 + (1.0 - f) * sp.cheap_simulations as f64;
        assert!((p.simulations_per_move - per_move).abs() < 1e-9);
        let samples_per_s = 900.0 / per_move * f;
        assert!((p.samples_per_hour - samples_per_s * 3600.0).abs() < 1e-6);
        // The first games end one game latency after the start: games in flight ÷ games/s.
        let games_per_s = 900.0 / per_move / 100.0;
        let latency = (sp.workers * sp.games_per_worker) as f64 / games_per_s;
        assert!((p.game_latency_minutes * 60.0 - latency).abs() < 1e-6);
        let first_step = latency + config.train.follow.min_window_samples as f64 / samples_per_s;
        assert!((p.first_step_minutes * 60.0 - first_step).abs() <= 1.5, "{} vs {first_step}", p.first_step_minutes);
        // The trainer is limited by its own speed or the ratio, whichever is lower.
        let ratio_limit = config.train.follow.samples_per_new_sample * samples_per_s;
        assert!((p.train_samples_per_s - ratio_limit.min(180.0)).abs() < 1e-9);
        let model = config.train.checkpoint_every as f64 * config.train.batch_size as f64;
        assert!((p.minutes_per_model * 60.0 - model / p.train_samples_per_s).abs() < 1e-6);
        // The run's 30 minutes end the table.
        assert_eq!(p.run_end_hours, Some(0.5));
        assert!((p.rows.last().unwrap().hours - 0.5).abs() < 1e-9);
        let last = p.rows.last().unwrap();
        assert!((last.samples - samples_per_s * (1800.0 - latency)).abs() < 1e-6);
        assert!(last.trainer_step > 0 && last.models == last.trainer_step / config.train.checkpoint_every);
        assert!(p.rows.windows(2).all(|w| w[0].hours < w[1].hours && w[0].trainer_step <= w[1].trainer_step));
    }

    /// Game latency, the data's age, what a restart loses and the host's CPU, by hand: 32
    /// processes of 12 × 256 games at 800 simulations (gpu-az before it was re-sized).
    #[test]
    fn long_games_and_a_busy_host_are_named() {
        let mut config = PipelineConfig::embedded_default();
        let sp = &mut config.selfplay;
        (sp.workers, sp.games_per_worker, sp.simulations, sp.cheap_simulations, sp.full_search_fraction) =
            (12, 256, 800, 800, 1.0);
        config.run.games_per_shard = 128;
        config.train.checkpoint_every = 1000;
        config.train.batch_size = 4096;
        let mut t = Throughput { selfplay_processes: 32.0, ..throughput(32.0 * 28_000.0, 8000.0) };
        let p = plan(&config, &t, 24.0).unwrap();
        // 35 moves/s a process, 0.35 games/s: 3 072 games last 8 777 s.
        let games_per_s = 32.0 * 28_000.0 / 800.0 / 100.0;
        assert!((p.games_in_flight - 32.0 * 3072.0).abs() < 1e-9);
        let latency = 32.0 * 3072.0 / games_per_s;
        assert!((p.game_latency_minutes * 60.0 - latency).abs() < 1e-6, "{}", p.game_latency_minutes);
        let shard_fill = 128.0 / (games_per_s / 32.0);
        assert!((p.data_age_minutes * 60.0 - 0.5 * (latency + shard_fill)).abs() < 1e-6);
        assert!((p.data_age_models - p.data_age_minutes / p.minutes_per_model).abs() < 1e-9);
        assert_eq!(p.restart_loses_games, 3072.0);
        assert!((p.restart_loses_samples - 3072.0 * 50.0).abs() < 1e-9);
        assert!(p.first_step_minutes * 60.0 >= latency, "no step before the first games end");
        assert!(
            p.warnings.iter().any(|w| w.contains("longer than the") && w.contains("between models")),
            "{:?}",
            p.warnings
        );
        assert!((p.host_cores_needed - 28_000.0 * 12e-6).abs() < 1e-9, "{}", p.host_cores_needed);
        assert_eq!(p.bottleneck, "the device");
        // A host of 2 cores at 100 µs an evaluation cannot ask 28 k/s of its device.
        (t.host_cores, t.host_cpu_us_per_eval) = (2.0, 100.0);
        let p = plan(&config, &t, 24.0).unwrap();
        assert_eq!(p.bottleneck, "the host's CPU");
        assert!(p.warnings.iter().any(|w| w.contains("needs 2.8 cores")), "{:?}", p.warnings);
    }

    /// The GPU configs at the throughputs their comments state: a trained model within 15 minutes
    /// and games shorter than the time between models.
    #[test]
    fn the_gpu_configs_train_early_and_play_short_games() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        for (file, evals, train, processes) in
            [("gpu-small.toml", 100_000.0, 20_000.0, 1.0), ("gpu-az.toml", 900_000.0, 8000.0, 32.0)]
        {
            let config = PipelineConfig::from_file(&root.join(file)).unwrap();
            let t = Throughput { selfplay_processes: processes, ..throughput(evals, train) };
            let p = plan(&config, &t, 200.0).unwrap();
            assert!(p.first_model_minutes < 15.0, "{file}: first model after {} min", p.first_model_minutes);
            assert!(
                p.game_latency_minutes < p.minutes_per_model,
                "{file}: games last {} min, a model every {} min",
                p.game_latency_minutes,
                p.minutes_per_model
            );
            assert_eq!(p.bottleneck, "the device", "{file}");
        }
    }

    /// `decay_steps = 0`: the cosine ends with the run's 30 minutes, half-way at 15, and a config
    /// without a limit is warned of.
    #[test]
    fn a_cosine_over_the_budget_ends_with_the_run() {
        let mut config = PipelineConfig::embedded_default();
        config.train.lr.decay_steps = 0;
        let lr = config.train.lr.clone();
        let p = plan(&config, &throughput(900.0, 180.0), 1.0).unwrap();
        let last = p.rows.last().unwrap();
        assert!((last.hours - 0.5).abs() < 1e-9);
        assert!((last.learning_rate - lr.base * lr.min_factor).abs() < 1e-12, "{last:?}");
        let half = p.rows.iter().find(|r| (r.hours - 0.25).abs() < 1e-9).unwrap();
        let mid = lr.base * (lr.min_factor + (1.0 - lr.min_factor) * 0.5);
        assert!((half.learning_rate - mid).abs() < 1e-9, "{half:?}");
        assert!(!p.warnings.iter().any(|w| w.contains("decay_steps")), "{:?}", p.warnings);
        config.run.minutes = 0.0;
        let p = plan(&config, &throughput(900.0, 180.0), 1.0).unwrap();
        assert!(p.warnings.iter().any(|w| w.contains("neither minutes nor steps")), "{:?}", p.warnings);
        config.run.cpu_minutes = 60.0;
        let p = plan(&config, &throughput(900.0, 180.0), 1.0).unwrap();
        assert!(p.warnings.iter().any(|w| w.contains("cannot time")), "{:?}", p.warnings);
    }

    /// A schedule of a billion samples on one device's throughput is flagged, and the follow
    /// ratio caps a fast trainer.
    #[test]
    fn a_schedule_one_device_cannot_finish_is_flagged() {
        let mut config = PipelineConfig::embedded_default();
        config.run.minutes = 0.0;
        config.train.lr.schedule = koma_train::Schedule::Step;
        config.train.lr.milestones = vec![10_000_000];
        let p = plan(&config, &throughput(900.0, 1e6), 24.0).unwrap();
        assert!(p.trainer_limited_by.contains("ratio"), "{}", p.trainer_limited_by);
        assert!(p.warnings.iter().any(|w| w.contains("schedule ends after")), "{:?}", p.warnings);
        assert!(plan(&config, &throughput(0.0, 1.0), 1.0).unwrap_err().contains("evals/s"));
        config.train.window.size = 5000;
        config.train.follow.min_window_samples = 6000;
        let never = plan(&config, &throughput(900.0, 1e6), 1.0).unwrap_err();
        assert!(never.contains("min_window_samples = 6000") && never.contains("5000 samples"), "{never}");
    }
}
