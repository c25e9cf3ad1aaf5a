//! Checkpoints: `model-STEP.safetensors` (float32 weights and batch-norm statistics under their
//! PyTorch names) plus a JSON sidecar `model-STEP.json` describing them.
//!
//! The sidecar records the format, the encoding, the architecture ([`ModelConfig`]), the
//! training step and samples seen, the parent checkpoint and the SHA-256 of the weights file. The
//! safetensors header's `__metadata__` repeats format, encoding and architecture, so a weights
//! file is never silently paired with another file's sidecar.
//!
//! Writing is atomic: both files are written under temporary names and synced before either is
//! renamed into place, sidecar first, weights last, so a complete `.safetensors` always has its
//! sidecar (watchers should key on the `.safetensors`; `publish_pair` says why this order).
//! Loading checks, in order: sidecar format, encoding, architecture (naming the first field that
//! differs), the weights' SHA-256, the safetensors header, the header metadata against the
//! sidecar, then every tensor name, dtype and shape.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use koma_base::durable::stage;
use safetensors::tensor::{Dtype, SafeTensors};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tch::{nn::VarStore, Device, Kind, Tensor};

use crate::config::{first_difference, ModelConfig};
use crate::encoding::{ENCODING_NAME, ENCODING_VERSION};
use crate::error::{Error, Result};

/// The `format` field of every sidecar.
pub const FORMAT: &str = "koma-checkpoint";
/// Bumped on incompatible changes to the layout of checkpoints.
pub const FORMAT_VERSION: u32 = 1;

/// Which input features and move labels a network was trained on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncodingInfo {
    pub name: String,
    pub version: u32,
}

impl EncodingInfo {
    /// The encoding this build of koma produces.
    pub fn current() -> EncodingInfo {
        EncodingInfo { name: ENCODING_NAME.to_string(), version: ENCODING_VERSION }
    }
}

/// Training lineage recorded with a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainingInfo {
    /// Optimiser steps taken.
    pub step: u64,
    /// Training samples consumed.
    pub samples_seen: u64,
    /// File name of the checkpoint training started from, if any.
    pub parent: Option<String>,
}

/// The sidecar JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    pub format: String,
    pub format_version: u32,
    pub encoding: EncodingInfo,
    pub model: ModelConfig,
    pub step: u64,
    pub samples_seen: u64,
    pub parent: Option<String>,
    /// File name (no directory) of the weights this sidecar describes.
    pub weights_file: String,
    /// Lower-case hex SHA-256 of the whole weights file.
    pub weights_sha256: String,
    /// Number of trainable parameters.
    pub parameters: u64,
    pub koma_version: String,
    /// Seconds since the Unix epoch when written.
    pub created_unix: u64,
}

impl CheckpointMeta {
    pub fn training(&self) -> TrainingInfo {
        TrainingInfo { step: self.step, samples_seen: self.samples_seen, parent: self.parent.clone() }
    }
}

/// `model-00001234.safetensors`: the file name of the checkpoint at `step` (zero-padded to 8
/// digits so names sort by step).
pub fn file_name(step: u64) -> String {
    format!("model-{step:08}.safetensors")
}

/// The step in a name made by [`file_name`] (any number of digits).
pub fn step_of_file_name(name: &str) -> Option<u64> {
    name.strip_prefix("model-")?.strip_suffix(".safetensors")?.parse().ok()
}

/// The sidecar of a weights file: same name, extension `.json`.
pub fn sidecar_path(weights: &Path) -> PathBuf {
    weights.with_extension("json")
}

/// Hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Publishes a checkpoint's weights and sidecar so that a reader, which keys on the weights file
/// and checks its SHA-256 against the sidecar, finds the old pair, no checkpoint, or the new pair,
/// also after a crash at any point:
///
/// 1. both files are written under temporary names and fsynced (`koma_base::durable::stage`): a
///    full disk fails here, with the old checkpoint untouched;
/// 2. the weights being replaced, if any, are removed: until step 4 there is no checkpoint at
///    this name rather than a new sidecar beside old weights (`koma init --out` over an existing
///    checkpoint; the trainer never replaces one);
/// 3. the sidecar is renamed into place (a sidecar without weights is no checkpoint);
/// 4. the weights are renamed into place: the new pair is published;
/// 5. the directory is fsynced, so that the renames survive a power loss.
///
/// A reader that reads the sidecar before a replacement and the weights after it still sees a
/// mismatch; its SHA-256 check refuses that pair, and reading again gives the new one.
pub fn publish_pair(weights: &Path, weight_bytes: &[u8], sidecar: &Path, sidecar_bytes: &[u8]) -> Result<()> {
    let weights_staged = stage(weights, weight_bytes)?;
    let sidecar_staged = stage(sidecar, sidecar_bytes)?;
    match fs::remove_file(weights) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(weights, e)),
    }
    sidecar_staged.publish()?;
    weights_staged.publish()?;
    Ok(())
}

