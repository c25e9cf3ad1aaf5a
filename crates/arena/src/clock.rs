//! Game clocks. A time control is main time, then either byoyomi (a fixed time per move once the
//! main time is spent, lost when unused) or a Fischer increment (added after each move), or
//! neither (sudden death). The arena keeps each side's clock with wall time around the player's
//! turn; a move that takes longer than what is left of the main time plus byoyomi, plus a small
//! margin for pipe and process latency, loses on time.

use std::time::Duration;

use koma_shogi::Color;

use crate::error::SpecError;

/// Main time plus byoyomi or increment. Byoyomi and increment together are refused: USI has one
/// `byoyomi` for both sides and engines read it and `binc`/`winc` as alternatives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeControl {
    pub main: Duration,
    pub byoyomi: Duration,
    pub increment: Duration,
}

impl TimeControl {
    /// Checks that the control gives some time, does not mix byoyomi and increment, and gives
    /// main time with an increment.
    pub fn new(main: Duration, byoyomi: Duration, increment: Duration) -> Result<TimeControl, SpecError> {
        if !byoyomi.is_zero() && !increment.is_zero() {
            return Err(SpecError::ByoyomiAndIncrement {
                byoyomi: format_duration(byoyomi),
                increment: format_duration(increment),
            });
        }
        if main.is_zero() && !increment.is_zero() {
            return Err(SpecError::IncrementWithoutMainTime(format_duration(increment)));
        }
        if main.is_zero() && byoyomi.is_zero() && increment.is_zero() {
            return Err(SpecError::NoTime);
        }
        Ok(TimeControl { main, byoyomi, increment })
    }

    /// Byoyomi only: what `--byoyomi MS` has always meant for USI engines.
    pub fn byoyomi_only(byoyomi: Duration) -> TimeControl {
        TimeControl { main: Duration::ZERO, byoyomi, increment: Duration::ZERO }
    }
}

impl std::fmt::Display for TimeControl {
    /// `60s + 1s byoyomi`, `60s + 2s increment`, `60s sudden death`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let main = format_duration(self.main);
        if !self.byoyomi.is_zero() {
            write!(f, "{main} + {} byoyomi", format_duration(self.byoyomi))
        } else if !self.increment.is_zero() {
            write!(f, "{main} + {} increment", format_duration(self.increment))
        } else {
            write!(f, "{main} sudden death")
        }
    }
}

/// Parses a duration: `1500ms`, `1.5s`, `2m`, `1h`, or a bare number of milliseconds (what
/// `--byoyomi` has always taken).
pub fn parse_duration(text: &str) -> Result<Duration, SpecError> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "" | "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(SpecError::DurationUnit { text: text.into(), unit: other.into() }),
    };
    let value: f64 = number.parse().map_err(|_| SpecError::DurationNumber { text: text.into() })?;
    let seconds = value * scale;
    if !seconds.is_finite() || seconds > 1e9 {
        return Err(SpecError::DurationTooLong { text: text.into() });
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `1.5s`, `250ms`, `0s`: short, and parsed back by [`parse_duration`].
pub fn format_duration(d: Duration) -> String {
    if d.subsec_millis() != 0 && d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        let s = d.as_secs_f64();
        if s.fract() == 0.0 {
            format!("{s:.0}s")
        } else {
            format!("{s}s")
        }
    }
}

/// A player's time control and the grace the arena allows beyond it for latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub control: TimeControl,
    pub margin: Duration,
}

/// One side's clock during a game.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    pub control: TimeControl,
    /// Main time left (plus the increments earned).
    pub remaining: Duration,
}

/// A move took longer than its clock allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overrun {
    pub took: Duration,
    /// Main time left plus byoyomi at the start of the move.
    pub allowed: Duration,
    pub margin: Duration,
}

impl std::fmt::Display for Overrun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "took {:.3} s with {:.3} s allowed (+{:.3} s margin)",
            self.took.as_secs_f64(),
            self.allowed.as_secs_f64(),
            self.margin.as_secs_f64()
        )
    }
}

