//! The residual network in tch. python/koma/model.py builds the same modules under the same
//! parameter names; keep the two in step (the parity test compares their outputs).
//!
//! ```text
//! input1 (N,62,9,9) ┐
//!                   ├ cat → conv3×3 → BN → act                         stem
//! input2 (N,57,9,9) ┘
//!   × blocks:  conv3×3 → BN → act → conv3×3 → BN → [SE] → + skip → act  (or a global-pooling block)
//! policy:  conv3×3 (P) → BN → act → conv1×1 (27) → flatten (27·81) + bias[2187]  → logits
//! value:   conv1×1 (V) → BN → act → flatten (V·81) → FC (H) → act → FC (3)       → W/D/L logits
//! reply (optional, `aux_reply_head`): the policy head's act output → conv1×1 (27) → rotate 180°
//!          → flatten (27·81) + bias[2187] → logits of the opponent's reply, in the opponent's frame
//! ```
//! Parameter names (PyTorch `state_dict` keys):
//! `stem.conv.weight`, `stem.bn.{weight,bias,running_mean,running_var}`,
//! `blocks.I.conv1.weight`, `blocks.I.bn1.*`, `blocks.I.conv2.weight`, `blocks.I.bn2.*`,
//! `blocks.I.se.fc1.{weight,bias}`, `blocks.I.se.fc2.{weight,bias}`, and in global-pooling blocks
//! also `blocks.I.conv1g.weight`, `blocks.I.bn1g.*`, `blocks.I.gpool_fc.weight`;
//! `policy.conv.weight`, `policy.bn.*`, `policy.out.weight`, `policy.bias`,
//! `value.conv.weight`, `value.bn.*`, `value.fc1.{weight,bias}`, `value.fc2.{weight,bias}`,
//! and with the reply head `reply.out.weight`, `reply.bias`.
//!
//! The reply head (KataGo's opponent policy, §3.4) predicts the move the opponent plays after the
//! side to move's move. Its labels are dlshogi labels of that move from the *opponent's* point of
//! view (`move_label(reply, !side_to_move)`: the label the main head would give it one ply later),
//! so every opponent move, knight moves included, has a label. Those labels rotate the board
//! (square `s` becomes `80 − s`) relative to the input, so the head's 27×9×9 map is rotated 180°
//! before flattening: each output cell then sits over the destination square as the network sees
//! the board, and the 1×1 convolution stays local.
//!
//! Memory format: [`Net::forward_t`] takes inputs in either layout. Inputs in channels-last
//! (NHWC strides, see [`to_channels_last`]) make every activation channels-last, which oneDNN's
//! CPU convolutions run faster (the trainer's `memory_format`; docs/training.md has the figures); the
//! weights stay in the standard contiguous layout either way, so checkpoints are unaffected. The
//! result is the same up to float rounding (a different summation order inside the kernels).

use tch::nn::{self, Module, ModuleT};
use tch::{Kind, Tensor};

use crate::config::{Activation, ModelConfig};
use crate::encoding::{FEATURES1_NUM, FEATURES2_NUM, MOVE_DIRECTIONS, MOVE_LABELS, SQUARES};

/// Outputs of the value head, in this order: win, draw, loss for the side to move.
pub const VALUE_OUTPUTS: usize = 3;

fn act(a: Activation, x: &Tensor) -> Tensor {
    match a {
        Activation::Relu => x.relu(),
        Activation::Swish => x.silu(),
        Activation::Mish => x.mish(),
    }
}

fn conv(p: nn::Path, cin: usize, cout: usize, k: usize, bias: bool) -> nn::Conv2D {
    nn::conv2d(
        p,
        cin as i64,
        cout as i64,
        k as i64,
        nn::ConvConfig { padding: (k / 2) as i64, bias, ..Default::default() },
    )
}

/// The share of a training batch's statistics that each train-mode forward pass moves the
/// batch-norm running statistics by (PyTorch's default). The trainer's recomputation of the
/// averaged network's statistics relies on it.
pub const BATCH_NORM_MOMENTUM: f64 = 0.1;

fn bn(p: nn::Path, c: usize) -> nn::BatchNorm {
    // PyTorch's defaults (weight 1, bias 0); tch's default weight init is uniform(0, 1).
    let config = nn::BatchNormConfig {
        ws_init: nn::Init::Const(1.0),
        momentum: BATCH_NORM_MOMENTUM,
        eps: BATCH_NORM_EPS,
        ..Default::default()
    };
    nn::batch_norm2d(p, c as i64, config)
}

