//! Checkpoints: save → load gives identical outputs; a different architecture or encoding is
//! refused naming the field; corrupt files are refused clearly.

mod common;

use std::path::{Path, PathBuf};

use koma_nn::checkpoint::{self, TrainingInfo};
use koma_nn::config::{Activation, GlobalPoolConfig, ModelConfig, SeConfig};
use koma_nn::network::{Network, RawOutput};
use koma_nn::{Error, InputBatch, RunOptions};
use koma_shogi::Position;

fn small_config() -> ModelConfig {
    ModelConfig {
        blocks: 3,
        channels: 24,
        activation: Activation::Mish,
        se: Some(SeConfig { ratio: 4 }),
        global_pool: Some(GlobalPoolConfig { every: 2, channels: 8 }),
        policy_channels: 16,
        value_channels: 4,
        value_hidden: 32,
        aux_reply_head: false,
    }
}

fn positions() -> Vec<Position> {
    let mut rng = common::Rng::new(5);
    common::playout_positions(&mut rng, 1, 60, 10)
}

fn outputs(net: &Network, positions: &[Position]) -> RawOutput {
    let mut batch = InputBatch::new();
    batch.encode(positions);
    let mut out = RawOutput::new();
    net.forward(&batch, &mut out).unwrap();
    out
}

fn saved(dir: &tempfile::TempDir, name: &str) -> (Network, PathBuf) {
    let mut net = Network::new(&small_config(), &RunOptions::cpu(), Some(1)).unwrap();
    koma_nn::model::randomize(net.var_store(), 2);
    let path = dir.path().join(name);
    net.save(
        &path,
        &TrainingInfo { step: 1234, samples_seen: 567_890, parent: Some("model-00001000.safetensors".into()) },
    )
    .unwrap();
    (net, path)
}

fn sidecar_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(checkpoint::sidecar_path(path)).unwrap()).unwrap()
}

fn write_sidecar(path: &Path, v: &serde_json::Value) {
    std::fs::write(checkpoint::sidecar_path(path), serde_json::to_string_pretty(v).unwrap()).unwrap();
}

#[test]
fn round_trip_gives_identical_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let (net, path) = saved(&dir, &checkpoint::file_name(1234));
    assert!(path.ends_with("model-00001234.safetensors"));
    let meta = sidecar_json(&path);
    assert_eq!(meta["format"], "koma-checkpoint");
    assert_eq!(meta["encoding"], serde_json::json!({"name": "dlshogi", "version": 1}));
    assert_eq!(meta["step"], 1234);
    assert_eq!(meta["samples_seen"], 567_890);
    assert_eq!(meta["parent"], "model-00001000.safetensors");
    assert_eq!(meta["weights_file"], "model-00001234.safetensors");
    assert_eq!(meta["weights_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(meta["model"]["activation"], "mish");

    let loaded = Network::load(&path, &RunOptions::cpu()).unwrap();
    assert_eq!(loaded.config(), &small_config());
    assert_eq!(loaded.meta().unwrap().step, 1234);
    let ps = positions();
    let (a, b) = (outputs(&net, &ps), outputs(&loaded, &ps));
    assert_eq!(a.policy_all(), b.policy_all(), "policy logits differ after a round trip");
    assert_eq!(a.wdl_all(), b.wdl_all());

    // Also through load_expecting with the right architecture, and a second save is
    // byte-identical apart from the timestamp (deterministic serialisation).
    let again = Network::load_expecting(&path, &small_config(), &RunOptions::cpu()).unwrap();
    assert_eq!(outputs(&again, &ps).policy_all(), a.policy_all());
    let mut again = again;
    let path2 = dir.path().join("copy.safetensors");
    again.save(&path2, &TrainingInfo::default()).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(&path2).unwrap());
    // No temporary files left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn architecture_mismatch_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = saved(&dir, "model.safetensors");
    let mut other = small_config();
    other.blocks = 4;
    let err = Network::load_expecting(&path, &other, &RunOptions::cpu()).unwrap_err();
    match &err {
        Error::ArchitectureMismatch { field, found, expected, .. } => {
            assert_eq!((field.as_str(), found.as_str(), expected.as_str()), ("blocks", "3", "4"));
        }
        e => panic!("unexpected error {e}"),
    }
    assert!(err.to_string().contains("`blocks` is 3 in the checkpoint but 4 was expected"), "{err}");

    let mut other = small_config();
    other.global_pool = Some(GlobalPoolConfig { every: 2, channels: 4 });
    let err = Network::load_expecting(&path, &other, &RunOptions::cpu()).unwrap_err().to_string();
    assert!(err.contains("`global_pool.channels` is 8"), "{err}");
    let mut other = small_config();
    other.activation = Activation::Relu;
    let err = Network::load_expecting(&path, &other, &RunOptions::cpu()).unwrap_err().to_string();
    assert!(err.contains("`activation` is \"mish\""), "{err}");
}

