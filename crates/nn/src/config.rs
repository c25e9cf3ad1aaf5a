//! The network architecture as data: everything needed to build the same network in Rust (tch)
//! and in Python (python/koma/model.py). Stored in every checkpoint's sidecar.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Non-linearity used everywhere in the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    #[default]
    Relu,
    /// x · sigmoid(x), also called SiLU.
    #[serde(alias = "silu")]
    Swish,
    /// x · tanh(softplus(x)).
    Mish,
}

impl Activation {
    pub fn name(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Swish => "swish",
            Activation::Mish => "mish",
        }
    }
}

/// Squeeze-and-excitation in every residual block: global average → FC (C → C/ratio) →
/// activation → FC (C/ratio → C) → sigmoid, multiplied into the block's second BN output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeConfig {
    /// Channel reduction of the squeeze: C/ratio hidden units.
    pub ratio: usize,
}

/// KataGo-style global-pooling bias blocks: every `every`-th residual block (blocks
/// `every-1`, `2·every-1`, …) splits its first convolution into `C − channels` regular and
/// `channels` pooled channels; the pooled ones (BN, activation, mean and max over the board)
/// go through an FC layer that adds a per-channel bias to the regular ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobalPoolConfig {
    /// Every this many residual blocks has a global-pooling bias.
    pub every: usize,
    /// Channels of a block that are pooled (the rest stay regular).
    pub channels: usize,
}

/// The architecture. Defaults are those of the standard preset's heads; the tower size has no
/// default and must be given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Residual blocks in the tower.
    pub blocks: usize,
    /// Channels of the tower.
    pub channels: usize,
    #[serde(default)]
    pub activation: Activation,
    /// Squeeze-and-excitation in every block (`null` for none).
    #[serde(default)]
    pub se: Option<SeConfig>,
    /// Global-pooling bias blocks (`null` for none).
    #[serde(default)]
    pub global_pool: Option<GlobalPoolConfig>,
    /// Channels of the policy head's 3×3 convolution.
    #[serde(default = "default_policy_channels")]
    pub policy_channels: usize,
    /// Channels of the value head's 1×1 convolution.
    #[serde(default = "default_value_channels")]
    pub value_channels: usize,
    /// Width of the value head's hidden FC layer.
    #[serde(default = "default_value_hidden")]
    pub value_hidden: usize,
    /// KataGo's auxiliary opponent-reply policy head (KataGo §3.4): a second 2187-label output,
    /// trained on the move the opponent actually played next (`[train.loss] reply_weight`). It
    /// shares the policy head's 3×3 convolution; only training reads it (inference, search and
    /// the ONNX export ignore it). Left out of the JSON when false, so sidecars of networks without
    /// it are unchanged.
    #[serde(default, skip_serializing_if = "is_false")]
    pub aux_reply_head: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn default_policy_channels() -> usize {
    32
}
fn default_value_channels() -> usize {
    32
}
fn default_value_hidden() -> usize {
    256
}

/// Names accepted by [`ModelConfig::preset`].
pub const PRESETS: [&str; 3] = ["tiny", "standard", "resnet10-swish"];

impl ModelConfig {
    /// 5 blocks × 64 channels: CPU smoke runs and tests.
    pub fn tiny() -> ModelConfig {
        ModelConfig {
            blocks: 5,
            channels: 64,
            activation: Activation::Relu,
            se: None,
            global_pool: None,
            policy_channels: 32,
            value_channels: 8,
            value_hidden: 128,
            aux_reply_head: false,
        }
    }

    /// 10 blocks × 192 channels.
    pub fn standard() -> ModelConfig {
        ModelConfig {
            blocks: 10,
            channels: 192,
            activation: Activation::Relu,
            se: None,
            global_pool: None,
            policy_channels: default_policy_channels(),
            value_channels: default_value_channels(),
            value_hidden: default_value_hidden(),
            aux_reply_head: false,
        }
    }

    /// dlshogi's `resnet10_swish` tower (10 blocks × 192 channels, swish, the network of its
    /// published self-play runs) with a KataGo global-pooling bias in every third block (32 of
    /// the 192 channels pooled): the one-GPU configs' network.
    pub fn resnet10_swish() -> ModelConfig {
        ModelConfig {
            activation: Activation::Swish,
            global_pool: Some(GlobalPoolConfig { every: 3, channels: 32 }),
            ..ModelConfig::standard()
        }
    }

    pub fn preset(name: &str) -> Option<ModelConfig> {
        match name {
            "tiny" => Some(ModelConfig::tiny()),
            "standard" => Some(ModelConfig::standard()),
            "resnet10-swish" => Some(ModelConfig::resnet10_swish()),
            _ => None,
        }
    }