/// A convolution followed by batch norm. For inference the two can be folded into one
/// convolution with a bias ([`Net::fold_batch_norm`]): batch norm with running statistics is the
/// affine map `x·s + (β − μ·s)` per channel, `s = γ / √(σ² + ε)`, which the convolution's
/// weights and a bias absorb, saving a pass over every activation.
struct ConvBn {
    conv: nn::Conv2D,
    bn: nn::BatchNorm,
    padding: i64,
    folded: Option<Folded>,
}

/// A [`ConvBn`]'s folded weights, in the network's kind, and the batch-norm scale `s` (for what
/// is added between the convolution and batch norm: a global-pooling block's bias).
struct Folded {
    weight: Tensor,
    bias: Tensor,
    scale: Tensor,
}

impl ConvBn {
    fn new(p: &nn::Path, conv_name: &str, bn_name: &str, cin: usize, cout: usize, k: usize) -> ConvBn {
        ConvBn {
            conv: conv(p / conv_name, cin, cout, k, false),
            bn: bn(p / bn_name, cout),
            padding: (k / 2) as i64,
            folded: None,
        }
    }

    /// `bn(conv(x) + added)`, `added` broadcast over the board (`(N, C, 1, 1)`).
    fn forward_adding(&self, x: &Tensor, added: Option<&Tensor>, train: bool) -> Tensor {
        match &self.folded {
            Some(f) if !train => {
                let y = x.conv2d(&f.weight, Some(&f.bias), [1, 1], [self.padding, self.padding], [1, 1], 1);
                match added {
                    Some(a) => y + a * f.scale.view([1, -1, 1, 1]),
                    None => y,
                }
            }
            _ => {
                let y = self.conv.forward(x);
                let y = match added {
                    Some(a) => y + a,
                    None => y,
                };
                self.bn.forward_t(&y, train)
            }
        }
    }

    fn forward_t(&self, x: &Tensor, train: bool) -> Tensor {
        self.forward_adding(x, None, train)
    }

    /// Folds the running statistics into the convolution (computed in f64, kept in the weights'
    /// kind and device).
    fn fold(&mut self) {
        let _guard = tch::no_grad_guard();
        let (kind, bn) = (self.conv.ws.kind(), &self.bn);
        let f64_of = |t: &Tensor| t.to_kind(Kind::Double);
        let gamma = bn.ws.as_ref().map_or_else(|| f64_of(&bn.running_var).ones_like(), f64_of);
        let beta = bn.bs.as_ref().map_or_else(|| f64_of(&bn.running_mean).zeros_like(), f64_of);
        let scale = gamma / (f64_of(&bn.running_var) + BATCH_NORM_EPS).sqrt();
        let weight = f64_of(&self.conv.ws) * scale.view([-1, 1, 1, 1]);
        let bias = beta - f64_of(&bn.running_mean) * &scale;
        self.folded =
            Some(Folded { weight: weight.to_kind(kind), bias: bias.to_kind(kind), scale: scale.to_kind(kind) });
    }
}

/// Batch norm's ε (PyTorch's and tch's default, which every layer here uses).
const BATCH_NORM_EPS: f64 = 1e-5;

/// Whether a variable belongs to a batch-norm layer (`…bn*.{weight,bias,running_mean,running_var}`).
pub fn is_batch_norm_variable(name: &str) -> bool {
    name.rsplit('.').nth(1).is_some_and(|module| module.starts_with("bn"))
}

fn linear(p: nn::Path, cin: usize, cout: usize, bias: bool) -> nn::Linear {
    nn::linear(p, cin as i64, cout as i64, nn::LinearConfig { bias, ..Default::default() })
}

