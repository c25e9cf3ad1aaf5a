//! One module per subcommand. To add one: write `foo.rs` with an `Args` struct (clap `Args`) and
//! `pub fn run(args: Args) -> anyhow::Result<()>`, then add a variant below and its match arm.

use clap::Subcommand;

mod arena;
mod bench;
mod choices;
mod config;
mod convert;
mod data;
mod encode;
mod eval;
mod evaluate;
mod experiment;
mod export;
mod info;
mod init;
mod mate;
mod nn_args;
mod openings;
mod perft;
mod pipeline;
mod plan;
mod plot;
mod ratings;
mod rules;
mod selfplay;
mod show;
mod train;
mod usi;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The main job: self-play and training together over a run directory, then an arena report.
    Pipeline(pipeline::Args),
    /// A run's timeline before it starts: first model, minutes per model, window, learning rate and steps by hour, disk.
    Plan(plan::Args),
    /// Measure a change to the loop: variants (configs) trained for the same budget from the same model 0, then a round robin and a report.
    Experiment(experiment::Args),
    /// Run configs: the field reference, the JSON Schema, or check files (`koma config check FILE`).
    Config(config::Args),
    /// Show the koma version, the libtorch it loaded and whether CUDA is usable.
    Info(info::Args),
    /// Count the leaves of the legal-move tree to a depth (bulk-counted perft).
    Perft(perft::Args),
    /// Rules oracle: read USI position lines on stdin, write legal moves, check and status as JSON.
    Rules(rules::Args),
    /// Mate solver oracle: read USI position lines on stdin, write whether the side to move mates (df-pn) as JSON.
    Mate(mate::Args),
    /// Print a board diagram of a position with both hands.
    Show(show::Args),
    /// Convert game records between CSA, KIF/KIFU, KI2, USI and SFEN, or print them as move text.
    Convert(convert::Args),
    /// Training data: import game records and hcpe files to shards, export hcpe, stats, verify.
    Data(data::Args),
    /// Play games with a network and write them as HDF5 training shards.
    Selfplay(selfplay::Args),
    /// Play a match between two players (checkpoints, reference players, USI engines).
    Arena(arena::Args),
    /// A run's evaluator as its own process: the newest model against model 0 every few models, the end-of-run report when the trainer finishes.
    Evaluate(evaluate::Args),
    /// Generate a balanced opening suite (USI position lines) for matches and self-play.
    Openings(openings::Args),
    /// Fit ratings over arena results and print (and plot) them.
    Ratings(ratings::Args),
    /// Measure the speed figures each stage promises (`koma bench rules`, …).
    Bench(bench::Args),
    /// Write dlshogi features and move labels of `<sfen> [<usi-move>]` lines to HDF5.
    Encode(encode::Args),
    /// Create a freshly initialised network checkpoint (weights + JSON sidecar).
    Init(init::Args),
    /// Evaluate positions with a network: W/D/L and the top moves with priors.
    Eval(eval::Args),
    /// Export a checkpoint to ONNX (dlshogi interface) or as a verified safetensors copy.
    Export(export::Args),
    /// Train a network on shards (self-play or imported records): checkpoints, metrics, exact --resume, --follow.
    Train(train::Args),
    /// Run as a USI engine on stdin/stdout (for shogi GUIs): `koma usi --model M`.
    Usi(usi::Args),
}

impl Command {
    /// Whether a closed output may simply end the command (SIGPIPE's default), as for Unix tools
    /// in a pipeline (`koma data stats … | head`): the short commands that print a report, and
    /// `usi`, whose output is the GUI. Not the long runs: with `2>&1 | tee log`, Ctrl-C also
    /// stops `tee`, and the run must still stop cleanly; nor the arena and bench, which write to
    /// engines and reference programs whose death must be an error they handle.
    pub fn exits_quietly_on_closed_output(&self) -> bool {
        !matches!(
            self,
            Command::Pipeline(_)
                | Command::Experiment(_)
                | Command::Train(_)
                | Command::Selfplay(_)
                | Command::Arena(_)
                | Command::Evaluate(_)
                | Command::Bench(_)
        )
    }

    pub fn run(self) -> anyhow::Result<()> {
        match self {
            Command::Pipeline(args) => pipeline::run(args),
            Command::Experiment(args) => experiment::run(args),
            Command::Plan(args) => plan::run(args),
            Command::Config(args) => config::run(args),
            Command::Info(args) => info::run(args),
            Command::Perft(args) => perft::run(args),
            Command::Rules(args) => rules::run(args),
            Command::Mate(args) => mate::run(args),
            Command::Show(args) => show::run(args),
            Command::Bench(args) => bench::run(args),
            Command::Convert(args) => convert::run(args),
            Command::Data(args) => data::run(args),
            Command::Selfplay(args) => selfplay::run(args),
            Command::Arena(args) => arena::run(args),
            Command::Evaluate(args) => evaluate::run(args),
            Command::Ratings(args) => ratings::run(args),
            Command::Openings(args) => openings::run(args),
            Command::Encode(args) => encode::run(args),
            Command::Init(args) => init::run(args),
            Command::Eval(args) => eval::run(args),
            Command::Export(args) => export::run(args),
            Command::Train(args) => train::run(args),
            Command::Usi(args) => usi::run(args),
        }
    }
}
