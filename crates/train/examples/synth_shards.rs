//! Writes shards of random games to try `koma train` without self-play:
//!
//! ```text
//! cargo run --release -p koma-train --example synth_shards -- DIR [GAMES] [min-label|random] [SEED]
//! koma train --data DIR --model tiny --steps 200 --device cpu
//! ```
//!
//! `min-label` targets are learnable (see koma_train::synth); `random` ones are noise.

use std::path::PathBuf;

use koma_train::synth::{random_games, SynthPolicy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or("usage: synth_shards DIR [GAMES] [min-label|random] [SEED]")?);
    let games: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(64);
    let policy = match args.next().as_deref() {
        None | Some("min-label") => SynthPolicy::MinLabel,
        Some("random") => SynthPolicy::Random,
        Some(other) => return Err(format!("unknown target kind {other:?}").into()),
    };
    let seed: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1);
    std::fs::create_dir_all(&dir)?;
    let mut samples = 0;
    for (i, chunk) in random_games(games, seed, policy).chunks(16).enumerate() {
        let path = dir.join(format!("synth-{seed}-{i:06}.h5"));
        samples += koma_data::write_shard(&path, chunk)?;
        println!("{}", path.display());
    }
    eprintln!("{games} games, {samples} samples");
    Ok(())
}
