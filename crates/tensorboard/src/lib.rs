//! koma-tensorboard: scalars in TensorBoard's event-file format, so that `tensorboard --logdir
//! RUN/tensorboard` shows a run's curves while it runs.
//!
//! An event file is a sequence of TFRecords (`u64` length, masked CRC-32C of the length, the
//! bytes, masked CRC-32C of the bytes), each holding one `tensorflow.Event` protobuf. We only
//! ever write three kinds of events, so they are encoded by hand here rather than through a
//! protobuf library:
//!
//! ```text
//! Event      { double wall_time = 1; int64 step = 2;
//!              oneof { string file_version = 3; Summary summary = 5; SessionLog session_log = 7; } }
//! Summary    { repeated Value value = 1; }
//! Value      { string tag = 1; float simple_value = 2; }
//! SessionLog { SessionStatus status = 1; }   START = 1
//! ```
//!
//! Every record is written and flushed on its own, so a crash loses at most the record in
//! flight (TensorBoard skips a truncated last record). A process writes its own file
//! (`events.out.tfevents.SECS.HOST.PID`); TensorBoard reads all files of a directory in name
//! order as one run, so a resumed run simply adds a file.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) table, built at compile time.
const CRC32C_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC-32C of `data`, the checksum TFRecord uses. A byte at a time: records are a few hundred
/// bytes, written every few seconds.
pub fn crc32c(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |crc, &b| CRC32C_TABLE[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8))
}

/// TFRecord's masked CRC: rotated and offset, so that a CRC stored inside checksummed data does
/// not look like a CRC of it.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    crc32c(data).rotate_right(15).wrapping_add(0xA282_EAD8)
}

/// `data` framed as one TFRecord.
pub fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    out
}

