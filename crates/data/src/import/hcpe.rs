//! dlshogi hcpe files to samples, and samples back to hcpe.
//!
//! An hcpe record is one position with its best move, evaluation and game result, with no game
//! around it. Each becomes a sample: the best move as a one-hot policy target, the result from
//! the side to move, and the evaluation as a root value `[σ(eval/scale), 0, σ(−eval/scale)]`
//! (dlshogi's `score_to_value`, scale 756.0864962951762 by default), so that the trainer's
//! `result_weight` mixes result and evaluation as dlshogi weights them (`result_weight` = 1 − `val_lambda`). The ply is unknown
//! ([`crate::PLY_UNKNOWN`]).

use std::io::{BufWriter, Read, Write};
use std::path::Path;

use koma_base::durable::{DurableError, StagedFile, Step};
use koma_shogi::Color;

use crate::hcp::{
    decode_hcp, encode_hcp, eval_to_wdl, game_result_code, move_from_move16, move_to_move16, wdl_to_eval, HcpeRecord,
    HCPE_BYTES,
};
use crate::packed::PackedPosition;
use crate::sample::{flags, result_for, Sample, PLY_UNKNOWN};

/// The sample of one hcpe record, or what is wrong with it.
pub fn hcpe_to_sample(record: &HcpeRecord, eval_scale: f64) -> Result<Sample, String> {
    let pos = decode_hcp(&record.hcp).map_err(|e| e.to_string())?;
    let winner = record.winner().map_err(|code| format!("gameResult {code} (expected 0, 1 or 2)"))?;
    let played = match record.best_move16 {
        0 => None,
        code => match move_from_move16(code) {
            Some(m) if pos.is_legal(m) => Some(m),
            Some(m) => return Err(format!("bestMove16 {code:#06x} ({}) is illegal in {}", m.to_usi(), pos.to_sfen())),
            None => return Err(format!("bestMove16 {code:#06x} is not a move")),
        },
    };
    let position = PackedPosition::pack(&pos).map_err(|e| e.to_string())?;
    Ok(Sample {
        position,
        played,
        policy: played.map(|m| vec![(m, 1.0)]).unwrap_or_default(),
        root_wdl: eval_to_wdl(record.eval as f64, eval_scale),
        result: result_for(pos.side_to_move(), winner),
        ply: PLY_UNKNOWN,
        flags: flags::FULL_SEARCH | flags::IMPORTED,
    })
}

/// The hcpe record of a sample: its position, the move played (else the policy's largest
/// entry, else 0), the root value as an evaluation (0 when the sample has none) and the result.
pub fn sample_to_hcpe(sample: &Sample, eval_scale: f64) -> Result<HcpeRecord, String> {
    let pos = sample.position.unpack().map_err(|e| e.to_string())?;
    let hcp = encode_hcp(&pos).map_err(|e| e.to_string())?;
    let best = sample
        .played
        .or_else(|| sample.policy.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)).map(|(m, _)| m))
        .map_or(0, move_to_move16);
    let us = pos.side_to_move();
    let winner: Option<Color> = match sample.result {
        1 => Some(us),
        -1 => Some(!us),
        _ => None,
    };
    Ok(HcpeRecord {
        hcp,
        eval: wdl_to_eval(sample.root_wdl, eval_scale).unwrap_or(0),
        best_move16: best,
        game_result: game_result_code(winner),
        dummy: 0,
    })
}

