//! koma's one random number generator, for search, self-play, the arena and the trainer alike:
//! xoshiro256** from `rand_xoshiro`, seeded through SplitMix64 by `SeedableRng::seed_from_u64`, so
//! a seed reproduces a run exactly. Its whole state is four words, serialisable (serde) so that
//! the trainer's `--resume` continues the same stream. Algorithm and seeding are those of the
//! generator koma once wrote by hand, so training states saved by it still load and continue its
//! stream of numbers; the batches drawn from it differ from the old binary's (rand maps numbers
//! to indices its own way), and stay exact on resume from here on.
//! Numbers are drawn through `rand::RngExt` and `rand_distr`; the root noises search needs live
//! with the search (koma-mcts).

pub type Rng = rand_xoshiro::Xoshiro256StarStar;

#[cfg(test)]
mod tests {
    use rand::{Rng as _, SeedableRng};

    use super::*;

    #[test]
    fn same_stream_as_the_generator_koma_wrote_by_hand() {
        // Values of koma's own xoshiro256** with SplitMix64 seeding, before it moved to rand.
        let mut rng = Rng::seed_from_u64(7);
        assert_eq!(
            [rng.next_u64(), rng.next_u64(), rng.next_u64()],
            [0xb358_faf7_4ef9_765a, 0x475c_3d96_4f48_2cd2, 0xd6f1_d349_952c_7996]
        );
    }
}
