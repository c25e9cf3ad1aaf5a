//! The engine's USI options: what `usi` lists and `setoption` changes. Names match
//! case-insensitively; out-of-range numbers are clamped (with a warning), anything else that does
//! not parse is refused and the old value kept.

use koma_shogi::rules::{GameRules, ImpasseRule, MaxMovesRule};

use crate::score::DEFAULT_EVAL_COEF;

/// Every setting the engine has.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Checkpoint (`.safetensors` with its `.json` sidecar). Without one the engine refuses to
    /// play unless `uniform_stand_in` asks for uniform priors and an even value.
    pub model: Option<String>,
    /// `UniformStandIn`: play with uniform priors and an even value when no model is set (for
    /// protocol tests and smoke runs; never chosen silently).
    pub uniform_stand_in: bool,
    /// `auto`, `cpu`, `cuda`, `cuda:N`.
    pub device: String,
    /// `auto`, `f32`, `f16`, `bf16`.
    pub precision: String,
    /// libtorch intra-op threads for CPU inference (0: chosen at each `go` from the cores free).
    pub threads: u64,
    /// Leaves per network batch (0: 32 on CUDA, 8 otherwise).
    pub batch_size: u64,
    /// Search threads sharing one tree, each with its own batch in flight (dlshogi's
    /// `UCT_Threads`); 1: the single-threaded search.
    pub search_threads: u64,
    /// Evaluation cache, MiB (0: off).
    pub nn_cache_mib: u64,
    /// Search tree memory, MiB (`USI_Hash`).
    pub hash_mib: u64,
    /// Playouts per move (0: no limit).
    pub playouts: u64,
    /// `USI_Ponder`: name a ponder move in `bestmove`.
    pub ponder: bool,
    pub multipv: u64,
    /// Resign below this win rate, in percent (0: never resign).
    pub resign_threshold: u64,
    /// Milliseconds kept back from every deadline for latency.
    pub byoyomi_margin: u64,
    /// `a` in cp = -a·ln(1/p − 1).
    pub eval_coef: u64,
    /// How impasse (entering-king) games end: `csa27`, `jsa24`, `try`, `try-unconditional`,
    /// `jishogi`, `none`.
    pub impasse: String,
    /// At the move limit: `draw`, or `checks` (JSA: play on while the checking side keeps checking).
    pub max_moves_rule: String,
    /// Plies after which search scores the game as drawn (0: no limit).
    pub max_moves_to_draw: u64,
    /// Plies of the quick mate search before each move (0: off; `go mate` searches deeper).
    pub mate_search_plies: u64,
    /// MiB of the df-pn table (`go mate` and the root mate search).
    pub mate_hash_mib: u64,
    /// Longest mate (plies) the df-pn search beside the MCTS looks for (0: no such search).
    pub mate_root_plies: u64,
    /// Descents of the df-pn search beside the MCTS before it gives up.
    pub mate_root_nodes: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            model: None,
            uniform_stand_in: false,
            device: "auto".into(),
            precision: "auto".into(),
            threads: 0,
            batch_size: 0,
            search_threads: 1,
            nn_cache_mib: 64,
            hash_mib: 1024,
            playouts: 0,
            ponder: false,
            multipv: 1,
            resign_threshold: 1,
            byoyomi_margin: 300,
            eval_coef: DEFAULT_EVAL_COEF as u64,
            impasse: "csa27".into(),
            max_moves_rule: "draw".into(),
            max_moves_to_draw: 0,
            mate_search_plies: 5,
            mate_hash_mib: koma_mate::DEFAULT_TABLE_MIB as u64,
            mate_root_plies: 29,
            mate_root_nodes: 2_000_000,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Check,
    Spin { min: u64, max: u64 },
    Combo(&'static [&'static str]),
    Text,
    Filename,
}

struct Spec {
    name: &'static str,
    kind: Kind,
}