/// What an event carries besides its time and step.
#[derive(Clone, Copy, Debug)]
pub enum What<'a> {
    /// The first event of every file: `brain.Event:2`.
    FileVersion(&'a str),
    /// Scalars (tag, value).
    Scalars(&'a [(&'a str, f64)]),
    /// `SessionLog { status: START }`: TensorBoard drops the events of this run with a step ≥
    /// this event's step read before it (what a crashed and resumed writer logged twice).
    SessionStart,
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A field key: number and wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, ((field as u64) << 3) | wire as u64);
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    key(out, field, 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The `Event` protobuf.
pub fn event(wall_time: f64, step: i64, what: What<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    key(&mut out, 1, 1);
    out.extend_from_slice(&wall_time.to_le_bytes());
    if step != 0 {
        key(&mut out, 2, 0);
        varint(&mut out, step as u64); // int64: negative steps as ten-byte two's complement
    }
    match what {
        What::FileVersion(v) => bytes_field(&mut out, 3, v.as_bytes()),
        What::Scalars(values) => {
            let mut summary = Vec::new();
            for (tag, value) in values {
                let mut v = Vec::new();
                bytes_field(&mut v, 1, tag.as_bytes());
                key(&mut v, 2, 5);
                v.extend_from_slice(&(*value as f32).to_le_bytes());
                bytes_field(&mut summary, 1, &v);
            }
            bytes_field(&mut out, 5, &summary);
        }
        What::SessionStart => bytes_field(&mut out, 7, &[0x08, 0x01]),
    }
    out
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Is `name` an event file TensorBoard reads (`*tfevents*`)?
fn is_event_file(name: &std::ffi::OsStr) -> bool {
    name.to_string_lossy().contains("tfevents")
}

/// An event file being appended to.
pub struct ScalarWriter {
    path: PathBuf,
    file: File,
}

impl ScalarWriter {
    /// Creates `dir/events.out.tfevents.SECS.HOST.PID` (with `.N` added if that exists: never
    /// someone else's file) and writes its file-version event. `host` goes into the name as is.
    pub fn create(dir: &Path, host: &str) -> io::Result<ScalarWriter> {
        std::fs::create_dir_all(dir)?;
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let base = format!("events.out.tfevents.{secs}.{host}.{}", std::process::id());
        let mut n = 0;
        let (path, file) = loop {
            let name = if n == 0 { base.clone() } else { format!("{base}.{n}") };
            let path = dir.join(name);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => break (path, file),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n += 1,
                Err(e) => return Err(e),
            }
        };
        let mut writer = ScalarWriter { path, file };
        writer.write(0, What::FileVersion("brain.Event:2"))?;
        Ok(writer)
    }

    /// Like [`ScalarWriter::create`], for a series that is recomputed as a whole (ratings refit
    /// over all games): starts the new file with a session start at step 0, then removes the
    /// directory's other event files, so that the directory, and a TensorBoard already watching
    /// it, hold only the newest series.
    pub fn replace(dir: &Path, host: &str) -> io::Result<ScalarWriter> {
        let mut writer = ScalarWriter::create(dir, host)?;
        writer.write(0, What::SessionStart)?;
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path != writer.path && path.file_name().is_some_and(is_event_file) {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(writer)
    }

    /// Writes one event and flushes it.
    pub fn write(&mut self, step: i64, what: What<'_>) -> io::Result<()> {
        self.file.write_all(&record(&event(now(), step, what)))?;
        self.file.flush()
    }

    /// Writes `values` at `step` as one event.
    pub fn scalars(&mut self, step: i64, values: &[(&str, f64)]) -> io::Result<()> {
        self.write(step, What::Scalars(values))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A [`ScalarWriter`] whose failures never stop the stage that logs: TensorBoard files are a
/// view of the run, not part of it (metrics.jsonl, arena/*.jsonl are the record). The first
/// failure is logged as a warning and the log goes quiet.
pub struct ScalarLog {
    writer: Option<ScalarWriter>,
    dir: PathBuf,
}

impl ScalarLog {
    /// A log into `dir`, or one that writes nothing when `enabled` is false.
    pub fn open(dir: &Path, host: &str, enabled: bool) -> ScalarLog {
        ScalarLog::opened(dir, enabled, || ScalarWriter::create(dir, host))
    }

    /// A log replacing `dir`'s series (see [`ScalarWriter::replace`]).
    pub fn replace(dir: &Path, host: &str, enabled: bool) -> ScalarLog {
        ScalarLog::opened(dir, enabled, || ScalarWriter::replace(dir, host))
    }

    fn opened(dir: &Path, enabled: bool, open: impl FnOnce() -> io::Result<ScalarWriter>) -> ScalarLog {
        let mut log = ScalarLog { writer: None, dir: dir.to_path_buf() };
        if enabled {
            match open() {
                Ok(w) => log.writer = Some(w),
                Err(e) => log.failed(e),
            }
        }
        log
    }

    fn failed(&mut self, e: io::Error) {
        tracing::warn!("TensorBoard events in {}: {e}; no more are written by this process", self.dir.display());
        self.writer = None;
    }

    pub fn scalars(&mut self, step: i64, values: &[(&str, f64)]) {
        if let Some(w) = &mut self.writer {
            if let Err(e) = w.scalars(step, values) {
                self.failed(e);
            }
        }
    }

    /// See [`What::SessionStart`].
    pub fn session_start(&mut self, step: i64) {
        if let Some(w) = &mut self.writer {
            if let Err(e) = w.write(step, What::SessionStart) {
                self.failed(e);
            }
        }
    }

    /// The file written, while writing.
    pub fn path(&self) -> Option<&Path> {
        self.writer.as_ref().map(|w| w.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_published_check_values() {
        // The CRC catalogue's check value, and RFC 3720 (iSCSI) B.4's 32-byte vectors.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        assert_eq!(crc32c(&(0u8..32).collect::<Vec<_>>()), 0x46DD_794E);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn masked_crc_is_tfrecords() {
        // ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xA282EAD8, worked out by hand.
        assert_eq!(masked_crc32c(b"123456789"), 0xC78A_B0E5);
    }

    /// Reads a varint at `*at`.
    fn read_varint(b: &[u8], at: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = b[*at];
            *at += 1;
            v |= ((byte & 0x7F) as u64) << shift;
            if byte < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    #[test]
    fn a_scalar_event_decodes_by_hand() {
        let data = event(1.5, 300, What::Scalars(&[("train/loss", 2.25), ("lr", 0.125)]));
        let framed = record(&data);
        // The framing: length, its masked CRC, the data, its masked CRC.
        assert_eq!(u64::from_le_bytes(framed[..8].try_into().unwrap()), data.len() as u64);
        assert_eq!(u32::from_le_bytes(framed[8..12].try_into().unwrap()), masked_crc32c(&framed[..8]));
        assert_eq!(&framed[12..12 + data.len()], &data[..]);
        assert_eq!(u32::from_le_bytes(framed[12 + data.len()..].try_into().unwrap()), masked_crc32c(&data));
        assert_eq!(framed.len(), data.len() + 16);

        // The Event: wall_time (1, fixed64), step (2, varint), summary (5, bytes).
        assert_eq!(data[0], 0x09);
        assert_eq!(f64::from_le_bytes(data[1..9].try_into().unwrap()), 1.5);
        assert_eq!(data[9], 0x10);
        let mut at = 10;
        assert_eq!(read_varint(&data, &mut at), 300);
        assert_eq!(data[at], 0x2A);
        at += 1;
        let len = read_varint(&data, &mut at) as usize;
        assert_eq!(at + len, data.len());
        let summary = &data[at..];
        // Summary: two values (1, bytes), each tag (1, bytes) then simple_value (2, fixed32).
        let mut values = Vec::new();
        let mut i = 0;
        while i < summary.len() {
            assert_eq!(summary[i], 0x0A);
            i += 1;
            let n = read_varint(summary, &mut i) as usize;
            let v = &summary[i..i + n];
            i += n;
            assert_eq!(v[0], 0x0A);
            let tag_len = v[1] as usize;
            let tag = std::str::from_utf8(&v[2..2 + tag_len]).unwrap().to_string();
            assert_eq!(v[2 + tag_len], 0x15);
            let value = f32::from_le_bytes(v[3 + tag_len..7 + tag_len].try_into().unwrap());
            assert_eq!(7 + tag_len, v.len());
            values.push((tag, value));
        }
        assert_eq!(values, [("train/loss".to_string(), 2.25f32), ("lr".to_string(), 0.125)]);
    }

    #[test]
    fn file_version_and_session_start_encode_as_the_protobuf_would() {
        let v = event(0.0, 0, What::FileVersion("brain.Event:2"));
        let mut expected = vec![0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x1A, 13];
        expected.extend_from_slice(b"brain.Event:2");
        assert_eq!(v, expected);
        // step 129 is a two-byte varint; session_log (7) holds status (1) = START (1).
        let s = event(0.0, 129, What::SessionStart);
        assert_eq!(&s[9..], &[0x10, 0x81, 0x01, 0x3A, 0x02, 0x08, 0x01]);
    }

    #[test]
    fn writers_never_share_a_file_and_replace_keeps_only_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = ScalarWriter::create(dir.path(), "host").unwrap();
        let b = ScalarWriter::create(dir.path(), "host").unwrap();
        assert_ne!(a.path(), b.path());
        a.scalars(1, &[("x", 1.0)]).unwrap();
        let first = std::fs::read(a.path()).unwrap();
        let header = record(&event(0.0, 0, What::FileVersion("brain.Event:2")));
        assert_eq!(first.len(), header.len() + record(&event(0.0, 1, What::Scalars(&[("x", 1.0)]))).len());
        std::fs::write(dir.path().join("notes.txt"), "kept").unwrap();
        let c = ScalarWriter::replace(dir.path(), "host").unwrap();
        let mut left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
        left.sort();
        let mut expected = vec![c.path().to_path_buf(), dir.path().join("notes.txt")];
        expected.sort();
        assert_eq!(left, expected);
    }

    #[test]
    fn a_log_that_cannot_write_warns_and_carries_on() {
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, "not a directory").unwrap();
        let mut log = ScalarLog::open(&blocked.join("train"), "host", true);
        assert!(log.path().is_none());
        log.scalars(1, &[("x", 1.0)]);
        let mut off = ScalarLog::open(&dir.path().join("off"), "host", false);
        off.scalars(1, &[("x", 1.0)]);
        assert!(!dir.path().join("off").exists());
    }
}