impl Clock {
    pub fn new(control: TimeControl) -> Clock {
        Clock { control, remaining: control.main }
    }

    /// How long the next move may take: the main time left plus byoyomi. (An increment is added
    /// after the move, so it is not available during it.)
    pub fn allowed(&self) -> Duration {
        self.remaining + self.control.byoyomi
    }

    /// Charges a move that took `took`. Within `allowed() + margin` the move stands: the main
    /// time pays first, byoyomi covers the rest (and is lost when unused), a move inside the
    /// margin leaves the main time at zero, and the increment is added afterwards. Beyond it,
    /// the move loses on time and the clock is left as it was.
    pub fn charge(&mut self, took: Duration, margin: Duration) -> Result<(), Overrun> {
        let allowed = self.allowed();
        if took > allowed + margin {
            return Err(Overrun { took, allowed, margin });
        }
        self.remaining = self.remaining.saturating_sub(took) + self.control.increment;
        Ok(())
    }
}

/// Both clocks as the side to move sees them: what a USI `go` carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnClock {
    pub side: Color,
    pub black: Clock,
    pub white: Clock,
}

impl TurnClock {
    pub fn own(&self) -> &Clock {
        if self.side == Color::Black {
            &self.black
        } else {
            &self.white
        }
    }

    /// `btime B wtime W byoyomi Y`, or `btime B wtime W binc I winc J` when the side to move has
    /// an increment. Sudden death sends `byoyomi 0`.
    pub fn go_arguments(&self) -> String {
        let ms = |d: Duration| d.as_millis();
        let times = format!("btime {} wtime {}", ms(self.black.remaining), ms(self.white.remaining));
        if self.own().control.increment.is_zero() {
            format!("{times} byoyomi {}", ms(self.own().control.byoyomi))
        } else {
            format!("{times} binc {} winc {}", ms(self.black.control.increment), ms(self.white.control.increment))
        }
    }