const SPECS: &[Spec] = &[
    Spec { name: "Model", kind: Kind::Filename },
    Spec { name: "UniformStandIn", kind: Kind::Check },
    Spec { name: "Device", kind: Kind::Text },
    Spec { name: "Precision", kind: Kind::Combo(&["auto", "f32", "f16", "bf16"]) },
    Spec { name: "Threads", kind: Kind::Spin { min: 0, max: 1024 } },
    Spec { name: "BatchSize", kind: Kind::Spin { min: 0, max: 4096 } },
    Spec { name: "SearchThreads", kind: Kind::Spin { min: 1, max: 256 } },
    Spec { name: "NNCacheSize", kind: Kind::Spin { min: 0, max: 1 << 20 } },
    Spec { name: "USI_Hash", kind: Kind::Spin { min: 1, max: 1 << 22 } },
    Spec { name: "Playouts", kind: Kind::Spin { min: 0, max: 1_000_000_000 } },
    Spec { name: "USI_Ponder", kind: Kind::Check },
    Spec { name: "MultiPV", kind: Kind::Spin { min: 1, max: 600 } },
    Spec { name: "ResignThreshold", kind: Kind::Spin { min: 0, max: 100 } },
    Spec { name: "ByoyomiMargin", kind: Kind::Spin { min: 0, max: 60_000 } },
    Spec { name: "EvalCoef", kind: Kind::Spin { min: 1, max: 10_000 } },
    Spec { name: "ImpasseRule", kind: Kind::Combo(&["csa27", "jsa24", "try", "try-unconditional", "jishogi", "none"]) },
    Spec { name: "MaxMovesToDraw", kind: Kind::Spin { min: 0, max: 100_000 } },
    Spec { name: "MaxMovesRule", kind: Kind::Combo(&["draw", "checks"]) },
    Spec { name: "MateSearchPlies", kind: Kind::Spin { min: 0, max: 15 } },
    Spec { name: "MateHash", kind: Kind::Spin { min: 1, max: 65_536 } },
    Spec { name: "MateRootPlies", kind: Kind::Spin { min: 0, max: 255 } },
    Spec { name: "MateRootNodes", kind: Kind::Spin { min: 1_000, max: 1_000_000_000 } },
];

enum Value {
    Bool(bool),
    Number(u64),
    Text(String),
}

/// Names other engines use for the same concepts (docs/engine.md), accepted by `setoption` so
/// that settings written for YaneuraOu or dlshogi carry over: the alias and koma's option (values
/// that differ in form are translated by [`alias`]). Not listed in the `usi` answer.
const ALIASES: &[(&str, &str)] = &[
    // YaneuraOu
    ("EnteringKingRule", "ImpasseRule"),
    // dlshogi
    ("DNN_Model", "Model"),
    ("DNN_Batch_Size", "BatchSize"),
    ("UCT_Threads", "SearchThreads"),
    ("Resign_Threshold", "ResignThreshold"),
    ("Draw_Ply", "MaxMovesToDraw"),
    ("Const_Playout", "Playouts"),
    ("Byoyomi_Margin", "ByoyomiMargin"),
    ("Mate_Root_Search", "MateRootPlies"),
    ("DfPn_Hash", "MateHash"),
];

/// koma's option and value for an alias `name` (None when `name` is no alias); an error for a
/// value the alias's engine allows but koma cannot honour.
fn alias(name: &str, value: &str) -> Result<Option<(&'static str, String)>, OptionError> {
    let Some(&(alias, canonical)) = ALIASES.iter().find(|(a, _)| a.eq_ignore_ascii_case(name)) else {
        return Ok(None);
    };
    let translated = match alias {
        // YaneuraOu's rules; the `H` variants count a handicap game's points as the even game's.
        "EnteringKingRule" => match value.to_ascii_lowercase().as_str() {
            "noenteringking" => "none",
            "csarule24" | "csarule24h" => "jsa24",
            "csarule27" | "csarule27h" => "csa27",
            // YaneuraOu's Try rule does not wait for both kings to enter.
            "tryrule" => "try-unconditional",
            _ => {
                return Err(OptionError::NotOneOf {
                    option: "EnteringKingRule",
                    value: value.into(),
                    choices: "NoEnteringKing, CSARule24, CSARule24H, CSARule27, CSARule27H, TryRule".into(),
                })
            }
        }
        .to_string(),
        // dlshogi's threshold is per mille of win rate, koma's per cent.
        "Resign_Threshold" => {
            let n: u64 = value
                .parse()
                .map_err(|_| OptionError::NotANumber { option: "Resign_Threshold", value: value.into() })?;
            ((n + 5) / 10).to_string()
        }
        _ => value.to_string(),
    };
    Ok(Some((canonical, translated)))
}