    /// Parses JSON (a bare model config, or an object with a `model` member such as a
    /// checkpoint sidecar) and validates it.
    pub fn from_json_str(text: &str) -> Result<ModelConfig> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::Config(format!("invalid JSON: {e}")))?;
        let value = match value.get("model") {
            Some(m) if m.is_object() => m.clone(),
            _ => value,
        };
        let config: ModelConfig = serde_json::from_value(value).map_err(|e| Error::Config(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Parses TOML: a `[model]` table (as in a run config under configs/) or a bare model
    /// config at the top level; validates it.
    pub fn from_toml_str(text: &str) -> Result<ModelConfig> {
        let table: toml::Table = toml::from_str(text).map_err(|e| Error::Config(format!("not valid TOML: {e}")))?;
        let value = match table.get("model") {
            Some(toml::Value::Table(m)) => toml::Value::Table(m.clone()),
            _ => toml::Value::Table(table),
        };
        ModelConfig::from_toml_value(value)
    }

    /// A model table, as a run config's `[model]` holds it: `preset = "NAME"` alone, or a full
    /// model config. `koma init --config` and the pipeline read it the same way.
    pub fn from_toml_value(value: toml::Value) -> Result<ModelConfig> {
        let table = value.as_table().ok_or_else(|| Error::Config("must be a table".into()))?;
        if let Some(preset) = table.get("preset") {
            if table.len() > 1 {
                return Err(Error::Config("give either `preset` or a full model config, not both".into()));
            }
            let name = preset.as_str().ok_or_else(|| Error::Config("preset must be a string".into()))?;
            return ModelConfig::preset(name)
                .ok_or_else(|| Error::Config(format!("preset = {name:?}: expected one of {}", PRESETS.join(", "))));
        }
        let config: ModelConfig = value.try_into().map_err(|e: toml::de::Error| Error::Config(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// A preset name (`tiny`, `standard`) or a file: `.toml` as [`ModelConfig::from_toml_str`],
    /// anything else as JSON ([`ModelConfig::from_json_str`]; a checkpoint sidecar works too).
    pub fn from_preset_or_file(spec: &str) -> Result<ModelConfig> {
        if let Some(c) = ModelConfig::preset(spec) {
            return Ok(c);
        }
        let path = std::path::Path::new(spec);
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Config(format!("`{spec}` is neither a preset ({}) nor a readable file: {e}", PRESETS.join(", ")))
        })?;
        let parsed = if path.extension().is_some_and(|e| e == "toml") {
            ModelConfig::from_toml_str(&text)
        } else {
            ModelConfig::from_json_str(&text)
        };
        parsed.map_err(|e| match e {
            Error::Config(message) => Error::Config(format!("{spec}: {message}")),
            other => other,
        })
    }

    /// Checks that the numbers make a buildable network.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(msg));
        if self.channels == 0 {
            return bad("channels must be at least 1".into());
        }
        if self.policy_channels == 0 || self.value_channels == 0 || self.value_hidden == 0 {
            return bad("policy_channels, value_channels and value_hidden must be at least 1".into());
        }
        if let Some(se) = self.se {
            if se.ratio == 0 || self.channels / se.ratio == 0 {
                return bad(format!("se.ratio {} must be between 1 and channels ({})", se.ratio, self.channels));
            }
        }
        if let Some(gp) = self.global_pool {
            if gp.every == 0 {
                return bad("global_pool.every must be at least 1".into());
            }
            if gp.channels == 0 || gp.channels >= self.channels {
                return bad(format!(
                    "global_pool.channels {} must be between 1 and channels - 1 ({})",
                    gp.channels,
                    self.channels - 1
                ));
            }
        }
        Ok(())
    }

    /// Whether residual block `i` (0-based) is a global-pooling block.
    pub fn is_global_pool_block(&self, i: usize) -> bool {
        match self.global_pool {
            Some(gp) => i % gp.every == gp.every - 1,
            None => false,
        }
    }

    /// A short human description such as `10x192 relu se4 gpool3/32`.
    pub fn describe(&self) -> String {
        let mut s = format!("{}x{} {}", self.blocks, self.channels, self.activation.name());
        if let Some(se) = self.se {
            s += &format!(" se{}", se.ratio);
        }
        if let Some(gp) = self.global_pool {
            s += &format!(" gpool{}/{}", gp.every, gp.channels);
        }
        if self.aux_reply_head {
            s += " reply";
        }
        s
    }
}

/// The first field (dotted path) where two JSON values differ, with both values; used to say
/// exactly which architecture or encoding field of a checkpoint does not match.
pub fn first_difference(
    found: &serde_json::Value,
    expected: &serde_json::Value,
    path: &str,
) -> Option<(String, String, String)> {
    use serde_json::Value;
    match (found, expected) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let sub = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                let (x, y) = (a.get(k).unwrap_or(&Value::Null), b.get(k).unwrap_or(&Value::Null));
                if let Some(d) = first_difference(x, y, &sub) {
                    return Some(d);
                }
            }
            None
        }
        _ if found == expected => None,
        _ => Some((path.to_string(), found.to_string(), expected.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_defaults() {
        let c = ModelConfig::from_json_str(r#"{"blocks": 3, "channels": 16, "activation": "silu"}"#).unwrap();
        assert_eq!(c.activation, Activation::Swish);
        assert_eq!(c.policy_channels, 32);
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(ModelConfig::from_json_str(&text).unwrap(), c);
        let sidecar = format!(r#"{{"step": 3, "model": {text}}}"#);
        assert_eq!(ModelConfig::from_json_str(&sidecar).unwrap(), c);
    }

    #[test]
    fn toml_with_and_without_model_table() {
        let run = "name = \"x\"\n[model]\nblocks = 6\nchannels = 96\nactivation = \"mish\"\nse = { ratio = 8 }\n";
        let c = ModelConfig::from_toml_str(run).unwrap();
        assert_eq!((c.blocks, c.channels, c.activation), (6, 96, Activation::Mish));
        assert_eq!(c.se, Some(SeConfig { ratio: 8 }));
        let bare = "blocks = 2\nchannels = 8\n[global_pool]\nevery = 2\nchannels = 4\n";
        let c = ModelConfig::from_toml_str(bare).unwrap();
        assert_eq!(c.global_pool, Some(GlobalPoolConfig { every: 2, channels: 4 }));
        assert!(ModelConfig::from_toml_str("blocks = 2\nchannels = 8\nsize = 3\n").is_err());
        assert_eq!(ModelConfig::from_preset_or_file("tiny").unwrap(), ModelConfig::tiny());
        for name in PRESETS {
            ModelConfig::preset(name).unwrap().validate().unwrap();
        }
        let r = ModelConfig::preset("resnet10-swish").unwrap();
        assert_eq!((r.blocks, r.channels, r.activation), (10, 192, Activation::Swish));
        assert_eq!(r.global_pool, Some(GlobalPoolConfig { every: 3, channels: 32 }));
        assert!(ModelConfig::from_preset_or_file("/nonexistent.toml").unwrap_err().to_string().contains("preset"));
    }

    #[test]
    fn run_configs_give_their_model() {
        // `koma init --config configs/gpu-small.toml`: the run config's `[model] preset`.
        let configs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let small = ModelConfig::from_preset_or_file(configs.join("gpu-small.toml").to_str().unwrap()).unwrap();
        assert_eq!(small, ModelConfig::preset("resnet10-swish").unwrap());
        let az = ModelConfig::from_preset_or_file(configs.join("gpu-az.toml").to_str().unwrap()).unwrap();
        assert_eq!((az.blocks, az.channels), (20, 256));
        let dir = tempfile::tempdir().unwrap();
        for (text, says) in [
            ("[model]\npreset = \"huge\"\n", "expected one of tiny, standard, resnet10-swish"),
            ("[model]\npreset = \"tiny\"\nblocks = 3\n", "not both"),
            ("[model]\nblokcs = 3\n", "blokcs"),
        ] {
            let path = dir.path().join("m.toml");
            std::fs::write(&path, text).unwrap();
            let e = ModelConfig::from_preset_or_file(path.to_str().unwrap()).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("m.toml"), "{e}");
            assert_eq!(e.matches("invalid model config").count(), 1, "{e}");
        }
    }

    #[test]
    fn rejects_unknown_fields_and_bad_numbers() {
        assert!(ModelConfig::from_json_str(r#"{"blocks": 3, "channels": 16, "chanels": 2}"#).is_err());
        assert!(ModelConfig::from_json_str(r#"{"blocks": 3, "channels": 16, "activation": "tanh"}"#).is_err());
        assert!(ModelConfig::from_json_str(
            r#"{"blocks": 3, "channels": 16, "global_pool": {"every": 2, "channels": 16}}"#
        )
        .is_err());
        assert!(ModelConfig::from_json_str(r#"{"blocks": 3, "channels": 16, "se": {"ratio": 0}}"#).is_err());
    }

    #[test]
    fn reply_head_flag_defaults_off_and_is_omitted_when_off() {
        let c = ModelConfig::from_json_str(r#"{"blocks": 3, "channels": 16}"#).unwrap();
        assert!(!c.aux_reply_head);
        assert!(!serde_json::to_string(&c).unwrap().contains("aux_reply_head"));
        let c = ModelConfig::from_toml_str("blocks = 3\nchannels = 16\naux_reply_head = true\n").unwrap();
        assert!(c.aux_reply_head);
        let text = serde_json::to_string(&c).unwrap();
        assert!(text.contains("\"aux_reply_head\":true"));
        assert_eq!(ModelConfig::from_json_str(&text).unwrap(), c);
        assert!(c.describe().ends_with(" reply"));
    }

    #[test]
    fn global_pool_placement() {
        let mut c = ModelConfig::tiny();
        c.blocks = 7;
        c.global_pool = Some(GlobalPoolConfig { every: 3, channels: 16 });
        let gp: Vec<usize> = (0..7).filter(|&i| c.is_global_pool_block(i)).collect();
        assert_eq!(gp, vec![2, 5]);
    }

    #[test]
    fn difference_names_the_field() {
        let a = serde_json::to_value(ModelConfig::tiny()).unwrap();
        let mut b = ModelConfig::tiny();
        b.blocks = 6;
        let b = serde_json::to_value(b).unwrap();
        let (field, found, expected) = first_difference(&a, &b, "").unwrap();
        assert_eq!((field.as_str(), found.as_str(), expected.as_str()), ("blocks", "5", "6"));
        assert!(first_difference(&a, &a, "").is_none());
    }
}
