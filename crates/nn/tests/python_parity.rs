//! The Rust network, the PyTorch mirror (python/koma/model.py) and the exported ONNX model
//! (python/koma/export.py, run by onnxruntime) give the same outputs, to 1e-4, on the same
//! randomised weights (every parameter and batch-norm statistic perturbed) and positions, for
//! every activation and with squeeze-excitation and global-pooling blocks; with the opponent-reply
//! head, its logits agree too and the ONNX graph is the plain dlshogi one (no `reply` weights).

mod common;

use std::io::Write;
use std::process::Command;

use common::{playout_positions, random_position, repo_root, require_python_modules, Rng};
use koma_nn::config::{Activation, GlobalPoolConfig, ModelConfig, SeConfig};
use koma_nn::network::{Network, RawOutput};
use koma_nn::{InputBatch, RunOptions, TrainingInfo};
use koma_shogi::Position;

const SCRIPT: &str = r#"
import json, sys
import numpy as np
import torch
from koma.model import load_checkpoint, ExportWrapper
from koma.export import export_onnx
import onnxruntime as ort

ckpt, feats, outs, onnx_path, with_reply = sys.argv[1:6]
with_reply = with_reply == "1"
model, meta = load_checkpoint(ckpt)
raw = np.fromfile(feats, dtype=np.uint8).reshape(-1, 119, 9, 9)
n = raw.shape[0]
in1 = torch.from_numpy(raw[:, :62].astype(np.float32))
in2 = torch.from_numpy(raw[:, 62:].astype(np.float32))
rust = np.fromfile(outs, dtype=np.float32).reshape(n, 2187 + 3 + (2187 if with_reply else 0))
rust_policy, rust_wdl, rust_reply = rust[:, :2187], rust[:, 2187:2190], rust[:, 2190:]
p = torch.softmax(torch.from_numpy(rust_wdl), 1).numpy()
rust_value = p[:, 0:1] + 0.5 * p[:, 1:2]
with torch.no_grad():
    py_policy, py_wdl = [t.numpy() for t in model(in1, in2)]
    _, _, py_reply = model.forward_with_reply(in1, in2)
assert (py_reply is not None) == with_reply
reply_diff = float(np.abs(rust_reply - py_reply.numpy()).max()) if with_reply else 0.0
summary = export_onnx(ckpt, onnx_path)
import onnx
graph = onnx.load(onnx_path).graph
reply_in_onnx = [t.name for t in graph.initializer if "reply" in t.name]
sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
names = [i.name for i in sess.get_inputs()], [o.name for o in sess.get_outputs()]
ort_policy, ort_value = sess.run(["output_policy", "output_value"], {"input1": in1.numpy(), "input2": in2.numpy()})
print(json.dumps({
    "n": n,
    "io": names,
    "value_shape": list(ort_value.shape),
    "logit_scale": float(np.abs(rust_policy).max()),
    "rust_vs_torch_policy": float(np.abs(rust_policy - py_policy).max()),
    "rust_vs_torch_wdl": float(np.abs(rust_wdl - py_wdl).max()),
    "rust_vs_torch_reply": reply_diff,
    "reply_in_onnx": reply_in_onnx,
    "rust_vs_onnx_policy": float(np.abs(rust_policy - ort_policy).max()),
    "rust_vs_onnx_value": float(np.abs(rust_value - ort_value).max()),
    "torch_vs_onnx_export_check": summary.get("max_abs_diff"),
}))
"#;

fn configs() -> Vec<(&'static str, ModelConfig)> {
    let mut plain = ModelConfig::tiny();
    plain.blocks = 3;
    plain.channels = 32;
    let mut mish = plain.clone();
    mish.activation = Activation::Mish;
    mish.se = Some(SeConfig { ratio: 4 });
    mish.global_pool = Some(GlobalPoolConfig { every: 2, channels: 8 });
    let mut swish = plain.clone();
    swish.activation = Activation::Swish;
    swish.blocks = 4;
    swish.global_pool = Some(GlobalPoolConfig { every: 3, channels: 16 });
    let mut reply = mish.clone();
    reply.aux_reply_head = true;
    vec![("relu", plain), ("mish-se-gpool", mish), ("swish-gpool", swish), ("mish-se-gpool-reply", reply)]
}