/// A `setoption` that was refused: the option keeps its value.
#[derive(Debug, thiserror::Error)]
pub enum OptionError {
    #[error("unknown option {0:?}")]
    Unknown(String),
    #[error("option {option}: {value:?} is not true or false")]
    NotABool { option: &'static str, value: String },
    #[error("option {option}: {value:?} is not a number")]
    NotANumber { option: &'static str, value: String },
    #[error("option {option}: {value:?} is not one of {choices}")]
    NotOneOf { option: &'static str, value: String, choices: String },
    #[error("option Device: {0}")]
    Device(#[source] koma_nn::Error),
}

impl Options {
    /// The `option name … type …` lines of the `usi` answer; defaults are the current values
    /// (so a `--model` given on the command line shows as the default).
    pub fn usi_lines(&self) -> Vec<String> {
        SPECS
            .iter()
            .map(|spec| {
                let name = spec.name;
                match (spec.kind, self.get(name)) {
                    (Kind::Check, Value::Bool(b)) => format!("option name {name} type check default {b}"),
                    (Kind::Spin { min, max }, Value::Number(n)) => {
                        format!("option name {name} type spin default {n} min {min} max {max}")
                    }
                    (Kind::Combo(vars), Value::Text(t)) => {
                        let vars: String = vars.iter().map(|v| format!(" var {v}")).collect();
                        format!("option name {name} type combo default {t}{vars}")
                    }
                    (Kind::Text, Value::Text(t)) => format!("option name {name} type string default {}", or_empty(&t)),
                    (Kind::Filename, Value::Text(t)) => {
                        format!("option name {name} type filename default {}", or_empty(&t))
                    }
                    _ => unreachable!("option {name}: kind and value disagree"),
                }
            })
            .collect()
    }

    fn get(&self, name: &str) -> Value {
        match name {
            "Model" => Value::Text(self.model.clone().unwrap_or_default()),
            "UniformStandIn" => Value::Bool(self.uniform_stand_in),
            "Device" => Value::Text(self.device.clone()),
            "Precision" => Value::Text(self.precision.clone()),
            "Threads" => Value::Number(self.threads),
            "BatchSize" => Value::Number(self.batch_size),
            "SearchThreads" => Value::Number(self.search_threads),
            "NNCacheSize" => Value::Number(self.nn_cache_mib),
            "USI_Hash" => Value::Number(self.hash_mib),
            "Playouts" => Value::Number(self.playouts),
            "USI_Ponder" => Value::Bool(self.ponder),
            "MultiPV" => Value::Number(self.multipv),
            "ResignThreshold" => Value::Number(self.resign_threshold),
            "ByoyomiMargin" => Value::Number(self.byoyomi_margin),
            "EvalCoef" => Value::Number(self.eval_coef),
            "ImpasseRule" => Value::Text(self.impasse.clone()),
            "MaxMovesToDraw" => Value::Number(self.max_moves_to_draw),
            "MaxMovesRule" => Value::Text(self.max_moves_rule.clone()),
            "MateSearchPlies" => Value::Number(self.mate_search_plies),
            "MateHash" => Value::Number(self.mate_hash_mib),
            "MateRootPlies" => Value::Number(self.mate_root_plies),
            "MateRootNodes" => Value::Number(self.mate_root_nodes),
            other => unreachable!("unknown option {other}"),
        }
    }

    /// Applies `setoption name NAME value VALUE`. `Ok(Some(warning))` when the value was
    /// adjusted; `Err` when it was refused (the option keeps its value).
    pub fn set(&mut self, name: &str, value: &str) -> Result<Option<String>, OptionError> {
        let (name, value) = match alias(name, value.trim())? {
            Some((canonical, translated)) => (canonical, translated),
            None => (name, value.trim().to_string()),
        };
        let value = value.as_str();
        let Some(spec) = SPECS.iter().find(|s| s.name.eq_ignore_ascii_case(name)) else {
            return Err(OptionError::Unknown(name.into()));
        };
        let mut warning = None;
        let parsed = match spec.kind {
            Kind::Check => match value.to_ascii_lowercase().as_str() {
                "true" | "1" | "on" | "yes" => Value::Bool(true),
                "false" | "0" | "off" | "no" => Value::Bool(false),
                _ => return Err(OptionError::NotABool { option: spec.name, value: value.into() }),
            },
            Kind::Spin { min, max } => {
                let n: i128 =
                    value.parse().map_err(|_| OptionError::NotANumber { option: spec.name, value: value.into() })?;
                let clamped = n.clamp(min as i128, max as i128) as u64;
                if clamped as i128 != n {
                    warning = Some(format!("option {}: {n} is outside {min}..={max}, using {clamped}", spec.name));
                }
                Value::Number(clamped)
            }
            Kind::Combo(vars) => {
                let lower = value.to_ascii_lowercase();
                match vars.iter().find(|v| **v == lower) {
                    Some(v) => Value::Text(v.to_string()),
                    None => {
                        return Err(OptionError::NotOneOf {
                            option: spec.name,
                            value: value.into(),
                            choices: vars.join(", "),
                        })
                    }
                }
            }
            Kind::Text | Kind::Filename => Value::Text(value.to_string()),
        };
        match (spec.name, parsed) {
            ("Model", Value::Text(t)) => {
                self.model = if t.is_empty() || t == "<empty>" { None } else { Some(t) };
            }
            ("UniformStandIn", Value::Bool(b)) => self.uniform_stand_in = b,
            ("Device", Value::Text(t)) => {
                let t = t.to_ascii_lowercase();
                t.parse::<koma_nn::DeviceSpec>().map_err(OptionError::Device)?;
                self.device = t;
            }
            ("Precision", Value::Text(t)) => self.precision = t,
            ("Threads", Value::Number(n)) => self.threads = n,
            ("BatchSize", Value::Number(n)) => self.batch_size = n,
            ("SearchThreads", Value::Number(n)) => self.search_threads = n,
            ("NNCacheSize", Value::Number(n)) => self.nn_cache_mib = n,
            ("USI_Hash", Value::Number(n)) => self.hash_mib = n,
            ("Playouts", Value::Number(n)) => self.playouts = n,
            ("USI_Ponder", Value::Bool(b)) => self.ponder = b,
            ("MultiPV", Value::Number(n)) => self.multipv = n,
            ("ResignThreshold", Value::Number(n)) => self.resign_threshold = n,
            ("ByoyomiMargin", Value::Number(n)) => self.byoyomi_margin = n,
            ("EvalCoef", Value::Number(n)) => self.eval_coef = n,
            ("ImpasseRule", Value::Text(t)) => self.impasse = t,
            ("MaxMovesToDraw", Value::Number(n)) => self.max_moves_to_draw = n,
            ("MaxMovesRule", Value::Text(t)) => self.max_moves_rule = t,
            ("MateSearchPlies", Value::Number(n)) => self.mate_search_plies = n,
            ("MateHash", Value::Number(n)) => self.mate_hash_mib = n,
            ("MateRootPlies", Value::Number(n)) => self.mate_root_plies = n,
            ("MateRootNodes", Value::Number(n)) => self.mate_root_nodes = n,
            _ => unreachable!("option {}: kind and value disagree", spec.name),
        }
        Ok(warning)
    }

    /// The rules search plays by.
    pub fn rules(&self) -> GameRules {
        GameRules {
            max_plies: if self.max_moves_to_draw == 0 {
                u32::MAX
            } else {
                self.max_moves_to_draw.min(u32::MAX as u64) as u32
            },
            max_moves_rule: MaxMovesRule::from_name(&self.max_moves_rule).unwrap_or(MaxMovesRule::Draw),
            impasse: self.impasse_rule(),
            repetitions: 4,
        }
    }

    pub fn impasse_rule(&self) -> ImpasseRule {
        ImpasseRule::from_name(&self.impasse).unwrap_or(ImpasseRule::Csa27)
    }

    /// Evaluation-cache entries for `NNCacheSize`, at most a quarter of the memory available now
    /// (an allocation failure would abort the process).
    pub fn cache_entries(&self) -> usize {
        let mut bytes = self.nn_cache_mib.saturating_mul(1 << 20);
        if let Some(available) = available_memory() {
            bytes = bytes.min(available / 4);
        }
        (bytes / koma_mcts::EVAL_CACHE_ENTRY_BYTES as u64) as usize
    }

    /// Bytes the search tree may use: `USI_Hash`, but at most a third of the memory available
    /// now (the tree's arrays grow by doubling, so they may hold twice what they use).
    pub fn tree_bytes(&self) -> u64 {
        let bytes = self.hash_mib.saturating_mul(1 << 20).max(1);
        match available_memory() {
            Some(available) => bytes.min(available / 3).max(1),
            None => bytes,
        }
    }

    /// Leaves per batch on a CUDA device (`cuda`) or elsewhere.
    pub fn batch(&self, cuda: bool) -> usize {
        match self.batch_size {
            0 if cuda => 32,
            0 => 8,
            n => n as usize,
        }
    }
}

/// `MemAvailable` from /proc/meminfo (Linux), in bytes.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

fn or_empty(text: &str) -> &str {
    if text.is_empty() {
        "<empty>"
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Options::set` with the refusal as its message.
    fn set(o: &mut Options, name: &str, value: &str) -> Result<Option<String>, String> {
        o.set(name, value).map_err(|e| e.to_string())
    }

    #[test]
    fn lists_every_option_with_current_defaults() {
        let mut o = Options::default();
        let lines = o.usi_lines();
        assert_eq!(lines.len(), SPECS.len());
        assert!(lines.contains(&"option name Model type filename default <empty>".to_string()));
        assert!(lines.contains(&"option name USI_Ponder type check default false".to_string()));
        assert!(lines.iter().any(|l| l.starts_with("option name ImpasseRule type combo default csa27 var csa27")));
        set(&mut o, "model", "/tmp/a b.safetensors").unwrap();
        assert!(o.usi_lines().contains(&"option name Model type filename default /tmp/a b.safetensors".to_string()));
    }

    #[test]
    fn set_parses_clamps_and_refuses() {
        let mut o = Options::default();
        assert_eq!(set(&mut o, "USI_Ponder", "true"), Ok(None));
        assert!(o.ponder);
        assert_eq!(set(&mut o, "MultiPV", "3"), Ok(None));
        assert_eq!(o.multipv, 3);
        assert!(set(&mut o, "MultiPV", "0").unwrap().is_some());
        assert_eq!(o.multipv, 1);
        assert!(set(&mut o, "Playouts", "99999999999999999999999999").unwrap().is_some());
        assert!(set(&mut o, "Playouts", "many").is_err());
        assert!(set(&mut o, "Precision", "f64").is_err());
        assert_eq!(o.precision, "auto");
        assert!(set(&mut o, "Device", "tpu").is_err());
        assert_eq!(set(&mut o, "Device", "CUDA:1"), Ok(None));
        assert_eq!(o.device, "cuda:1");
        assert!(set(&mut o, "NoSuchOption", "1").is_err());
        assert_eq!(set(&mut o, "Model", "<empty>"), Ok(None));
        assert_eq!(o.model, None);
        set(&mut o, "ImpasseRule", "TRY").unwrap();
        assert_eq!(o.rules().impasse, ImpasseRule::Try);
        set(&mut o, "MaxMovesToDraw", "256").unwrap();
        assert_eq!(o.rules().max_plies, 256);
    }

    /// YaneuraOu's and dlshogi's names set koma's options, their values translated.
    #[test]
    fn other_engines_names_are_aliases() {
        let mut o = Options::default();
        for (value, rule) in [
            ("NoEnteringKing", ImpasseRule::None),
            ("CSARule24", ImpasseRule::Jsa24),
            ("CSARule27H", ImpasseRule::Csa27),
            ("TryRule", ImpasseRule::TryUnconditional),
        ] {
            assert_eq!(set(&mut o, "EnteringKingRule", value), Ok(None));
            assert_eq!(o.rules().impasse, rule, "{value}");
        }
        assert!(set(&mut o, "EnteringKingRule", "Sometimes").unwrap_err().contains("CSARule27"));
        set(&mut o, "DNN_Model", "/m/a.safetensors").unwrap();
        assert_eq!(o.model.as_deref(), Some("/m/a.safetensors"));
        set(&mut o, "DNN_Batch_Size", "64").unwrap();
        assert_eq!(o.batch_size, 64);
        // Per mille in dlshogi, per cent in koma.
        set(&mut o, "Resign_Threshold", "50").unwrap();
        assert_eq!(o.resign_threshold, 5);
        assert!(set(&mut o, "Resign_Threshold", "lots").is_err());
        set(&mut o, "Draw_Ply", "320").unwrap();
        assert_eq!(o.rules().max_plies, 320);
        set(&mut o, "Const_Playout", "800").unwrap();
        assert_eq!(o.playouts, 800);
        set(&mut o, "Byoyomi_Margin", "150").unwrap();
        assert_eq!(o.byoyomi_margin, 150);
        set(&mut o, "Mate_Root_Search", "33").unwrap();
        assert_eq!(o.mate_root_plies, 33);
        set(&mut o, "DfPn_Hash", "128").unwrap();
        assert_eq!(o.mate_hash_mib, 128);
        // Aliases are not offered to GUIs.
        assert!(!o.usi_lines().iter().any(|l| l.contains("DNN_Model")));
    }
}
