//! Runs df-pn on `koma bench mate`'s problem set with the bench's limits (300 problems, seed 1,
//! 31 plies, 100 000 nodes) and prints one line per problem: index, outcome, nodes, SFEN. For
//! comparing with cshogi's df-pn problem by problem:
//! `cargo run --release -p koma-mate --example mate_gap [problems seed plies nodes]`; `MIB=16`
//! sets the table size, `ONLY=3,17` runs only those problems.

use koma_mate::problems::random_problems;
use koma_mate::{DfPn, Limits, Outcome};

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("numeric arguments")).collect();
    let arg = |i: usize, default: u64| args.get(i).copied().unwrap_or(default);
    let problems = random_problems(arg(0, 300) as usize, arg(1, 1));
    let limits = Limits { max_plies: arg(2, 31) as u32, max_nodes: arg(3, 100_000), ..Limits::default() };
    let mib = std::env::var("MIB")
        .map(|v| v.parse().expect("MIB: the table size in MiB"))
        .unwrap_or(koma_mate::DEFAULT_TABLE_MIB);
    let mut solver = DfPn::new(mib);
    let start = std::time::Instant::now();
    let (mut mates, mut nodes) = (0, 0);
    // `ONLY=3,17` runs only those problems.
    let only: Option<Vec<usize>> =
        std::env::var("ONLY").ok().map(|v| v.split(',').map(|i| i.parse().expect("ONLY: problem indices")).collect());
    for (i, pos) in problems.iter().enumerate() {
        if only.as_ref().is_some_and(|o| !o.contains(&i)) {
            continue;
        }
        let outcome = solver.search(pos, &limits);
        let name = match &outcome {
            Outcome::Mate(line) => {
                mates += 1;
                format!("mate{}", line.len())
            }
            Outcome::NoMate => "nomate".into(),
            Outcome::NoMateWithin => "nomate_within".into(),
            Outcome::Unknown => "unknown".into(),
        };
        nodes += solver.nodes();
        println!("{i}\t{name}\t{}\t{}", solver.nodes(), pos.to_sfen());
    }
    eprintln!("{mates} mates, {nodes} nodes, {:.2} s", start.elapsed().as_secs_f64());
}
