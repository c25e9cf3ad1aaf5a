//! The run configuration: one TOML file with a table per stage (`[run]`, `[model]`, `[selfplay]`,
//! `[train]`, `[gating]`, `[arena]`). Every field has a default and unknown fields are errors, so
//! a typo never silently falls back to a default. `configs/tiny-cpu.toml` is compiled in as the
//! default; a copy of the config a run uses is kept as `RUN/config.toml`.

use std::path::{Path, PathBuf};

use koma_nn::{DeviceList, ModelConfig, Precision};
use koma_selfplay::{RecordFormat, SelfPlayConfig};
use koma_shogi::OpeningSuite;
use koma_train::TrainConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{PipelineError, Result};

/// `configs/tiny-cpu.toml`: a small network that learns on a CPU-only machine within minutes.
pub const DEFAULT_CONFIG: &str = include_str!("../../../configs/tiny-cpu.toml");

/// A whole run configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PipelineConfig {
    pub run: RunConfig,
    /// The architecture of model 0 (a preset or a full model config).
    pub model: ModelConfig,
    pub selfplay: SelfPlayConfig,
    pub train: TrainConfig,
    pub gating: GatingConfig,
    pub arena: ArenaConfig,
}

/// `[run]`: how long, where the networks run, how data is cut into shards, what is written
/// besides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Stop after this many minutes (0: no limit). `--minutes` overrides it.
    pub minutes: f64,
    /// Stop after this much process CPU time (user + system, all threads), in minutes (0: no
    /// limit): a budget that stays fair when the machine's load changes. `--cpu-minutes`
    /// overrides it.
    pub cpu_minutes: f64,
    /// Stop when the trainer reaches this step (0: no limit). `--steps` overrides it.
    pub steps: u64,
    /// Stop once self-play has evaluated this many positions with the network (0: no limit): a
    /// budget of work that means the same on every machine, where minutes differ about 3.5× from
    /// one machine to the next. `--evals` overrides it.
    pub evals: u64,
    /// A stage that makes no progress this long (self-play plays no move; the trainer neither
    /// steps nor waits for data) shows in the status line and the log (0: not watched).
    pub stall_minutes: f64,
    /// `auto`, `cpu`, `cuda` or `cuda:N`, for self-play inference and the trainer alike; or
    /// several (`["cuda:0", "cuda:1"]`, `"cuda:0,cuda:1"`, `cuda:all`): self-play runs an
    /// inference service on each (workers spread over them) and the trainer a data-parallel
    /// replica on each (docs/cluster.md).
    #[schemars(with = "koma_nn::device::DeviceField")]
    pub device: DeviceList,
    /// Self-play inference precision: `auto` (f16 on CUDA, f32 on the CPU), `f32`, `f16`, `bf16`.
    /// The trainer's precision is `[train] precision`.
    pub inference_precision: Precision,
    /// libtorch intra-op threads of the trainer, and of self-play's inference (0: libtorch's
    /// default); with `selfplay_uses_idle_cores`, self-play's follow the trainer instead.
    pub threads: usize,
    /// On the CPU, self-play's inference takes the cores the trainer leaves idle: every core while
    /// the trainer waits for samples, all but its `threads` while it trains; on a lone CPU device,
    /// one inference service (its own network copy) per self-play worker, up to the cores
    /// (docs/pipeline.md). Off: one service that keeps `threads` whatever the trainer does.
    pub selfplay_uses_idle_cores: bool,
    /// Self-play games per HDF5 shard: smaller shards reach the trainer sooner.
    pub games_per_shard: usize,
    /// Opening suite for `[selfplay] openings_fraction` of the games: a file of USI position
    /// lines, or `builtin:balanced-8`; empty for none.
    #[serde(with = "crate::config_fields::opening_suite")]
    #[schemars(with = "String")]
    pub openings: OpeningSuite,
    /// Also write every self-play game as a record under `selfplay/records/` (`kif`, `kifu`,
    /// `csa`, `ki2`, `usi`, `sfen`, or empty for none).
    #[serde(with = "crate::config_fields::record_format")]
    #[schemars(with = "String")]
    pub records: Option<RecordFormat>,
    /// Also write the curves as TensorBoard event files under `tensorboard/` (the trainer's
    /// metrics, self-play's speed and game lengths, arena Elo): `tensorboard --logdir RUN`.
    pub tensorboard: bool,
    /// Seed of model 0's weights.
    pub seed: u64,
}

