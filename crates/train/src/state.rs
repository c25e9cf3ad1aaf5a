//! The full training state under `train/state/`, enough for `--resume` to continue exactly:
//!
//! - `tensors-STEP.safetensors`: float32 tensors `model/NAME` (every weight and batch-norm
//!   statistic, master precision) and `optim/KIND/NAME` (momentum or Adam moments);
//! - `state.json`: step, samples seen, optimiser step count, the sampler's RNG state, the loss
//!   scaler, the configs, the checkpoint before this state's step (the parent of the checkpoint
//!   of its step, which is published right after the state), and the tensors file's name and
//!   SHA-256.
//!
//! Saving writes the tensors file under a new name, then `state.json` (both durably:
//! `koma_base::durable`), then deletes older tensors files; a crash at any point leaves a
//! consistent pair. Loading verifies format, version and the SHA-256, and refuses anything
//! inconsistent with an error that names the file and the newest checkpoint in models/ (which is
//! never touched).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use koma_base::Rng;
use koma_nn::checkpoint::{self, sha256_hex};
use koma_nn::ModelConfig;
use safetensors::tensor::{Dtype, SafeTensors};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::config::TrainConfig;
use crate::error::{io, Result, TrainError};
use crate::scaler::LossScaler;

pub const STATE_FORMAT: &str = "koma-train-state";
/// 2 added `budget_spent`; a version 1 state reads with it at 0, and a koma that reads only
/// version 1 names the version it cannot read rather than an unknown field. 3 added u8 tensors
/// (`recent/…`: the encoded inputs of the last batches, for the average's batch-norm statistics)
/// and `ema/` statistics recomputed rather than averaged; versions 1 and 2 read as before.
pub const STATE_FORMAT_VERSION: u32 = 3;
pub const STATE_FILE: &str = "state.json";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateMeta {
    pub format: String,
    pub format_version: u32,
    /// Optimiser steps taken (the step of the next checkpoint name).
    pub step: u64,
    pub samples_seen: u64,
    /// Updates actually applied (steps minus those skipped by the loss scaler).
    pub optimizer_steps: u64,
    pub model: ModelConfig,
    /// The trainer config in force when the state was written.
    pub config: TrainConfig,
    /// The batch sampler's state after the last batch trained on.
    pub rng: Rng,
    pub loss_scaler: Option<LossScaler>,
    /// File name (in models/) of the last checkpoint written before this state was saved: the
    /// parent of the checkpoint of this state's step, which is published right after it.
    pub last_checkpoint: Option<String>,
    /// The share of the run's budget spent at this step (a learning rate over the budget
    /// resumes from it); 0 in states written before it was kept.
    #[serde(default)]
    pub budget_spent: f64,
    pub tensors_file: String,
    pub tensors_sha256: String,
    pub koma_version: String,
    pub created_unix: u64,
}

/// A verified training state read from disk (tensors as float32 on the CPU).
pub struct LoadedState {
    pub meta: StateMeta,
    pub tensors: HashMap<String, Tensor>,
}

impl LoadedState {
    /// The trained (raw, not averaged) network of the state, run as `options` say. `dir` and
    /// `models_dir` name the state in errors.
    pub fn raw_network(
        &self,
        dir: &Path,
        models_dir: &Path,
        options: &koma_nn::RunOptions,
    ) -> Result<koma_nn::Network> {
        let mut network = koma_nn::Network::new(&self.meta.model, options, None)?;
        let model: Vec<(String, Tensor)> = self
            .tensors
            .iter()
            .filter_map(|(k, t)| k.strip_prefix("model/").map(|n| (n.to_string(), t.shallow_clone())))
            .collect();
        let path = dir.join(&self.meta.tensors_file);
        koma_nn::checkpoint::copy_into(&path, &model, network.var_store_mut())
            .map_err(|e| inconsistent(dir, models_dir, e.to_string()))?;
        Ok(network)
    }
}

/// The newest checkpoint in `models_dir`, for error messages.
pub fn newest_checkpoint(models_dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(models_dir).ok()?;
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            checkpoint::step_of_file_name(&name).map(|s| (s, e.path()))
        })
        .max_by_key(|(s, _)| *s)
        .map(|(_, p)| p)
}