/// The safetensors header metadata we write (and check on load).
fn header_metadata(model: &ModelConfig) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("format".to_string(), FORMAT.to_string());
    m.insert("format_version".to_string(), FORMAT_VERSION.to_string());
    m.insert("encoding".to_string(), format!("{ENCODING_NAME}/{ENCODING_VERSION}"));
    m.insert("model".to_string(), serde_json::to_string(model).expect("config serialises"));
    m
}

/// A safetensors file of float32 tensors, byte-for-byte deterministic: the header's keys are
/// sorted (the safetensors crate writes `__metadata__` from a HashMap, in random order) and the
/// data follow in name order. The result is parsed back by the safetensors crate on load.
fn serialize_f32(tensors: &BTreeMap<String, (Vec<usize>, Vec<u8>)>, metadata: &BTreeMap<String, String>) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::to_value(metadata).expect("strings"));
    let mut offset = 0usize;
    for (name, (shape, bytes)) in tensors {
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + bytes.len()]}),
        );
        offset += bytes.len();
    }
    let mut header = serde_json::to_string(&header).expect("serialises").into_bytes();
    header.resize(header.len().div_ceil(8) * 8, b' ');
    let mut out = Vec::with_capacity(8 + header.len() + offset);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    for (_, bytes) in tensors.values() {
        out.extend_from_slice(bytes);
    }
    out
}

/// Float32 little-endian bytes of every variable, by name (sorted).
fn tensors_as_f32_bytes(vs: &VarStore) -> BTreeMap<String, (Vec<usize>, Vec<u8>)> {
    let _guard = tch::no_grad_guard();
    let mut out = BTreeMap::new();
    for (name, t) in vs.variables() {
        let t = t.to_device(Device::Cpu).to_kind(Kind::Float).contiguous();
        let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
        let n = t.numel();
        let mut values = vec![0f32; n];
        t.copy_data(&mut values, n);
        let mut bytes = Vec::with_capacity(4 * n);
        for v in values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        out.insert(name, (shape, bytes));
    }
    out
}

/// Saves the variables of `vs` (any device or float kind; stored as float32) as a checkpoint at
/// `path` (a `.safetensors` path) with its sidecar, replacing any checkpoint there (`publish_pair`
/// says in which order, and what a crash leaves). Returns the sidecar written.
pub fn save(vs: &VarStore, model: &ModelConfig, training: &TrainingInfo, path: &Path) -> Result<CheckpointMeta> {
    let bytes = serialize_f32(&tensors_as_f32_bytes(vs), &header_metadata(model));
    let weights_file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::io(path, std::io::Error::other("not a file path")))?;
    let meta = CheckpointMeta {
        format: FORMAT.to_string(),
        format_version: FORMAT_VERSION,
        encoding: EncodingInfo::current(),
        model: model.clone(),
        step: training.step,
        samples_seen: training.samples_seen,
        parent: training.parent.clone(),
        weights_file,
        weights_sha256: sha256_hex(&bytes),
        parameters: crate::model::parameter_count(model) as u64,
        koma_version: env!("CARGO_PKG_VERSION").to_string(),
        created_unix: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
    };
    let mut json = serde_json::to_string_pretty(&meta).expect("meta serialises");
    json.push('\n');
    publish_pair(path, &bytes, &sidecar_path(path), json.as_bytes())?;
    Ok(meta)
}