struct SqueezeExcite {
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl SqueezeExcite {
    fn forward(&self, a: Activation, x: &Tensor) -> Tensor {
        let (n, c) = (x.size()[0], x.size()[1]);
        let s = x.mean_dim(&[2i64, 3][..], false, None::<Kind>);
        let s = self.fc2.forward(&act(a, &self.fc1.forward(&s))).sigmoid();
        x * s.view([n, c, 1, 1])
    }
}

/// The global-pooling part of a block: `conv1g` → BN → act → [mean, max] → FC → bias.
struct GlobalPool {
    conv1g: ConvBn,
    fc: nn::Linear,
}

struct Block {
    conv1: ConvBn,
    conv2: ConvBn,
    se: Option<SqueezeExcite>,
    gpool: Option<GlobalPool>,
}

impl Block {
    fn new(p: &nn::Path, config: &ModelConfig, index: usize) -> Block {
        let c = config.channels;
        let (regular, gpool) = match config.global_pool {
            Some(gp) if config.is_global_pool_block(index) => {
                let g = gp.channels;
                let gpool = GlobalPool {
                    conv1g: ConvBn::new(p, "conv1g", "bn1g", c, g, 3),
                    fc: linear(p / "gpool_fc", 2 * g, c - g, false),
                };
                (c - g, Some(gpool))
            }
            _ => (c, None),
        };
        let se = config.se.map(|se| {
            let hidden = c / se.ratio;
            let q = p / "se";
            SqueezeExcite { fc1: linear(&q / "fc1", c, hidden, true), fc2: linear(&q / "fc2", hidden, c, true) }
        });
        Block {
            conv1: ConvBn::new(p, "conv1", "bn1", c, regular, 3),
            conv2: ConvBn::new(p, "conv2", "bn2", regular, c, 3),
            se,
            gpool,
        }
    }

    fn forward(&self, a: Activation, x: &Tensor, train: bool) -> Tensor {
        let pooled_bias = self.gpool.as_ref().map(|g| {
            let h = act(a, &g.conv1g.forward_t(x, train));
            let pooled =
                Tensor::cat(&[h.mean_dim(&[2i64, 3][..], false, None::<Kind>), h.amax(&[2i64, 3][..], false)], 1);
            let bias = g.fc.forward(&pooled);
            let (n, c) = (bias.size()[0], bias.size()[1]);
            bias.view([n, c, 1, 1])
        });
        let y = act(a, &self.conv1.forward_adding(x, pooled_bias.as_ref(), train));
        let mut y = self.conv2.forward_t(&y, train);
        if let Some(se) = &self.se {
            y = se.forward(a, &y);
        }
        act(a, &(y + x))
    }
}

/// The network. Build it on a [`nn::Path`] of a `VarStore`; the store owns the weights.
pub struct Net {
    activation: Activation,
    stem: ConvBn,
    blocks: Vec<Block>,
    policy_conv: ConvBn,
    policy_out: nn::Conv2D,
    policy_bias: Tensor,
    value_conv: ConvBn,
    value_fc1: nn::Linear,
    value_fc2: nn::Linear,
    reply: Option<ReplyHead>,
}

/// The opponent-reply head: a 1×1 convolution on the policy head's hidden planes and a bias.
struct ReplyHead {
    out: nn::Conv2D,
    bias: Tensor,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net").field("blocks", &self.blocks.len()).finish_non_exhaustive()
    }
}

impl Net {
    /// Creates the variables under `root` (freshly initialised) and the network using them.
    /// The config must be valid ([`ModelConfig::validate`]).
    pub fn new(root: &nn::Path, config: &ModelConfig) -> Net {
        let c = config.channels;
        let stem = root / "stem";
        let blocks_path = root / "blocks";
        let policy = root / "policy";
        let value = root / "value";
        Net {
            activation: config.activation,
            stem: ConvBn::new(&stem, "conv", "bn", FEATURES1_NUM + FEATURES2_NUM, c, 3),
            blocks: (0..config.blocks).map(|i| Block::new(&(&blocks_path / i), config, i)).collect(),
            policy_conv: ConvBn::new(&policy, "conv", "bn", c, config.policy_channels, 3),
            policy_out: conv(&policy / "out", config.policy_channels, MOVE_DIRECTIONS, 1, false),
            policy_bias: policy.zeros("bias", &[MOVE_LABELS as i64]),
            value_conv: ConvBn::new(&value, "conv", "bn", c, config.value_channels, 1),
            value_fc1: linear(&value / "fc1", config.value_channels * SQUARES, config.value_hidden, true),
            value_fc2: linear(&value / "fc2", config.value_hidden, VALUE_OUTPUTS, true),
            // Created last, so the other variables draw the same initial values with or without it.
            reply: config.aux_reply_head.then(|| {
                let reply = root / "reply";
                ReplyHead {
                    out: conv(&reply / "out", config.policy_channels, MOVE_DIRECTIONS, 1, false),
                    bias: reply.zeros("bias", &[MOVE_LABELS as i64]),
                }
            }),
        }
    }