#[test]
fn encoding_mismatch_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = saved(&dir, "model.safetensors");
    let mut meta = sidecar_json(&path);
    meta["encoding"]["version"] = serde_json::json!(2);
    write_sidecar(&path, &meta);
    let err = Network::load(&path, &RunOptions::cpu()).unwrap_err();
    assert!(matches!(err, Error::EncodingMismatch { .. }), "{err}");
    assert!(err.to_string().contains("`encoding.version` is 2 in the checkpoint but 1 was expected"), "{err}");
    meta["encoding"]["name"] = serde_json::json!("alphazero");
    write_sidecar(&path, &meta);
    let err = Network::load(&path, &RunOptions::cpu()).unwrap_err().to_string();
    assert!(err.contains("`encoding.name` is \"alphazero\""), "{err}");
}

fn load_err(path: &Path) -> String {
    let err = Network::load(path, &RunOptions::cpu()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. } | Error::Io { .. }), "{err:?}");
    err.to_string()
}

#[test]
fn corrupt_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = saved(&dir, "model.safetensors");
    let good = std::fs::read(&path).unwrap();
    let good_meta = sidecar_json(&path);

    // A flipped bit in the weights.
    let mut bad = good.clone();
    let i = bad.len() - 100;
    bad[i] ^= 0x10;
    std::fs::write(&path, &bad).unwrap();
    let err = load_err(&path);
    assert!(err.contains("corrupt") && err.contains("SHA-256"), "{err}");

    // Truncated, with a sidecar that agrees with the truncated bytes: the safetensors check fires.
    let bad = &good[..good.len() / 2];
    std::fs::write(&path, bad).unwrap();
    let mut meta = good_meta.clone();
    meta["weights_sha256"] = serde_json::json!(checkpoint::sha256_hex(bad));
    write_sidecar(&path, &meta);
    let err = load_err(&path);
    assert!(err.contains("not a valid safetensors file"), "{err}");

    // Garbage instead of weights.
    std::fs::write(&path, b"hello").unwrap();
    meta["weights_sha256"] = serde_json::json!(checkpoint::sha256_hex(b"hello"));
    write_sidecar(&path, &meta);
    assert!(load_err(&path).contains("not a valid safetensors file"));

    // Missing and broken sidecars.
    std::fs::write(&path, &good).unwrap();
    std::fs::remove_file(checkpoint::sidecar_path(&path)).unwrap();
    let err = load_err(&path);
    assert!(err.contains("sidecar") && err.contains("missing"), "{err}");
    // No checkpoint at all: the message names the missing file, not a sidecar.
    let nowhere = path.with_file_name("no-such-model.safetensors");
    let err = load_err(&nowhere);
    assert!(err.contains("no-such-model.safetensors: no such checkpoint") && !err.contains("sidecar"), "{err}");
    std::fs::write(checkpoint::sidecar_path(&path), "{ not json").unwrap();
    assert!(load_err(&path).contains("not valid JSON"));
    let mut meta = good_meta.clone();
    meta["format"] = serde_json::json!("something-else");
    write_sidecar(&path, &meta);
    assert!(load_err(&path).contains("`format`"));

    // A sidecar from another checkpoint (different architecture) next to these weights: the
    // hash catches it, and with a matching hash the embedded metadata does.
    let mut meta = good_meta.clone();
    meta["model"]["value_hidden"] = serde_json::json!(64);
    write_sidecar(&path, &meta);
    let err = load_err(&path);
    assert!(err.contains("safetensors metadata `model`"), "{err}");

    // Missing file.
    let err = Network::load(&dir.path().join("nope.safetensors"), &RunOptions::cpu()).unwrap_err().to_string();
    assert!(err.contains("nope.safetensors"), "{err}");

    // Intact again: loads.
    write_sidecar(&path, &good_meta);
    Network::load(&path, &RunOptions::cpu()).unwrap();
}