/// Reads the complete records of an hcpe stream, calling `each(index, record)`; returns the
/// number of complete records and the length of a trailing partial one (0 when none).
pub fn read_hcpe<R: Read>(
    mut reader: R,
    mut each: impl FnMut(usize, &HcpeRecord) -> bool,
) -> std::io::Result<(usize, usize)> {
    const CHUNK: usize = 4096;
    let mut buf = vec![0u8; HCPE_BYTES * CHUNK];
    let mut filled = 0;
    let mut index = 0;
    loop {
        let n = reader.read(&mut buf[filled..])?;
        if n == 0 {
            return Ok((index, filled));
        }
        filled += n;
        let whole = filled / HCPE_BYTES;
        for k in 0..whole {
            let bytes: &[u8; HCPE_BYTES] = buf[k * HCPE_BYTES..(k + 1) * HCPE_BYTES].try_into().expect("38 bytes");
            if !each(index, &HcpeRecord::from_bytes(bytes)) {
                return Ok((index + 1, 0));
            }
            index += 1;
        }
        buf.copy_within(whole * HCPE_BYTES..filled, 0);
        filled -= whole * HCPE_BYTES;
    }
}

/// Writes hcpe records to `path` durably (`koma_base::durable`): the file appears whole when
/// [`HcpeWriter::finish`] succeeds; an error or a drop before that leaves no file and no temporary.
pub struct HcpeWriter {
    out: BufWriter<std::fs::File>,
    staged: StagedFile,
    pub records: usize,
}

impl HcpeWriter {
    pub fn create(path: &Path) -> Result<HcpeWriter, DurableError> {
        let staged = StagedFile::new(path);
        let out = BufWriter::new(staged.create()?);
        Ok(HcpeWriter { out, staged, records: 0 })
    }

    pub fn write(&mut self, record: &HcpeRecord) -> Result<(), DurableError> {
        self.staged.check(Step::Write)?;
        self.out.write_all(&record.to_bytes()).map_err(|e| self.staged.error(Step::Write, e))?;
        self.records += 1;
        Ok(())
    }

    pub fn finish(self) -> Result<usize, DurableError> {
        let HcpeWriter { out, staged, records } = self;
        staged.publish_buffered(out)?;
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hcp::DLSHOGI_EVAL_SCALE;
    use koma_shogi::{Move, Position};

    #[test]
    fn sample_hcpe_round_trip() {
        let mut pos = Position::startpos();
        let m = Move::from_usi("7g7f").unwrap();
        let rec = HcpeRecord {
            hcp: encode_hcp(&pos).unwrap(),
            eval: -123,
            best_move16: move_to_move16(m),
            game_result: 2,
            dummy: 0,
        };
        let s = hcpe_to_sample(&rec, DLSHOGI_EVAL_SCALE).unwrap();
        assert_eq!((s.played, s.result, s.ply), (Some(m), -1, PLY_UNKNOWN));
        assert!(s.root_wdl[0] < 0.5);
        assert_eq!(sample_to_hcpe(&s, DLSHOGI_EVAL_SCALE).unwrap(), rec);

        // An illegal best move and a bad result code are refused with a message.
        pos.do_move(m);
        let bad = HcpeRecord { hcp: encode_hcp(&pos).unwrap(), ..rec };
        let err = hcpe_to_sample(&bad, DLSHOGI_EVAL_SCALE).unwrap_err();
        assert!(err.contains("illegal"), "{err}");
        let bad = HcpeRecord { game_result: 7, ..rec };
        assert!(hcpe_to_sample(&bad, DLSHOGI_EVAL_SCALE).unwrap_err().contains("gameResult 7"));
    }

    #[test]
    fn reader_reports_a_partial_tail() {
        let rec = HcpeRecord {
            hcp: encode_hcp(&Position::startpos()).unwrap(),
            eval: 5,
            best_move16: 0,
            game_result: 0,
            dummy: 0,
        };
        let mut bytes: Vec<u8> = (0..5000).flat_map(|_| rec.to_bytes()).collect();
        bytes.extend_from_slice(&[1, 2, 3]);
        let mut seen = 0;
        let (n, tail) = read_hcpe(&bytes[..], |i, r| {
            assert_eq!((i, r), (seen, &rec));
            seen += 1;
            true
        })
        .unwrap();
        assert_eq!((n, tail, seen), (5000, 3, 5000));
    }
}