impl Default for RunConfig {
    fn default() -> RunConfig {
        RunConfig {
            minutes: 0.0,
            cpu_minutes: 0.0,
            steps: 0,
            evals: 0,
            stall_minutes: 10.0,
            device: DeviceList::default(),
            inference_precision: Precision::Auto,
            threads: 0,
            selfplay_uses_idle_cores: true,
            games_per_shard: 16,
            openings: OpeningSuite::builtin("balanced-8"),
            records: None,
            tensorboard: true,
            seed: 1,
        }
    }
}

/// `[gating]`: KataGo's gatekeeper. A new checkpoint replaces the self-play model only after
/// scoring at least `min_score` in a short match against it. Off by default (AlphaZero style:
/// self-play always uses the newest network).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GatingConfig {
    /// Gate new checkpoints (false: self-play always uses the newest).
    pub enabled: bool,
    /// Games of the gating match (rounded up to colour-swapped pairs).
    pub games: usize,
    /// The candidate's score (wins + draws/2 over games) needed to be accepted.
    pub min_score: f64,
    /// Simulations per move for both sides.
    pub simulations: u32,
    /// Games played at once.
    pub concurrency: usize,
}

impl Default for GatingConfig {
    fn default() -> GatingConfig {
        GatingConfig { enabled: false, games: 20, min_score: 0.55, simulations: 32, concurrency: 2 }
    }
}

/// `[arena]`: the end-of-run report (and, with `every_models`, evaluations during the run):
/// checkpoints against model 0 and the built-in reference players, Elo by training step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ArenaConfig {
    /// Games of the last model against model 0 and against each reference at the end of the run
    /// (0: no end-of-run report).
    pub games: usize,
    /// Reference players the last model also meets: `random`, `greedy`, `mcts-material[@N]`.
    pub references: Vec<String>,
    /// For the Elo curve: up to this many earlier checkpoints, evenly spaced, each play
    /// `curve_games` against model 0 and against the first reference.
    pub curve_models: usize,
    /// Games each curve checkpoint plays against each opponent (0: no curve).
    pub curve_games: usize,
    /// During the run: every this many new checkpoints, the newest plays `curve_games` against
    /// model 0 (0: only at the end). It shares the CPU/GPU with self-play and training.
    pub every_models: usize,
    /// Simulations per move for every network player (the same budget on both sides).
    pub simulations: u32,
    /// Games played at once.
    pub concurrency: usize,
    /// Game length limit in plies (a draw when reached).
    pub max_plies: u32,
    /// Opening suite the games start from (in colour-swapped pairs): a file or
    /// `builtin:balanced-8`; empty for the start position only.
    #[serde(with = "crate::config_fields::opening_suite")]
    #[schemars(with = "String")]
    pub openings: OpeningSuite,
}

impl Default for ArenaConfig {
    fn default() -> ArenaConfig {
        ArenaConfig {
            games: 40,
            references: vec!["greedy".into()],
            curve_models: 6,
            curve_games: 10,
            every_models: 0,
            simulations: 32,
            concurrency: 2,
            max_plies: 320,
            openings: OpeningSuite::builtin("balanced-8"),
        }
    }
}

/// Whether a network run with `options` runs on the CPU.
fn on_cpu(options: &koma_nn::RunOptions) -> bool {
    options.device.resolve().is_ok_and(|d| d == tch::Device::Cpu)
}

/// The `[model]` table: `preset = "NAME"` (`tiny`, `standard`, `resnet10-swish`), or a full model config
/// (`blocks`, `channels`, …, as `koma init --config` reads).
fn model_config(value: Option<&toml::Value>) -> std::result::Result<ModelConfig, String> {
    let Some(value) = value else { return Ok(ModelConfig::tiny()) };
    ModelConfig::from_toml_value(value.clone()).map_err(|e| match e {
        koma_nn::Error::Config(message) => format!("[model]: {message}"),
        other => format!("[model]: {other}"),
    })
}