#[test]
fn tensor_name_and_shape_mismatches_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (net, path) = saved(&dir, "model.safetensors");
    let loaded = checkpoint::read(&path, None).unwrap();
    // Drop one tensor and rename another.
    let mut tensors: Vec<_> = loaded.tensors.into_iter().filter(|(n, _)| n != "value.fc2.bias").collect();
    tensors[0].0 = "stem.extra".into();
    let mut vs = tch::nn::VarStore::new(tch::Device::Cpu);
    let _net = koma_nn::Net::new(&vs.root(), net.config());
    let err = checkpoint::copy_into(&path, &tensors, &mut vs).unwrap_err().to_string();
    assert!(err.contains("missing") && err.contains("value.fc2.bias") && err.contains("stem.extra"), "{err}");
}

fn reply_config() -> ModelConfig {
    ModelConfig { aux_reply_head: true, ..small_config() }
}

/// A checkpoint of a network without the reply head is written exactly as before the flag existed
/// (no `aux_reply_head` key in the sidecar or the safetensors header, no `reply.*` tensors), so
/// checkpoints written by older koma versions load, as networks without the head.
#[test]
fn checkpoints_without_the_reply_head_keep_the_old_format_and_load() {
    let dir = tempfile::tempdir().unwrap();
    let (net, path) = saved(&dir, "old.safetensors");
    let text = std::fs::read_to_string(checkpoint::sidecar_path(&path)).unwrap();
    assert!(!text.contains("aux_reply_head") && !text.contains("reply"), "{text}");
    let bytes = std::fs::read(&path).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
    assert!(!header.contains("reply"), "{header}");
    // Written by hand as an old version did (the sidecar's model lists only the old fields).
    let meta = sidecar_json(&path);
    let keys: Vec<&String> = meta["model"].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 8, "{keys:?}");
    let loaded = Network::load(&path, &RunOptions::cpu()).unwrap();
    assert!(!loaded.config().aux_reply_head && !loaded.net().has_reply_head());
    let ps = positions();
    assert_eq!(outputs(&net, &ps).policy_all(), outputs(&loaded, &ps).policy_all());
    // Asked for the head, the old checkpoint is refused naming the field.
    match Network::load_expecting(&path, &reply_config(), &RunOptions::cpu()) {
        Err(Error::ArchitectureMismatch { field, .. }) => assert_eq!(field, "aux_reply_head"),
        other => panic!("expected an architecture mismatch, got {other:?}"),
    }
    // …and can be given a fresh head, every other weight kept.
    let upgraded = loaded.with_reply_head(Some(3)).unwrap();
    assert!(upgraded.config().aux_reply_head && upgraded.net().has_reply_head());
    assert_eq!(outputs(&upgraded, &ps).policy_all(), outputs(&net, &ps).policy_all());
    let vars = upgraded.var_store().variables();
    for (name, t) in loaded.var_store().variables() {
        assert!(t.equal(&vars[&name]), "{name}");
    }
    assert!(vars.contains_key("reply.out.weight") && vars.contains_key("reply.bias"));
}

/// A network with the reply head round-trips (its tensors included); its main outputs are those
/// of the same weights without the head.
#[test]
fn reply_head_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let mut net = Network::new(&reply_config(), &RunOptions::cpu(), Some(1)).unwrap();
    koma_nn::model::randomize(net.var_store(), 2);
    let path = dir.path().join("reply.safetensors");
    net.save(&path, &TrainingInfo::default()).unwrap();
    assert_eq!(sidecar_json(&path)["model"]["aux_reply_head"], true);
    let loaded = Network::load(&path, &RunOptions::cpu()).unwrap();
    assert_eq!(loaded.config(), &reply_config());
    let ps = positions();
    assert_eq!(outputs(&net, &ps).policy_all(), outputs(&loaded, &ps).policy_all());
    let mut batch = InputBatch::new();
    batch.encode(&ps);
    let (in1, in2) = loaded.upload(&batch);
    let (_, _, r1) = loaded.net().forward_with_reply_t(&in1, &in2, false);
    let (_, _, r0) = net.net().forward_with_reply_t(&in1, &in2, false);
    assert!(r1.unwrap().equal(&r0.unwrap()));
    match Network::load_expecting(&path, &small_config(), &RunOptions::cpu()) {
        Err(Error::ArchitectureMismatch { field, .. }) => assert_eq!(field, "aux_reply_head"),
        other => panic!("expected an architecture mismatch, got {other:?}"),
    }
}