    /// Folds every batch norm into the convolution before it, for inference: forward passes with
    /// `train = false` then use the folded weights (training passes never do). The folded
    /// weights are a copy taken now: a network whose weights change afterwards (training,
    /// loading) must be folded again, so only networks that are only evaluated are folded.
    pub fn fold_batch_norm(&mut self) {
        self.conv_bn_layers().into_iter().for_each(ConvBn::fold);
    }

    /// Every convolution followed by batch norm.
    fn conv_bn_layers(&mut self) -> Vec<&mut ConvBn> {
        let mut layers: Vec<&mut ConvBn> = vec![&mut self.stem, &mut self.policy_conv, &mut self.value_conv];
        for block in &mut self.blocks {
            layers.push(&mut block.conv1);
            layers.push(&mut block.conv2);
            if let Some(g) = &mut block.gpool {
                layers.push(&mut g.conv1g);
            }
        }
        layers
    }

    /// Drops the folded weights: inference uses batch norm again (and sees the weights as they
    /// are now).
    pub fn unfold(&mut self) {
        self.conv_bn_layers().into_iter().for_each(|layer| layer.folded = None);
    }

    /// Whether the batch norms are folded ([`Net::fold_batch_norm`]).
    pub fn is_folded(&self) -> bool {
        self.stem.folded.is_some()
    }

    /// Whether the network has the opponent-reply head (`aux_reply_head`).
    pub fn has_reply_head(&self) -> bool {
        self.reply.is_some()
    }

    /// Policy logits `(N, 2187)` and W/D/L logits `(N, 3)` from float features
    /// `(N, 62, 9, 9)` and `(N, 57, 9, 9)` of the weights' kind. `train` selects batch statistics
    /// (training) or running statistics (inference) in batch norm.
    pub fn forward_t(&self, input1: &Tensor, input2: &Tensor, train: bool) -> (Tensor, Tensor) {
        let (policy, value, _) = self.forward_heads(input1, input2, train, false);
        (policy, value)
    }

    /// [`Net::forward_t`] plus the opponent-reply logits `(N, 2187)` (labels in the opponent's
    /// frame, see the module docs) when the network has that head: what training computes.
    pub fn forward_with_reply_t(
        &self,
        input1: &Tensor,
        input2: &Tensor,
        train: bool,
    ) -> (Tensor, Tensor, Option<Tensor>) {
        self.forward_heads(input1, input2, train, true)
    }

    fn forward_heads(
        &self,
        input1: &Tensor,
        input2: &Tensor,
        train: bool,
        with_reply: bool,
    ) -> (Tensor, Tensor, Option<Tensor>) {
        let a = self.activation;
        let n = input1.size()[0];
        let x = Tensor::cat(&[input1, input2], 1);
        let mut x = act(a, &self.stem.forward_t(&x, train));
        for block in &self.blocks {
            x = block.forward(a, &x, train);
        }
        let p = act(a, &self.policy_conv.forward_t(&x, train));
        // `reshape`, not `view`: channels-last activations are not viewable as (N, 27·81); the
        // copy (NCHW order, as PyTorch's `flatten`) is what `flatten` does for them too.
        let policy = self.policy_out.forward(&p).reshape([n, MOVE_LABELS as i64]) + &self.policy_bias;
        let v = act(a, &self.value_conv.forward_t(&x, train));
        let v = act(a, &self.value_fc1.forward(&v.flatten(1, -1)));
        let value = self.value_fc2.forward(&v);
        let reply = match &self.reply {
            Some(r) if with_reply => {
                // Rotate the map 180° (square s → 80 − s): the labels are in the opponent's frame.
                let map = r.out.forward(&p).flip([2i64, 3]);
                Some(map.reshape([n, MOVE_LABELS as i64]) + &r.bias)
            }
            _ => None,
        };
        (policy, value, reply)
    }
}

/// The same `(N, C, H, W)` tensor with channels-last strides (PyTorch's
/// `x.contiguous(memory_format=torch.channels_last)`; tch has no memory-format argument). A copy
/// unless it is channels-last already.
pub fn to_channels_last(x: &Tensor) -> Tensor {
    x.permute([0, 2, 3, 1]).contiguous().permute([0, 3, 1, 2])
}