fn corrupt(path: &Path, reason: impl Into<String>, models_dir: &Path) -> TrainError {
    let hint = match newest_checkpoint(models_dir) {
        Some(p) => format!(
            "nothing was changed; the newest checkpoint is {}: start a new run from it with `--model {}` (without --resume)",
            p.display(),
            p.display()
        ),
        None => format!("nothing was changed; {} holds no checkpoint", models_dir.display()),
    };
    TrainError::CorruptState { path: path.to_path_buf(), reason: reason.into(), hint: Some(hint) }
}

/// Deterministic safetensors bytes (header keys and data in name order): u8 tensors as U8,
/// every other one as float32.
fn serialize(tensors: &BTreeMap<String, Tensor>) -> Vec<u8> {
    let _guard = tch::no_grad_guard();
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, t) in tensors {
        let start = data.len();
        let (dtype, t) = if t.kind() == Kind::Uint8 {
            let t = t.to_device(Device::Cpu).contiguous();
            let n = t.numel();
            data.resize(start + n, 0);
            t.copy_data(&mut data[start..], n);
            ("U8", t)
        } else {
            let t = t.to_device(Device::Cpu).to_kind(Kind::Float).contiguous();
            let n = t.numel();
            let mut values = vec![0f32; n];
            t.copy_data(&mut values, n);
            data.reserve(4 * n);
            for v in values {
                data.extend_from_slice(&v.to_le_bytes());
            }
            ("F32", t)
        };
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype, "shape": t.size(), "data_offsets": [start, data.len()]}),
        );
    }
    let mut header = serde_json::to_string(&header).expect("serialises").into_bytes();
    header.resize(header.len().div_ceil(8) * 8, b' ');
    let mut out = Vec::with_capacity(8 + header.len() + data.len());
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&data);
    out
}

/// Writes the state atomically into `dir` (created if needed).
pub fn save(dir: &Path, meta: &mut StateMeta, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let bytes = serialize(tensors);
    meta.format = STATE_FORMAT.into();
    meta.format_version = STATE_FORMAT_VERSION;
    meta.tensors_file = format!("tensors-{:08}.safetensors", meta.step);
    meta.tensors_sha256 = sha256_hex(&bytes);
    meta.koma_version = env!("CARGO_PKG_VERSION").into();
    meta.created_unix =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let tensors_path = dir.join(&meta.tensors_file);
    koma_base::durable::write(&tensors_path, &bytes)?;
    let mut json = serde_json::to_string_pretty(meta).expect("state serialises");
    json.push('\n');
    koma_base::durable::write(&dir.join(STATE_FILE), json.as_bytes())?;
    // Only now is the previous tensors file unreferenced.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("tensors-") && name.ends_with(".safetensors") && name != meta.tensors_file {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

/// Whether `dir` holds a state file at all.
pub fn exists(dir: &Path) -> bool {
    dir.join(STATE_FILE).exists()
}

/// Reads and verifies the state in `dir`. `models_dir` only serves the error messages.
pub fn load(dir: &Path, models_dir: &Path) -> Result<LoadedState> {
    let path = dir.join(STATE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(TrainError::NoState { path, reason: "state.json does not exist".into() });
        }
        Err(e) => return Err(corrupt(&path, format!("cannot read it: {e}"), models_dir)),
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| corrupt(&path, format!("not valid JSON: {e}"), models_dir))?;
    if value.get("format").and_then(|f| f.as_str()) != Some(STATE_FORMAT) {
        return Err(corrupt(
            &path,
            format!("`format` is {:?}, expected \"{STATE_FORMAT}\"", value.get("format")),
            models_dir,
        ));
    }
    let version = value.get("format_version").and_then(|v| v.as_u64());
    if !version.is_some_and(|v| (1..=STATE_FORMAT_VERSION as u64).contains(&v)) {
        return Err(corrupt(
            &path,
            format!("`format_version` is {version:?}, this koma reads 1 to {STATE_FORMAT_VERSION}"),
            models_dir,
        ));
    }
    let mut value = value;
    migrate(&mut value);
    let meta: StateMeta =
        serde_json::from_value(value).map_err(|e| corrupt(&path, format!("invalid state: {e}"), models_dir))?;
    meta.model.validate().map_err(|e| corrupt(&path, e.to_string(), models_dir))?;
    if meta.tensors_file.contains('/') || meta.tensors_file.contains('\\') {
        return Err(corrupt(&path, "tensors_file must be a plain file name", models_dir));
    }
    let tpath = dir.join(&meta.tensors_file);
    let bytes = std::fs::read(&tpath).map_err(|e| corrupt(&tpath, format!("cannot read it: {e}"), models_dir))?;
    let sha = sha256_hex(&bytes);
    if sha != meta.tensors_sha256 {
        return Err(corrupt(
            &tpath,
            format!(
                "SHA-256 is {sha} but state.json records {} (file damaged, truncated or replaced)",
                meta.tensors_sha256
            ),
            models_dir,
        ));
    }
    let st = SafeTensors::deserialize(&bytes)
        .map_err(|e| corrupt(&tpath, format!("not a valid safetensors file: {e:?}"), models_dir))?;
    let mut tensors = HashMap::with_capacity(st.len());
    for name in st.names() {
        let view = st.tensor(name).map_err(|e| corrupt(&tpath, format!("tensor `{name}`: {e:?}"), models_dir))?;
        let kind = match view.dtype() {
            Dtype::F32 => Kind::Float,
            Dtype::U8 => Kind::Uint8,
            other => {
                return Err(corrupt(&tpath, format!("tensor `{name}` is {other:?}, expected F32 or U8"), models_dir))
            }
        };
        let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
        let t = Tensor::f_from_data_size(view.data(), &shape, kind)?;
        tensors.insert(name.clone(), t);
    }
    Ok(LoadedState { meta, tensors })
}

