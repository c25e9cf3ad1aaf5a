//! Where and in what precision the network runs: `--device cpu|cuda|cuda:N|auto`,
//! `--precision auto|f32|f16|bf16`, CPU thread count.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tch::{Cuda, Device, Kind};

use crate::error::{Error, Result};

/// A device as the user names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DeviceSpec {
    /// CUDA device 0 when CUDA is usable, else the CPU.
    #[default]
    Auto,
    Cpu,
    /// `cuda` is `cuda:0`.
    Cuda(usize),
}

impl FromStr for DeviceSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<DeviceSpec> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "auto" => Ok(DeviceSpec::Auto),
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" | "gpu" => Ok(DeviceSpec::Cuda(0)),
            _ => match t.strip_prefix("cuda:") {
                Some(n) => n.parse().map(DeviceSpec::Cuda).map_err(|_| Error::Device(s.to_string())),
                None => Err(Error::Device(s.to_string())),
            },
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Auto => f.write_str("auto"),
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl DeviceSpec {
    /// The tch device, checking that a requested CUDA device exists.
    pub fn resolve(self) -> Result<Device> {
        match self {
            DeviceSpec::Cpu => Ok(Device::Cpu),
            DeviceSpec::Auto => Ok(if Cuda::is_available() { Device::Cuda(0) } else { Device::Cpu }),
            DeviceSpec::Cuda(n) => {
                if !Cuda::is_available() {
                    return Err(Error::Unavailable(format!(
                        "device cuda:{n} requested but CUDA is not available (no GPU, no driver, or a CPU-only libtorch)"
                    )));
                }
                let count = Cuda::device_count() as usize;
                if n >= count {
                    return Err(Error::Unavailable(format!(
                        "device cuda:{n} requested but only {count} CUDA device(s) exist"
                    )));
                }
                Ok(Device::Cuda(n))
            }
        }
    }
}

/// Several devices, as the user lists them: `cuda:0,cuda:1`, `cuda:all` (every visible CUDA
/// device), or one device as before. Self-play runs an inference service on each; the trainer
/// keeps a replica on each (data parallel). A device may be listed twice (`cpu,cpu` gives two CPU
/// replicas, which is how the data-parallel code is tested without GPUs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceList {
    Listed(Vec<DeviceSpec>),
    /// `cuda:all`: every CUDA device the process sees.
    AllCuda,
}