fn table<T: serde::de::DeserializeOwned + Default>(file: &toml::Table, name: &str) -> std::result::Result<T, String> {
    match file.get(name) {
        None => Ok(T::default()),
        Some(v) => v.clone().try_into().map_err(|e: toml::de::Error| {
            // Fields renamed since earlier releases, so an old run's config.toml says what to do.
            let hint = if e.message().contains("`mate_in_one`") {
                " (renamed: mate_plies = 1 for a mate in one, 0 for off, 3 for a mate in three)"
            } else {
                ""
            };
            format!("[{name}]: {}{hint}", e.message())
        }),
    }
}

impl PipelineConfig {
    /// Parses and validates a run configuration; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<PipelineConfig> {
        let bad = |message: String| PipelineError::Config { origin: origin.to_string(), message };
        let file: toml::Table = toml::from_str(text).map_err(|e| bad(format!("not valid TOML: {e}")))?;
        const TABLES: [&str; 6] = ["run", "model", "selfplay", "train", "gating", "arena"];
        if let Some(unknown) = file.keys().find(|k| !TABLES.contains(&k.as_str())) {
            return Err(bad(format!("unknown table [{unknown}] (expected one of {})", TABLES.join(", "))));
        }
        let config = PipelineConfig {
            run: table(&file, "run").map_err(bad)?,
            model: model_config(file.get("model")).map_err(bad)?,
            selfplay: table(&file, "selfplay").map_err(bad)?,
            train: table(&file, "train").map_err(bad)?,
            gating: table(&file, "gating").map_err(bad)?,
            arena: table(&file, "arena").map_err(bad)?,
        };
        config.validate().map_err(bad)?;
        Ok(config)
    }

    pub fn from_file(path: &Path) -> Result<PipelineConfig> {
        let text =
            std::fs::read_to_string(path).map_err(|source| PipelineError::Io { path: path.to_path_buf(), source })?;
        PipelineConfig::parse(&text, &path.display().to_string())
    }

    /// The config with `[run] device` replaced (`koma pipeline --device`), checked again.
    pub fn with_device(mut self, device: &str) -> Result<PipelineConfig> {
        self.run.device = device
            .parse()
            .map_err(|e: koma_nn::Error| PipelineError::Config { origin: "--device".into(), message: e.to_string() })?;
        self.validate().map_err(|message| PipelineError::Config { origin: "--device".into(), message })?;
        Ok(self)
    }

    /// The embedded default (`configs/tiny-cpu.toml`).
    pub fn embedded_default() -> PipelineConfig {
        PipelineConfig::parse(DEFAULT_CONFIG, "configs/tiny-cpu.toml (embedded)")
            .expect("the embedded default config is valid")
    }

    fn validate(&self) -> std::result::Result<(), String> {
        self.selfplay.validate().map_err(|e| format!("[selfplay] {e}"))?;
        self.train_config().validate().map_err(|e| format!("[train] {e}"))?;
        self.train.loss.reply_weight_for(self.model.aux_reply_head).map_err(|e| e.to_string())?;
        // The pipeline runs both stages on one device: [run] says which, once.
        if self.train.device != TrainConfig::default().device || self.train.threads.is_some() {
            return Err("[train] device and threads are set in [run] for the pipeline (device, threads)".into());
        }
        if let DeviceList::Listed(list) = &self.run.device {
            if list.len() > self.selfplay.workers.max(1) {
                return Err(format!(
                    "[run] device lists {} devices but [selfplay] workers is {}: each device needs a worker",
                    list.len(),
                    self.selfplay.workers
                ));
            }
        }
        if !(self.run.minutes >= 0.0 && self.run.minutes.is_finite()) {
            return Err(format!("[run] minutes = {}: must be ≥ 0", self.run.minutes));
        }
        if !(self.run.cpu_minutes >= 0.0 && self.run.cpu_minutes.is_finite()) {
            return Err(format!("[run] cpu_minutes = {}: must be ≥ 0", self.run.cpu_minutes));
        }
        if !(self.run.stall_minutes >= 0.0 && self.run.stall_minutes.is_finite()) {
            return Err(format!("[run] stall_minutes = {}: must be ≥ 0", self.run.stall_minutes));
        }
        if self.run.games_per_shard == 0 {
            return Err("[run] games_per_shard must be ≥ 1".into());
        }
        if !(0.0..=1.0).contains(&self.gating.min_score) {
            return Err(format!("[gating] min_score = {}: must be in [0, 1]", self.gating.min_score));
        }
        if self.gating.enabled && self.gating.games == 0 {
            return Err("[gating] games must be ≥ 1 when gating is enabled".into());
        }
        for r in &self.arena.references {
            crate::players::reference_factory(r, self.arena.simulations, self.arena_rules())
                .map_err(|e| format!("[arena] references: {e}"))?;
        }
        Ok(())
    }

    /// The trainer's settings with the run's device and threads.
    pub fn train_config(&self) -> TrainConfig {
        let mut c = self.train.clone();
        c.device = self.run.device.clone();
        c.threads = (self.run.threads > 0).then_some(self.run.threads);
        c
    }

    /// How the arena's and the gatekeeper's networks run: on the first of the run's devices.
    pub fn evaluation_options(&self) -> Result<koma_nn::RunOptions> {
        Ok(self.inference_options()?.swap_remove(0))
    }

    /// How self-play networks run: one set of options per device (never empty).
    pub fn inference_options(&self) -> Result<Vec<koma_nn::RunOptions>> {
        let bad = |message: String| PipelineError::Config { origin: "[run]".into(), message };
        let devices = self.run.device.specs();
        let precision = self.run.inference_precision;
        let cpu_threads = (self.run.threads > 0).then_some(self.run.threads);
        Ok(devices
            .map_err(|e| bad(format!("device: {e}")))?
            .into_iter()
            .map(|device| koma_nn::RunOptions { device, precision, cpu_threads })
            .collect())
    }

    /// Self-play's inference services on a CPU shared with the trainer ([`Self::core_share`]):
    /// one per device listed, and on a lone CPU one per search worker up to the cores, each with
    /// its own copy of the network, so that two batches run at once (one service's libtorch
    /// threads idle between its batches and in a forward pass's serial parts, and a second
    /// service fills them: 198% CPU of 200% against 178% with one).
    fn shared_cpu_services(&self, devices: usize) -> usize {
        if devices == 1 {
            self.selfplay.workers.clamp(1, koma_base::cpu::cores())
        } else {
            devices
        }
    }

    /// How self-play and the trainer share the cores (`[run] selfplay_uses_idle_cores`): only
    /// when self-play's every device is the CPU.
    pub fn core_share(&self) -> Option<crate::core_share::CoreShare> {
        if !self.run.selfplay_uses_idle_cores {
            return None;
        }
        let options = self.inference_options().ok()?;
        if !options.iter().all(on_cpu) {
            return None;
        }
        let services = self.shared_cpu_services(options.len());
        let cores = koma_base::cpu::cores().min(koma_nn::device::default_cpu_threads().max(self.run.threads));
        let trainer_threads = if self.run.threads > 0 { self.run.threads } else { cores };
        Some(crate::core_share::CoreShare::new(cores, trainer_threads, services))
    }

    /// The rules arena games are played under: the run's rules ([selfplay] impasse and
    /// max_moves_rule), with the arena's own game length.
    pub fn arena_rules(&self) -> koma_shogi::rules::GameRules {
        koma_shogi::rules::GameRules { max_plies: self.arena.max_plies, ..self.selfplay.rules().unwrap_or_default() }
    }
}