/// Wraps an inconsistency found while applying a loaded state (missing tensor, wrong shape).
/// Brings a state written by an older koma of the same format version to today's field names:
/// `config.loss.value_lambda` (the game result's weight) is `result_weight` now, with the same
/// meaning, so a run trained before the rename resumes with the same targets. User configs that
/// still say `value_lambda` are refused instead, because there a reader may have meant dlshogi's
/// opposite convention.
fn migrate(state: &mut serde_json::Value) {
    let Some(loss) = state.pointer_mut("/config/loss").and_then(|l| l.as_object_mut()) else { return };
    if let Some(old) = loss.remove("value_lambda") {
        loss.entry("result_weight").or_insert(old);
    }
}

pub fn inconsistent(dir: &Path, models_dir: &Path, reason: impl Into<String>) -> TrainError {
    corrupt(&dir.join(STATE_FILE), reason, models_dir)
}

#[cfg(test)]
mod tests {
    use rand::{Rng as _, SeedableRng};

    use super::*;

    #[test]
    fn the_sampler_state_keeps_the_json_form_older_states_were_written_in() {
        // `rng` of a state saved by koma's own xoshiro256** (seed 7, nothing drawn yet), and what
        // that generator drew next.
        let old = r#"{"s":[7191089600892374487,309689372594955804,16616101746815609346,10753165928301472203]}"#;
        let mut rng: Rng = serde_json::from_str(old).unwrap();
        assert_eq!(serde_json::to_string(&Rng::seed_from_u64(7)).unwrap(), old);
        assert_eq!(
            [rng.next_u64(), rng.next_u64(), rng.next_u64()],
            [0xb358_faf7_4ef9_765a, 0x475c_3d96_4f48_2cd2, 0xd6f1_d349_952c_7996]
        );
        let saved = serde_json::to_string(&rng).unwrap();
        let mut resumed: Rng = serde_json::from_str(&saved).unwrap();
        assert_eq!(resumed.next_u64(), rng.next_u64());
    }

    #[test]
    fn a_state_saved_before_the_rename_resumes_with_its_value_lambda_as_result_weight() {
        let mut config = TrainConfig::default();
        config.loss.result_weight = 0.25;
        let mut state = serde_json::json!({ "config": serde_json::to_value(&config).unwrap() });
        let loss = state.pointer_mut("/config/loss").unwrap().as_object_mut().unwrap();
        let weight = loss.remove("result_weight").unwrap();
        loss.insert("value_lambda".into(), weight);
        assert!(serde_json::from_value::<TrainConfig>(state["config"].clone()).is_err());
        migrate(&mut state);
        let resumed: TrainConfig = serde_json::from_value(state["config"].clone()).unwrap();
        assert_eq!(resumed.loss.result_weight, 0.25);
    }
}