/// Whether a 4-d tensor has channels-last strides (C innermost).
pub fn is_channels_last(x: &Tensor) -> bool {
    let (size, stride) = (x.size(), x.stride());
    size.len() == 4 && {
        let (c, h, w) = (size[1], size[2], size[3]);
        (c == 1 || stride[1] == 1) && (w == 1 || stride[3] == c) && (h == 1 || stride[2] == c * w)
    }
}

/// Overwrites every variable of `vs` with seeded random values (batch-norm scales and variances
/// positive, statistics off their defaults), so that a comparison between implementations
/// exercises every parameter and buffer. For parity tests and `koma init --randomize`.
pub fn randomize(vs: &tch::nn::VarStore, seed: u64) {
    seeded(Some(seed), || randomize_seeded(vs))
}

/// Runs `f` (which draws from libtorch's global generator) right after seeding it with `seed`,
/// while no other thread of the process seeds or draws through here: concurrent initialisations
/// (tests in parallel, several trainers) would otherwise interleave their draws and the weights
/// would depend on timing.
pub(crate) fn seeded<T>(seed: Option<u64>, f: impl FnOnce() -> T) -> T {
    static GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _taken = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(seed) = seed {
        tch::manual_seed(seed as i64);
    }
    f()
}

fn randomize_seeded(vs: &tch::nn::VarStore) {
    let _guard = tch::no_grad_guard();
    let mut names: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, mut t) in names {
        let u = Tensor::rand_like(&t);
        let (lo, hi) = if name.ends_with("running_var") {
            (0.5, 2.0)
        } else if name.ends_with("running_mean")
            || (name.ends_with(".bias") && name != "policy.bias" && name != "reply.bias")
        {
            (-0.2, 0.2)
        } else if is_batch_norm_variable(&name) && name.ends_with(".weight") {
            (0.5, 1.5)
        } else if name == "policy.bias" || name == "reply.bias" {
            (-0.5, 0.5)
        } else {
            // Weights: keep their initialisation scale, re-drawn symmetric.
            let bound = t.abs().max().double_value(&[]).max(1e-3);
            (-bound, bound)
        };
        t.copy_(&(u * (hi - lo) + lo));
    }
}