/// Reads and checks a checkpoint's sidecar (format, version and encoding).
pub fn read_meta(path: &Path) -> Result<CheckpointMeta> {
    let sidecar = sidecar_path(path);
    let text = fs::read_to_string(&sidecar).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound && !path.exists() {
            // No checkpoint at all (a mistyped path): say that, not that its sidecar is missing.
            Error::io(path, std::io::Error::new(std::io::ErrorKind::NotFound, "no such checkpoint (file not found)"))
        } else if e.kind() == std::io::ErrorKind::NotFound {
            Error::corrupt(path, format!("its sidecar {} is missing", sidecar.display()))
        } else {
            Error::io(&sidecar, e)
        }
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::corrupt(&sidecar, format!("sidecar is not valid JSON: {e}")))?;
    match value.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {}
        other => {
            return Err(Error::corrupt(&sidecar, format!("`format` is {other:?}, expected \"{FORMAT}\"")));
        }
    }
    let version = value.get("format_version").and_then(|v| v.as_u64());
    if version != Some(FORMAT_VERSION as u64) {
        return Err(Error::corrupt(
            &sidecar,
            format!("`format_version` is {version:?}, this koma reads version {FORMAT_VERSION}"),
        ));
    }
    // Encoding before the rest: a sidecar from another encoding may not even parse as ours.
    let expected_encoding = serde_json::to_value(EncodingInfo::current()).expect("serialises");
    let found_encoding = value.get("encoding").cloned().unwrap_or(serde_json::Value::Null);
    if let Some((field, found, expected)) = first_difference(&found_encoding, &expected_encoding, "encoding") {
        return Err(Error::EncodingMismatch { path: path.to_path_buf(), field, found, expected });
    }
    let meta: CheckpointMeta =
        serde_json::from_value(value).map_err(|e| Error::corrupt(&sidecar, format!("invalid sidecar: {e}")))?;
    meta.model.validate().map_err(|e| Error::corrupt(&sidecar, e.to_string()))?;
    Ok(meta)
}

/// Fails with [`Error::ArchitectureMismatch`] naming the first differing field.
pub fn check_architecture(path: &Path, found: &ModelConfig, expected: &ModelConfig) -> Result<()> {
    // Every field, the ones left out of the JSON when off included, so a mismatch reads
    // "`aux_reply_head` is false …" rather than "null".
    let full = |c: &ModelConfig| {
        let mut v = serde_json::to_value(c).expect("serialises");
        v["aux_reply_head"] = serde_json::Value::Bool(c.aux_reply_head);
        v
    };
    match first_difference(&full(found), &full(expected), "") {
        None => Ok(()),
        Some((field, found, expected)) => {
            Err(Error::ArchitectureMismatch { path: path.to_path_buf(), field, found, expected })
        }
    }
}

/// A checkpoint read into memory and verified: sidecar and float32 tensors on the CPU.
pub struct LoadedCheckpoint {
    pub meta: CheckpointMeta,
    pub tensors: Vec<(String, Tensor)>,
}

/// Reads a checkpoint and verifies everything that can be verified without a network: sidecar,
/// SHA-256, safetensors structure, header metadata, dtypes. If `expected` is given, the
/// architecture must equal it.
pub fn read(path: &Path, expected: Option<&ModelConfig>) -> Result<LoadedCheckpoint> {
    let meta = read_meta(path)?;
    if let Some(expected) = expected {
        check_architecture(path, &meta.model, expected)?;
    }
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    let sha = sha256_hex(&bytes);
    if sha != meta.weights_sha256 {
        return Err(Error::corrupt(
            path,
            format!(
                "SHA-256 of the weights is {sha} but the sidecar records {} (file damaged, truncated, or replaced)",
                meta.weights_sha256
            ),
        ));
    }
    let (_, header) = SafeTensors::read_metadata(&bytes)
        .map_err(|e| Error::corrupt(path, format!("not a valid safetensors file: {e:?}")))?;
    if let Some(md) = header.metadata() {
        let ours = header_metadata(&meta.model);
        for key in ["format", "encoding", "model"] {
            let (found, wanted) = (md.get(key), ours.get(key));
            let same = match (key, found, wanted) {
                ("model", Some(f), Some(w)) => {
                    serde_json::from_str::<serde_json::Value>(f).ok() == serde_json::from_str(w).ok()
                }
                (_, f, w) => f == w,
            };
            if !same {
                return Err(Error::corrupt(
                    path,
                    format!("safetensors metadata `{key}` is {found:?} but the sidecar implies {wanted:?}"),
                ));
            }
        }
    }
    let st = SafeTensors::deserialize(&bytes)
        .map_err(|e| Error::corrupt(path, format!("not a valid safetensors file: {e:?}")))?;
    let mut tensors = Vec::with_capacity(st.len());
    let mut names: Vec<String> = st.names().into_iter().cloned().collect();
    names.sort();
    for name in names {
        let view = st.tensor(&name).map_err(|e| Error::corrupt(path, format!("tensor `{name}`: {e:?}")))?;
        if view.dtype() != Dtype::F32 {
            return Err(Error::corrupt(path, format!("tensor `{name}` is {:?}, expected F32", view.dtype())));
        }
        let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
        let t = Tensor::f_from_data_size(view.data(), &shape, Kind::Float)?;
        tensors.push((name, t));
    }
    Ok(LoadedCheckpoint { meta, tensors })
}