impl FromStr for DeviceList {
    type Err = Error;
    fn from_str(s: &str) -> Result<DeviceList> {
        if matches!(s.trim().to_ascii_lowercase().as_str(), "cuda:all" | "cuda:*" | "all") {
            return Ok(DeviceList::AllCuda);
        }
        let specs = s
            .split(',')
            .map(|d| match d.trim() {
                "" => Err(Error::Device(format!("{s:?} (an empty entry in the device list)"))),
                d => d.parse::<DeviceSpec>(),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(DeviceList::Listed(specs))
    }
}

impl fmt::Display for DeviceList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceList::AllCuda => f.write_str("cuda:all"),
            DeviceList::Listed(specs) => {
                let names: Vec<String> = specs.iter().map(DeviceSpec::to_string).collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

/// `auto`: one device, CUDA when usable.
impl Default for DeviceList {
    fn default() -> DeviceList {
        DeviceList::Listed(vec![DeviceSpec::Auto])
    }
}

impl From<DeviceSpec> for DeviceList {
    fn from(device: DeviceSpec) -> DeviceList {
        DeviceList::Listed(vec![device])
    }
}

/// Written as its name (`cuda:0,cuda:1`); read from a name or a TOML array of names, checked as
/// [`FromStr`] checks it, so a config with a bad device fails when it is read.
impl Serialize for DeviceList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<DeviceList, D::Error> {
        let text = deserialize_device_list(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl DeviceList {
    /// The devices, each checked as [`DeviceSpec::resolve`] does. A list may not mix the CPU
    /// with CUDA devices (precision and layout follow the first), nor name one GPU twice; the
    /// CPU may repeat (CPU replicas, for tests).
    pub fn resolve(&self) -> Result<Vec<Device>> {
        match self {
            DeviceList::Listed(specs) => {
                let devices = specs.iter().map(|d| d.resolve()).collect::<Result<Vec<_>>>()?;
                let cuda: Vec<Device> = devices.iter().copied().filter(|d| d.is_cuda()).collect();
                if !cuda.is_empty() && cuda.len() != devices.len() {
                    return Err(Error::Device(format!("{self} (a list mixes the CPU with CUDA devices)")));
                }
                if (1..cuda.len()).any(|i| cuda[..i].contains(&cuda[i])) {
                    return Err(Error::Device(format!("{self} (a list names one GPU twice)")));
                }
                Ok(devices)
            }
            DeviceList::AllCuda => {
                let count = if Cuda::is_available() { Cuda::device_count() as usize } else { 0 };
                if count == 0 {
                    return Err(Error::Unavailable(
                        "device cuda:all requested but CUDA is not available (no GPU, no driver, or a CPU-only libtorch)"
                            .into(),
                    ));
                }
                Ok((0..count).map(Device::Cuda).collect())
            }
        }
    }

    /// The devices as specs (for [`RunOptions`]), `cuda:all` expanded.
    pub fn specs(&self) -> Result<Vec<DeviceSpec>> {
        Ok(match self {
            DeviceList::Listed(specs) => specs.clone(),
            DeviceList::AllCuda => self
                .resolve()?
                .into_iter()
                .map(|d| if let Device::Cuda(n) = d { DeviceSpec::Cuda(n) } else { DeviceSpec::Cpu })
                .collect(),
        })
    }
}

/// The names of several tch devices, comma-separated (`cuda:0,cuda:1`).
pub fn device_names(devices: &[Device]) -> String {
    devices.iter().map(|&d| device_name(d)).collect::<Vec<_>>().join(",")
}

/// A config's `device`: one name or a TOML array of names; read as one comma-separated string,
/// so that `device = ["cuda:0", "cuda:1"]` and `device = "cuda:0,cuda:1"` mean the same.
pub fn deserialize_device_list<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => s,
        OneOrMany::Many(v) => v.join(","),
    })
}

/// The JSON schema of a device field: a name or an array of names.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum DeviceField {
    One(String),
    Many(Vec<String>),
}

/// The name of a tch device, as the user would write it.
pub fn device_name(device: Device) -> String {
    match device {
        Device::Cpu => "cpu".into(),
        Device::Cuda(n) => format!("cuda:{n}"),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// Floating-point type of the inference weights and activations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// f16 on CUDA, f32 on the CPU.
    #[default]
    Auto,
    F32,
    F16,
    Bf16,
}

impl Precision {
    /// The names [`Precision::from_str`] reads (it takes a few aliases too: fp16, half, …).
    pub const NAMES: [&'static str; 4] = ["auto", "f32", "f16", "bf16"];
}

impl FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Precision> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Precision::Auto),
            "f32" | "fp32" | "float" => Ok(Precision::F32),
            "f16" | "fp16" | "half" => Ok(Precision::F16),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            _ => Err(Error::Config(format!("unknown precision `{s}` (use auto, f32, f16 or bf16)"))),
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::Auto => "auto",
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
        })
    }
}

impl Precision {
    /// The tensor kind used on `device`. Half precision is for CUDA only: on the CPU f16/bf16
    /// convolutions are slow or missing, so they are refused.
    pub fn resolve(self, device: Device) -> Result<Kind> {
        match (self, device) {
            (Precision::Auto, Device::Cuda(_)) => Ok(Kind::Half),
            (Precision::Auto, _) | (Precision::F32, _) => Ok(Kind::Float),
            (Precision::F16, Device::Cuda(_)) => Ok(Kind::Half),
            (Precision::Bf16, Device::Cuda(_)) => Ok(Kind::BFloat16),
            (p, d) => Err(Error::Unavailable(format!(
                "precision {p} is only supported on CUDA devices, not {}",
                device_name(d)
            ))),
        }
    }
}

/// Everything about how to run a network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    pub device: DeviceSpec,
    pub precision: Precision,
    /// libtorch intra-op threads for CPU inference (`None`: libtorch's default). This is a
    /// process-wide libtorch setting.
    pub cpu_threads: Option<usize>,
}

impl RunOptions {
    pub fn cpu() -> RunOptions {
        RunOptions { device: DeviceSpec::Cpu, precision: Precision::F32, cpu_threads: None }
    }

    /// Applies the thread setting and resolves device and kind. On CUDA it turns on cuDNN's
    /// benchmark mode (a process-wide setting): inference pads its batches to a few shapes and the
    /// trainer's batch is fixed, so each shape's fastest convolution is searched for once.
    pub fn resolve(&self) -> Result<(Device, Kind)> {
        if let Some(n) = self.cpu_threads {
            set_cpu_threads(n);
        }
        let device = self.device.resolve()?;
        if device.is_cuda() {
            tch::Cuda::cudnn_set_benchmark(true);
        }
        Ok((device, self.precision.resolve(device)?))
    }
}