    /// How long an in-process search should think: a share of the main time (a thirtieth, at
    /// most a quarter) plus the increment, or all of the byoyomi, less a tenth and 20 ms kept
    /// back for the search's last batch and the latency. A simple rule: `koma usi`'s time
    /// management (crates/engine/src/time.rs) is the careful one.
    pub fn move_budget(&self) -> Duration {
        let own = self.own();
        let share = (own.remaining / 30 + own.control.increment).min(own.remaining / 4);
        let budget = share + own.control.byoyomi;
        budget.saturating_sub(budget / 10 + Duration::from_millis(20)).max(Duration::from_millis(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn control(main: u64, byoyomi: u64, increment: u64) -> TimeControl {
        TimeControl::new(ms(main), ms(byoyomi), ms(increment)).unwrap()
    }

    #[test]
    fn byoyomi_is_used_after_the_main_time_and_lost_when_unused() {
        let mut clock = Clock::new(control(1000, 500, 0));
        assert_eq!(clock.allowed(), ms(1500));
        clock.charge(ms(300), ms(50)).unwrap();
        assert_eq!(clock.remaining, ms(700));
        // 1200 ms: the 700 left, then 500 of byoyomi.
        clock.charge(ms(1200), ms(50)).unwrap();
        assert_eq!(clock.remaining, ms(0));
        assert_eq!(clock.allowed(), ms(500));
        // Unused byoyomi does not carry over.
        clock.charge(ms(100), ms(50)).unwrap();
        assert_eq!(clock.allowed(), ms(500));
        // Inside the margin the move stands; past it, it loses.
        clock.charge(ms(540), ms(50)).unwrap();
        let overrun = clock.charge(ms(551), ms(50)).unwrap_err();
        assert_eq!(overrun, Overrun { took: ms(551), allowed: ms(500), margin: ms(50) });
        assert!(overrun.to_string().contains("took 0.551 s with 0.500 s allowed"), "{overrun}");
    }

    #[test]
    fn the_increment_is_added_after_the_move() {
        let mut clock = Clock::new(control(1000, 0, 200));
        assert_eq!(clock.allowed(), ms(1000), "the increment is not available during the move");
        // 1000 − 400 + 200.
        clock.charge(ms(400), ms(0)).unwrap();
        assert_eq!(clock.remaining, ms(800));
        clock.charge(ms(800), ms(0)).unwrap();
        assert_eq!(clock.remaining, ms(200));
        assert!(clock.charge(ms(201), ms(0)).is_err());
    }

    #[test]
    fn sudden_death_loses_when_the_main_time_is_gone() {
        let mut clock = Clock::new(control(1000, 0, 0));
        clock.charge(ms(990), ms(20)).unwrap();
        assert_eq!(clock.remaining, ms(10));
        // 25 ms: 10 left plus 20 of margin covers it, and the clock stays at zero.
        clock.charge(ms(25), ms(20)).unwrap();
        assert_eq!(clock.remaining, ms(0));
        assert!(clock.charge(ms(21), ms(20)).is_err());
        assert!(clock.charge(ms(20), ms(20)).is_ok());
    }

    #[test]
    fn go_arguments_follow_usi() {
        let black = Clock { control: control(60_000, 1000, 0), remaining: ms(59_000) };
        let white = Clock::new(control(60_000, 1000, 0));
        let turn = TurnClock { side: Color::White, black, white };
        assert_eq!(turn.go_arguments(), "btime 59000 wtime 60000 byoyomi 1000");
        let inc = Clock::new(control(10_000, 0, 2000));
        let turn = TurnClock { side: Color::Black, black: inc, white: inc };
        assert_eq!(turn.go_arguments(), "btime 10000 wtime 10000 binc 2000 winc 2000");
        let sudden = Clock::new(control(5000, 0, 0));
        let turn = TurnClock { side: Color::Black, black: sudden, white: sudden };
        assert_eq!(turn.go_arguments(), "btime 5000 wtime 5000 byoyomi 0");
    }

    #[test]
    fn move_budgets_stay_inside_the_clock() {
        for c in [control(60_000, 1000, 0), control(10_000, 0, 2000), control(5000, 0, 0), control(0, 300, 0)] {
            let mut clock = Clock::new(c);
            for _ in 0..200 {
                if clock.allowed() < ms(50) {
                    break; // sudden death runs out: any player loses on time then
                }
                let turn = TurnClock { side: Color::Black, black: clock, white: clock };
                let budget = turn.move_budget();
                assert!(budget < clock.allowed(), "{c}: {budget:?}");
                if clock.charge(budget, ms(0)).is_err() {
                    panic!("{c}: a budget of {budget:?} lost on time");
                }
            }
        }
    }

    #[test]
    fn durations_and_controls_parse_and_refuse_clearly() {
        assert_eq!(parse_duration("1500ms").unwrap(), ms(1500));
        assert_eq!(parse_duration("1.5s").unwrap(), ms(1500));
        assert_eq!(parse_duration("2m").unwrap(), ms(120_000));
        assert_eq!(parse_duration("300").unwrap(), ms(300), "bare numbers are milliseconds");
        assert!(parse_duration("3 parsecs").unwrap_err().to_string().contains("unknown unit"));
        assert!(parse_duration("s").unwrap_err().to_string().contains("expected a number"));
        assert!(parse_duration("1e99s").is_err());
        for d in [ms(0), ms(250), ms(1500), ms(60_000)] {
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
        assert!(TimeControl::new(ms(1), ms(1), ms(1)).unwrap_err().to_string().contains("one or the other"));
        assert!(TimeControl::new(ms(0), ms(0), ms(0)).unwrap_err().to_string().contains("needs some"));
        assert!(TimeControl::new(ms(0), ms(0), ms(500)).unwrap_err().to_string().contains("without main time"));
        assert_eq!(control(60_000, 1000, 0).to_string(), "60s + 1s byoyomi");
        assert_eq!(control(5000, 0, 0).to_string(), "5s sudden death");
    }
}