/// Number of trainable parameters of a config (weights and biases, not BN running statistics).
pub fn parameter_count(config: &ModelConfig) -> usize {
    let c = config.channels;
    let conv = |cin: usize, cout: usize, k: usize| cin * cout * k * k;
    let bn = |c: usize| 2 * c;
    let mut total = conv(FEATURES1_NUM + FEATURES2_NUM, c, 3) + bn(c);
    for i in 0..config.blocks {
        let regular = match config.global_pool {
            Some(gp) if config.is_global_pool_block(i) => {
                total += conv(c, gp.channels, 3) + bn(gp.channels) + 2 * gp.channels * (c - gp.channels);
                c - gp.channels
            }
            _ => c,
        };
        total += conv(c, regular, 3) + bn(regular) + conv(regular, c, 3) + bn(c);
        if let Some(se) = config.se {
            let h = c / se.ratio;
            total += c * h + h + h * c + c;
        }
    }
    let (p, v, h) = (config.policy_channels, config.value_channels, config.value_hidden);
    total += conv(c, p, 3) + bn(p) + conv(p, MOVE_DIRECTIONS, 1) + MOVE_LABELS;
    total += conv(c, v, 1) + bn(v) + v * SQUARES * h + h + h * VALUE_OUTPUTS + VALUE_OUTPUTS;
    if config.aux_reply_head {
        total += conv(p, MOVE_DIRECTIONS, 1) + MOVE_LABELS;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{GlobalPoolConfig, SeConfig};
    use tch::Device;

    /// libtorch's generator is process-wide: tests that seed it or draw from it (every `Net::new`)
    /// take this lock, so that a seeded initialisation is not interleaved with another test's.
    static TORCH_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
        TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn batch_norm_variables_are_told_apart_by_name() {
        let _lock = rng_lock();
        let mut c = ModelConfig::tiny();
        c.se = Some(SeConfig { ratio: 4 });
        c.global_pool = Some(GlobalPoolConfig { every: 1, channels: 4 });
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let _net = Net::new(&vs.root(), &c);
        let mut bn = 0;
        for (name, t) in vs.variables() {
            let is_bn = is_batch_norm_variable(&name);
            // Every batch-norm layer has 4 variables, each of one value per channel; the running
            // statistics (the only non-trainable variables) are all among them.
            assert!(is_bn || t.requires_grad(), "{name}");
            assert!(!is_bn || t.dim() == 1, "{name}");
            bn += usize::from(is_bn);
        }
        // stem, 2 per block, 1 more per global-pooling block, policy, value.
        assert_eq!(bn, 4 * (1 + 3 * c.blocks + 2), "{:?}", vs.variables().keys().collect::<Vec<_>>());
    }

    fn all_variants() -> Vec<ModelConfig> {
        let mut out = Vec::new();
        for activation in [Activation::Relu, Activation::Swish, Activation::Mish] {
            let mut c = ModelConfig::tiny();
            c.blocks = 3;
            c.channels = 16;
            c.activation = activation;
            out.push(c.clone());
            c.se = Some(SeConfig { ratio: 4 });
            c.global_pool = Some(GlobalPoolConfig { every: 2, channels: 4 });
            out.push(c.clone());
            c.aux_reply_head = true;
            out.push(c);
        }
        out
    }

    #[test]
    fn shapes_and_parameter_count() {
        let _rng = rng_lock();
        for config in all_variants() {
            let vs = nn::VarStore::new(Device::Cpu);
            let net = Net::new(&vs.root(), &config);
            let in1 = Tensor::zeros([4, FEATURES1_NUM as i64, 9, 9], (Kind::Float, Device::Cpu));
            let in2 = Tensor::ones([4, FEATURES2_NUM as i64, 9, 9], (Kind::Float, Device::Cpu));
            let (p, v) = net.forward_t(&in1, &in2, false);
            assert_eq!(p.size(), vec![4, MOVE_LABELS as i64]);
            assert_eq!(v.size(), vec![4, VALUE_OUTPUTS as i64]);
            let trainable: usize = vs.trainable_variables().iter().map(|t| t.numel()).sum();
            assert_eq!(trainable, parameter_count(&config), "{}", config.describe());
            // Training mode runs too (batch statistics).
            let (p, _) = net.forward_t(&in1, &in2, true);
            assert_eq!(p.size(), vec![4, MOVE_LABELS as i64]);
            let (p2, _, reply) = net.forward_with_reply_t(&in1, &in2, false);
            assert!(p2.equal(&net.forward_t(&in1, &in2, false).0));
            assert_eq!(net.has_reply_head(), config.aux_reply_head);
            match reply {
                Some(r) => assert_eq!(r.size(), vec![4, MOVE_LABELS as i64]),
                None => assert!(!config.aux_reply_head),
            }
        }
    }

    /// The reply head adds variables after all others: with the same seed, the network with it
    /// starts from exactly the weights of the network without it (same model 0 up to the head).
    #[test]
    fn reply_head_leaves_the_other_initial_weights_alone() {
        let _rng = rng_lock();
        let mut config = ModelConfig::tiny();
        config.blocks = 2;
        config.channels = 16;
        let init = |c: &ModelConfig| {
            tch::manual_seed(11);
            let vs = nn::VarStore::new(Device::Cpu);
            let _ = Net::new(&vs.root(), c);
            vs
        };
        let plain = init(&config);
        config.aux_reply_head = true;
        let with = init(&config);
        let (a, b) = (plain.variables(), with.variables());
        assert_eq!(b.len(), a.len() + 2);
        assert!(b.contains_key("reply.out.weight") && b.contains_key("reply.bias"));
        for (name, t) in &a {
            assert!(t.equal(&b[name]), "{name}");
        }
    }

    /// Reply logits are the 27×81 map rotated 180°: logit `d·81 + s` comes from the map's cell
    /// `(d, 80 − s)`, i.e. the destination square as the side to move sees it.
    #[test]
    fn reply_logits_are_the_rotated_map() {
        let _rng = rng_lock();
        let mut config = ModelConfig::tiny();
        config.blocks = 1;
        config.channels = 8;
        config.aux_reply_head = true;
        let vs = nn::VarStore::new(Device::Cpu);
        let net = Net::new(&vs.root(), &config);
        randomize(&vs, 5);
        tch::manual_seed(1);
        let in1 =
            Tensor::rand([2, FEATURES1_NUM as i64, 9, 9], (Kind::Float, Device::Cpu)).ge(0.8).to_kind(Kind::Float);
        let in2 =
            Tensor::rand([2, FEATURES2_NUM as i64, 9, 9], (Kind::Float, Device::Cpu)).ge(0.5).to_kind(Kind::Float);
        let (_, _, reply) = net.forward_with_reply_t(&in1, &in2, false);
        let reply = reply.unwrap();
        // Recompute the map by hand from the shared policy planes.
        let x = Tensor::cat(&[&in1, &in2], 1);
        let a = config.activation;
        let mut x = act(a, &net.stem.bn.forward_t(&net.stem.conv.forward(&x), false));
        for block in &net.blocks {
            x = block.forward(a, &x, false);
        }
        let p = act(a, &net.policy_conv.bn.forward_t(&net.policy_conv.conv.forward(&x), false));
        let r = net.reply.as_ref().unwrap();
        let map = r.out.forward(&p).reshape([2, MOVE_DIRECTIONS as i64, SQUARES as i64]);
        let bias = Vec::<f32>::try_from(&r.bias).unwrap();
        for (d, s) in [(0usize, 0usize), (3, 10), (8, 40), (26, 80), (17, 67)] {
            let label = (d * SQUARES + s) as i64;
            let want = map.double_value(&[1, d as i64, (80 - s) as i64]) + bias[d * SQUARES + s] as f64;
            let got = reply.double_value(&[1, label]);
            assert!((want - got).abs() < 1e-5, "label {label}: {got} vs {want}");
        }
    }

    /// Channels-last inputs: every activation channels-last (the speed-up), the same outputs and
    /// gradients as contiguous inputs up to float rounding, and the weights left contiguous.
    #[test]
    fn channels_last_inputs_match_contiguous() {
        let _rng = rng_lock();
        for config in all_variants() {
            let vs = nn::VarStore::new(Device::Cpu);
            let net = Net::new(&vs.root(), &config);
            randomize(&vs, 7);
            tch::manual_seed(3);
            let in1 =
                Tensor::rand([6, FEATURES1_NUM as i64, 9, 9], (Kind::Float, Device::Cpu)).ge(0.8).to_kind(Kind::Float);
            let in2 =
                Tensor::rand([6, FEATURES2_NUM as i64, 9, 9], (Kind::Float, Device::Cpu)).ge(0.8).to_kind(Kind::Float);
            let (cl1, cl2) = (to_channels_last(&in1), to_channels_last(&in2));
            assert!(is_channels_last(&cl1) && !cl1.is_contiguous() && !is_channels_last(&in1));
            assert_eq!(
                Vec::<f32>::try_from(&cl1.flatten(0, -1)).unwrap(),
                Vec::<f32>::try_from(&in1.flatten(0, -1)).unwrap()
            );
            let params = vs.trainable_variables();
            let run = |a: &Tensor, b: &Tensor, train: bool| {
                let (p, v, r) = net.forward_with_reply_t(a, b, train);
                let mut loss = (p.log_softmax(1, Kind::Float).narrow(1, 0, 100).sum(Kind::Float)) * 0.01
                    + v.square().sum(Kind::Float);
                if let Some(r) = r {
                    loss += r.log_softmax(1, Kind::Float).narrow(1, 50, 100).sum(Kind::Float) * 0.01;
                }
                let grads = Tensor::run_backward(&[loss], &params, false, false);
                (p, v, grads)
            };
            for train in [false, true] {
                let (p0, v0, g0) = run(&in1, &in2, train);
                let (p1, v1, g1) = run(&cl1, &cl2, train);
                let close = |a: &Tensor, b: &Tensor, what: &str| {
                    let diff = (a - b).abs().max().double_value(&[]);
                    let scale = a.abs().max().double_value(&[]).max(1.0);
                    assert!(diff <= 1e-4 * scale, "{} {what}: {diff} (scale {scale})", config.describe());
                };
                close(&p0, &p1, "policy");
                close(&v0, &v1, "value");
                for (a, b) in g0.iter().zip(&g1) {
                    close(a, &b.contiguous(), "gradient");
                }
            }
            for t in vs.variables().values() {
                assert!(t.is_contiguous(), "weights stay contiguous");
            }
        }
    }

    #[test]
    fn standard_sizes() {
        assert!(parameter_count(&ModelConfig::standard()) > 6_000_000);
        assert!(parameter_count(&ModelConfig::tiny()) < 700_000);
    }
}