/// Sets libtorch's intra-op threads for CPU work on the calling thread, and the default of threads
/// that have not run parallel CPU work yet. libtorch takes the default into each thread once, at
/// its first parallel work: the calling thread takes it first here, so that a later call on another
/// thread (an inference service's) does not change this one's count.
pub fn set_cpu_threads(n: usize) {
    default_cpu_threads();
    tch::get_num_threads();
    tch::set_num_threads(n.max(1) as i32);
}

/// libtorch's own choice of intra-op threads (the physical cores, or `OMP_NUM_THREADS`), as it was
/// before koma set any: the most that CPU inference is given when koma chooses.
pub fn default_cpu_threads() -> usize {
    static DEFAULT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| tch::get_num_threads().max(1) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_devices() {
        assert_eq!("cpu".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cpu);
        assert_eq!("auto".parse::<DeviceSpec>().unwrap(), DeviceSpec::Auto);
        assert_eq!("cuda".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(0));
        assert_eq!("CUDA:3".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(3));
        assert!("cuda:x".parse::<DeviceSpec>().is_err());
        assert!("tpu".parse::<DeviceSpec>().is_err());
        assert_eq!(DeviceSpec::Cuda(2).to_string(), "cuda:2");
    }

    #[test]
    fn parse_device_lists() {
        let list = "cuda:0, cuda:1".parse::<DeviceList>().unwrap();
        assert_eq!(list, DeviceList::Listed(vec![DeviceSpec::Cuda(0), DeviceSpec::Cuda(1)]));
        assert_eq!(list.to_string(), "cuda:0,cuda:1");
        assert_eq!("cpu".parse::<DeviceList>().unwrap(), DeviceList::Listed(vec![DeviceSpec::Cpu]));
        assert_eq!("cpu,cpu".parse::<DeviceList>().unwrap().resolve().unwrap(), vec![Device::Cpu, Device::Cpu]);
        assert_eq!("CUDA:ALL".parse::<DeviceList>().unwrap(), DeviceList::AllCuda);
        assert!("cuda:0,,cuda:1".parse::<DeviceList>().unwrap_err().to_string().contains("empty entry"));
        assert!("cpu,tpu".parse::<DeviceList>().is_err());
        if Cuda::is_available() {
            let mixed = "cuda:0,cpu".parse::<DeviceList>().unwrap().resolve().unwrap_err().to_string();
            assert!(mixed.contains("mixes"), "{mixed}");
            let twice = "cuda:0,cuda".parse::<DeviceList>().unwrap().resolve().unwrap_err().to_string();
            assert!(twice.contains("twice"), "{twice}");
        }
        if !Cuda::is_available() {
            assert!(DeviceList::AllCuda.resolve().unwrap_err().to_string().contains("cuda:all"));
        }
    }

    #[test]
    fn a_device_field_is_a_name_or_a_list_parsed_when_read() {
        #[derive(Deserialize, Serialize)]
        struct C {
            device: DeviceList,
        }
        let one: C = toml::from_str("device = \"cuda:1\"").unwrap();
        assert_eq!(one.device, DeviceSpec::Cuda(1).into());
        let many: C = toml::from_str("device = [\"cuda:0\", \"cuda:1\"]").unwrap();
        assert_eq!(many.device, DeviceList::Listed(vec![DeviceSpec::Cuda(0), DeviceSpec::Cuda(1)]));
        assert_eq!(toml::to_string(&many).unwrap().trim(), "device = \"cuda:0,cuda:1\"");
        assert!(toml::from_str::<C>("device = 3").is_err());
        let e = toml::from_str::<C>("device = \"tpu\"").err().unwrap().to_string();
        assert!(e.contains("tpu"), "{e}");
        assert_eq!(DeviceList::default().to_string(), "auto");
    }

    #[test]
    fn precisions() {
        assert_eq!("fp16".parse::<Precision>().unwrap(), Precision::F16);
        assert_eq!(Precision::Auto.resolve(Device::Cpu).unwrap(), Kind::Float);
        assert_eq!(Precision::Auto.resolve(Device::Cuda(0)).unwrap(), Kind::Half);
        assert_eq!(Precision::Bf16.resolve(Device::Cuda(0)).unwrap(), Kind::BFloat16);
        assert!(Precision::F16.resolve(Device::Cpu).is_err());
    }

    #[test]
    fn missing_cuda_is_a_clear_error() {
        if !Cuda::is_available() {
            let err = DeviceSpec::Cuda(0).resolve().unwrap_err().to_string();
            assert!(err.contains("CUDA is not available"), "{err}");
            assert_eq!(DeviceSpec::Auto.resolve().unwrap(), Device::Cpu);
        }
    }
}