/// Copies checkpoint tensors into the variables of `vs` (any device and float kind). The names
/// must match exactly, both ways, and every shape must agree.
pub fn copy_into(path: &Path, tensors: &[(String, Tensor)], vs: &mut VarStore) -> Result<()> {
    let mut vars = vs.variables();
    let found: HashMap<&str, &Tensor> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut missing: Vec<&String> = vars.keys().filter(|k| !found.contains_key(k.as_str())).collect();
    let mut unexpected: Vec<&str> = found.keys().copied().filter(|k| !vars.contains_key(*k)).collect();
    if !missing.is_empty() || !unexpected.is_empty() {
        missing.sort();
        unexpected.sort();
        return Err(Error::corrupt(
            path,
            format!("tensor names do not match the architecture: missing {missing:?}, unexpected {unexpected:?}"),
        ));
    }
    let _guard = tch::no_grad_guard();
    for (name, var) in vars.iter_mut() {
        let src = found[name.as_str()];
        if src.size() != var.size() {
            return Err(Error::corrupt(
                path,
                format!("tensor `{name}` has shape {:?}, the architecture needs {:?}", src.size(), var.size()),
            ));
        }
        var.f_copy_(&src.to_device(var.device()).to_kind(var.kind()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(file_name(1234), "model-00001234.safetensors");
        assert_eq!(step_of_file_name("model-00001234.safetensors"), Some(1234));
        assert_eq!(step_of_file_name("model-123456789.safetensors"), Some(123456789));
        assert_eq!(step_of_file_name("model-x.safetensors"), None);
        assert_eq!(
            sidecar_path(Path::new("runs/a/model-00000001.safetensors")),
            Path::new("runs/a/model-00000001.json")
        );
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    /// Replacing a pair gives the new pair; when either new file cannot be written or synced (a
    /// full disk) the old pair stays as it was; a failed rename leaves the old pair or no
    /// checkpoint, never new weights beside an old sidecar; and no temporary is left.
    #[test]
    fn a_pair_is_replaced_whole_or_not_at_all() {
        use koma_base::durable::{fail_next, Step};
        let dir = tempfile::tempdir().unwrap();
        let weights = dir.path().join("model-00000005.safetensors");
        let sidecar = sidecar_path(&weights);
        let pair = || (fs::read(&weights).ok(), fs::read(&sidecar).ok());
        let listing = || {
            let mut names: Vec<String> = fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let old = (Some(b"old weights".to_vec()), Some(b"old sidecar".to_vec()));
        for failing in [&weights, &sidecar] {
            for step in [Step::Create, Step::Write, Step::SyncFile, Step::Rename] {
                publish_pair(&weights, b"old weights", &sidecar, b"old sidecar").unwrap();
                fail_next(failing, step);
                let err = publish_pair(&weights, b"new weights", &sidecar, b"new sidecar").unwrap_err();
                assert!(err.to_string().contains(&failing.display().to_string()), "{err}");
                let after = pair();
                if step == Step::Rename {
                    assert_ne!(after.0.as_deref(), Some(&b"new weights"[..]), "{failing:?} {step:?}");
                    assert!(after.0.is_none() || after == old, "{failing:?} {step:?}: {after:?}");
                } else {
                    assert_eq!(after, old, "{failing:?} {step:?}");
                    assert_eq!(listing(), ["model-00000005.json", "model-00000005.safetensors"]);
                }
                assert!(listing().iter().all(|n| !n.contains(".tmp")), "{:?}", listing());
            }
        }
        publish_pair(&weights, b"new weights", &sidecar, b"new sidecar").unwrap();
        assert_eq!(pair(), (Some(b"new weights".to_vec()), Some(b"new sidecar".to_vec())));
    }
}