fn positions() -> Vec<Position> {
    let mut rng = Rng::new(77);
    let mut ps = playout_positions(&mut rng, 1, 80, 20);
    while ps.len() < 48 {
        if let Some(p) = random_position(&mut rng) {
            ps.push(p);
        }
    }
    ps
}

#[test]
fn rust_torch_and_onnx_agree() {
    let python = require_python_modules("torch, onnx, onnxruntime, safetensors, numpy");
    let positions = positions();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let mut worst: f64 = 0.0;
    for (i, (name, config)) in configs().into_iter().enumerate() {
        let mut net = Network::new(&config, &RunOptions::cpu(), Some(i as u64)).unwrap();
        koma_nn::model::randomize(net.var_store(), 100 + i as u64);
        let ckpt = dir.join(format!("model-{name}.safetensors"));
        net.save(&ckpt, &TrainingInfo { step: 7, samples_seen: 700, parent: None }).unwrap();

        let mut batch = InputBatch::new();
        batch.encode(&positions);
        let mut out = RawOutput::new();
        net.forward(&batch, &mut out).unwrap();
        let reply = tch::no_grad(|| {
            let (in1, in2) = net.upload(&batch);
            let (_, _, r) = net.net().forward_with_reply_t(&in1, &in2, false);
            r.map(|r| Vec::<f32>::try_from(&r.flatten(0, -1)).unwrap())
        });
        assert_eq!(reply.is_some(), config.aux_reply_head);
        let feats = dir.join(format!("{name}.features"));
        let outs = dir.join(format!("{name}.outputs"));
        let mut f = std::fs::File::create(&feats).unwrap();
        let mut g = std::fs::File::create(&outs).unwrap();
        for k in 0..batch.len() {
            let (a, b) = batch.get(k);
            f.write_all(a).unwrap();
            f.write_all(b).unwrap();
            for v in out.policy(k).iter().chain(out.wdl_logits(k).iter()) {
                g.write_all(&v.to_le_bytes()).unwrap();
            }
            if let Some(r) = &reply {
                for v in &r[k * 2187..(k + 1) * 2187] {
                    g.write_all(&v.to_le_bytes()).unwrap();
                }
            }
        }
        drop((f, g));

        let run = Command::new(&python)
            .env("PYTHONPATH", repo_root().join("python"))
            .args(["-c", SCRIPT])
            .arg(&ckpt)
            .arg(&feats)
            .arg(&outs)
            .arg(dir.join(format!("{name}.onnx")))
            .arg(if config.aux_reply_head { "1" } else { "0" })
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout).to_string();
        assert!(run.status.success(), "{name}: python failed: {}\n{stdout}", String::from_utf8_lossy(&run.stderr));
        eprintln!("{name}: {stdout}");
        let s: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(s["n"].as_u64(), Some(positions.len() as u64));
        assert_eq!(s["io"], serde_json::json!([["input1", "input2"], ["output_policy", "output_value"]]));
        assert_eq!(s["value_shape"], serde_json::json!([positions.len(), 1]));
        assert!(s["logit_scale"].as_f64().unwrap() > 0.1, "{name}: degenerate outputs");
        assert_eq!(s["reply_in_onnx"], serde_json::json!([]), "{name}: the ONNX graph holds reply weights");
        for key in [
            "rust_vs_torch_policy",
            "rust_vs_torch_wdl",
            "rust_vs_torch_reply",
            "rust_vs_onnx_policy",
            "rust_vs_onnx_value",
        ] {
            let d = s[key].as_f64().unwrap();
            worst = worst.max(d);
            assert!(d < 1e-4, "{name}: {key} = {d}");
        }
    }
    eprintln!("worst max-abs difference: {worst:e}");
}
