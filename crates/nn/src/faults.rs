//! Fault injection for the reliability tests (docs/reliability.md): `KOMA_FAULT` makes the
//! inference forward pass fail the way a broken GPU or a diverged network would, so that tests can
//! run the real binaries and check that the failure reaches the top.
//!
//! `KOMA_FAULT=forward-error@N`: the N-th forward pass of the process (1-based) and every later
//! one fail with an error. `KOMA_FAULT=nan@N`: from the N-th on, the outputs hold a NaN.
//! `KOMA_FAULT=hang@N`: the N-th never returns, as a call into a hung GPU does. Unset (always,
//! outside tests): no effect beyond one counter increment per batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    ForwardError,
    NaN,
    Hang,
}

static PLAN: OnceLock<Option<(Fault, u64)>> = OnceLock::new();
static FORWARDS: AtomicU64 = AtomicU64::new(0);

fn plan() -> Option<(Fault, u64)> {
    *PLAN.get_or_init(|| {
        let text = std::env::var("KOMA_FAULT").ok()?;
        let parsed = parse(&text);
        match parsed {
            Some(plan) => tracing::warn!("KOMA_FAULT={text}: injecting {:?} from forward pass {}", plan.0, plan.1),
            None => tracing::warn!("KOMA_FAULT={text:?} is not forward-error@N, nan@N or hang@N; ignored"),
        }
        parsed
    })
}

fn parse(text: &str) -> Option<(Fault, u64)> {
    let (kind, at) = text.trim().split_once('@')?;
    let fault = match kind {
        "forward-error" => Fault::ForwardError,
        "nan" => Fault::NaN,
        "hang" => Fault::Hang,
        _ => return None,
    };
    Some((fault, at.parse().ok().filter(|&n| n >= 1)?))
}

/// Counts a forward pass; the fault it must show, if any. A hang does not return.
pub(crate) fn next_forward() -> Option<Fault> {
    let (fault, at) = plan()?;
    let fault = (FORWARDS.fetch_add(1, Ordering::Relaxed) + 1 >= at).then_some(fault)?;
    if fault == Fault::Hang {
        tracing::warn!("KOMA_FAULT: this forward pass hangs, as a call into a hung GPU would");
        loop {
            std::thread::park();
        }
    }
    Some(fault)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms_only() {
        assert_eq!(parse("forward-error@3"), Some((Fault::ForwardError, 3)));
        assert_eq!(parse("nan@1"), Some((Fault::NaN, 1)));
        assert_eq!(parse("hang@7"), Some((Fault::Hang, 7)));
        assert_eq!(parse("nan@0"), None);
        assert_eq!(parse("nan"), None);
        assert_eq!(parse("oom@2"), None);
    }
}