/// Where a run's config comes from.
#[derive(Clone, Debug)]
pub enum ConfigSource {
    Embedded,
    File(PathBuf),
}

impl ConfigSource {
    /// The text and its name for error messages.
    pub fn read(&self) -> Result<(String, String)> {
        match self {
            ConfigSource::Embedded => Ok((DEFAULT_CONFIG.to_string(), "configs/tiny-cpu.toml (embedded)".into())),
            ConfigSource::File(path) => std::fs::read_to_string(path)
                .map(|t| (t, path.display().to_string()))
                .map_err(|source| PipelineError::Io { path: path.clone(), source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_parses() {
        let c = PipelineConfig::embedded_default();
        assert_eq!(c.model, ModelConfig::tiny());
        assert!(c.run.minutes > 0.0);
    }

    #[test]
    fn shipped_configs_parse() {
        let configs =
            Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
                .join("../../configs");
        let mut parsed = 0;
        for dir in [configs.clone(), configs.join("ablation")] {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "toml") {
                    PipelineConfig::from_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    parsed += 1;
                }
            }
        }
        assert!(parsed >= 3 + 6, "{parsed} configs");
    }

    /// The embedded default shares the cores between the trainer and self-play; off, or with
    /// self-play on a GPU, nothing is shared.
    #[test]
    fn selfplay_takes_idle_cores_on_the_cpu_only() {
        use koma_nn::ThreadBudget;
        let c = PipelineConfig::parse("[run]\ndevice = \"cpu\"\nthreads = 1\n", "x.toml").unwrap();
        let share = c.core_share().expect("a CPU run shares its cores");
        let waiting = share.threads();
        assert!((1..=koma_base::cpu::cores()).contains(&waiting), "{waiting}");
        share.observe(&koma_train::Progress::Step(Default::default()));
        assert_eq!(share.threads(), (waiting - 1).max(1), "the trainer's one thread is given back");
        let off = "[run]\ndevice = \"cpu\"\nselfplay_uses_idle_cores = false\n";
        assert!(PipelineConfig::parse(off, "x.toml").unwrap().core_share().is_none());
        if !tch::Cuda::is_available() {
            let cuda = PipelineConfig::parse("[run]\ndevice = \"cuda\"\n", "x.toml").unwrap();
            assert!(cuda.core_share().is_none(), "a device that cannot run is no CPU either");
        }
    }

    #[test]
    fn typos_are_errors_that_name_the_table() {
        let e = PipelineConfig::parse("[selfplay]\nsimulatons = 3\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("x.toml") && e.contains("[selfplay]") && e.contains("simulatons"), "{e}");
        let e = PipelineConfig::parse("[trian]\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("[trian]"), "{e}");
        let e = PipelineConfig::parse("[model]\npreset = \"huge\"\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("huge"), "{e}");
        let e = PipelineConfig::parse("[train]\ndevice = \"cpu\"\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("[run]"), "{e}");
        let e = PipelineConfig::parse("[arena]\nreferences = [\"grumpy\"]\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("grumpy"), "{e}");
    }

    /// `[run] device` as a list: one inference option per device, the trainer on all of them;
    /// a device without a self-play worker, or more devices than batch rows, is refused.
    #[test]
    fn several_devices() {
        let text = "[run]\ndevice = [\"cpu\", \"cpu\"]\n[selfplay]\nworkers = 2\n";
        let c = PipelineConfig::parse(text, "x.toml").unwrap();
        assert_eq!(c.run.device.to_string(), "cpu,cpu");
        assert_eq!(c.inference_options().unwrap().len(), 2);
        assert_eq!(c.evaluation_options().unwrap().device, koma_nn::DeviceSpec::Cpu);
        assert_eq!(c.train_config().device.to_string(), "cpu,cpu");
        let e = PipelineConfig::parse("[run]\ndevice = \"cpu,cpu\"\n[selfplay]\nworkers = 1\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 devices") && e.contains("workers"), "{e}");
        let e = PipelineConfig::parse(&format!("{text}[train]\nbatch_size = 1\n"), "x.toml").unwrap_err().to_string();
        assert!(e.contains("batch_size"), "{e}");
        let e = PipelineConfig::parse("[run]\ndevice = \"cpu,tpu\"\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("tpu"), "{e}");
        let one = PipelineConfig::parse("[selfplay]\nworkers = 2\n", "x.toml").unwrap();
        assert_eq!(one.clone().with_device("cpu,cpu").unwrap().inference_options().unwrap().len(), 2);
        let e = one.with_device("cpu,cpu,cpu").unwrap_err().to_string();
        assert!(e.contains("--device") && e.contains("3 devices"), "{e}");
    }

    /// On a lone CPU shared with the trainer, self-play runs one inference service per search
    /// worker (up to the cores); listed devices keep one each; without sharing there is no split.
    #[test]
    fn a_shared_cpu_runs_an_inference_service_per_worker() {
        let services = |text: &str| PipelineConfig::parse(text, "x.toml").unwrap().core_share().map(|s| s.services());
        let cores = koma_base::cpu::cores();
        assert_eq!(services("[run]\ndevice = \"cpu\"\n[selfplay]\nworkers = 2\n"), Some(2.min(cores)));
        assert_eq!(services("[run]\ndevice = \"cpu\"\n[selfplay]\nworkers = 64\n"), Some(cores.min(64)));
        assert_eq!(services("[run]\ndevice = \"cpu\"\n[selfplay]\nworkers = 1\n"), Some(1));
        assert_eq!(services("[run]\ndevice = \"cpu,cpu\"\n[selfplay]\nworkers = 4\n"), Some(2));
        assert_eq!(
            services("[run]\ndevice = \"cpu\"\nselfplay_uses_idle_cores = false\n[selfplay]\nworkers = 2\n"),
            None
        );
        // Options stay one per device: `koma selfplay --follow`, which shares nothing, runs one.
        let c = PipelineConfig::parse("[run]\ndevice = \"cpu\"\n[selfplay]\nworkers = 2\n", "x.toml").unwrap();
        assert_eq!(c.inference_options().unwrap().len(), 1);
    }

    #[test]
    fn self_play_settings_that_teach_nothing_are_errors_naming_the_field() {
        let gpu_small =
            Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
                .join("../../configs/gpu-small.toml");
        let text = std::fs::read_to_string(gpu_small).unwrap();
        assert!(PipelineConfig::parse(&text, "gpu-small.toml").is_ok());
        let cases = [
            ("root_noise = true", "root_noise = false", "[selfplay] search.root_noise = false"),
            ("full_search_fraction = 0.25", "full_search_fraction = 0.0", "[selfplay] full_search_fraction = 0"),
            ("cheap_simulations = 32", "cheap_simulations = 400", "[selfplay] cheap_simulations = 400"),
            ("root_noise = true", "root_noise = true\nforced_playouts_k = 2.0", "forced_playouts_k = 2"),
            ("root_noise = true", "root_noise = true\nmate_plies = 2", "mate_plies = 2"),
        ];
        for (from, to, expected) in cases {
            assert!(text.contains(from), "{from}");
            let e = PipelineConfig::parse(&text.replacen(from, to, 1), "gpu-small.toml").unwrap_err().to_string();
            assert!(e.contains("gpu-small.toml") && e.contains(expected), "{to}: {e}");
        }
        let e = PipelineConfig::parse("[selfplay.search]\ndirichlet_epsilon = 0.0\n", "x").unwrap_err().to_string();
        assert!(e.contains("dirichlet_epsilon"), "{e}");
        let e = PipelineConfig::parse("[selfplay]\nsimulations = 1\n", "x").unwrap_err().to_string();
        assert!(e.contains("simulations = 1"), "{e}");
        let e = PipelineConfig::parse("[train.loss]\nreply_weight = 0.15\n", "x").unwrap_err().to_string();
        assert!(e.contains("reply_weight") && e.contains("aux_reply_head"), "{e}");
        let e = PipelineConfig::parse("[selfplay.search]\nmate_in_one = true\n", "x").unwrap_err().to_string();
        assert!(e.contains("mate_plies = 1"), "{e}");
    }

    #[test]
    fn model_table_takes_a_full_config() {
        let c = PipelineConfig::parse("[model]\nblocks = 2\nchannels = 16\n", "x").unwrap();
        assert_eq!((c.model.blocks, c.model.channels), (2, 16));
        assert_eq!(PipelineConfig::parse("", "x").unwrap().model, ModelConfig::tiny());
    }
}
