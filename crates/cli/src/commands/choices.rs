//! Flags with a closed set of values: clap lists the values in `--help` and refuses anything
//! else before a command starts, with the names the library gives them (so the two never drift).
//! The library's `FromStr` does the parsing, so its aliases and case-insensitivity still work.

use std::ffi::OsStr;
use std::marker::PhantomData;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::error::ErrorKind;
use koma_nn::Precision;
use koma_pipeline::players::PlayRoot;
use koma_shogi::rules::{ImpasseRule, MaxMovesRule};

#[derive(Clone)]
pub struct OneOf<T> {
    names: Vec<&'static str>,
    value: PhantomData<fn() -> T>,
}

/// A parser for one of `names`, turned into `T` by its `FromStr`.
pub fn one_of<T>(names: impl IntoIterator<Item = &'static str>) -> OneOf<T> {
    OneOf { names: names.into_iter().collect(), value: PhantomData }
}

/// `--impasse`: the impasse rules by their option names.
pub fn impasse_rule() -> OneOf<ImpasseRule> {
    one_of(ImpasseRule::ALL.map(ImpasseRule::name))
}

/// `--max-moves-rule`: what happens at the move limit.
pub fn max_moves_rule() -> OneOf<MaxMovesRule> {
    one_of(MaxMovesRule::ALL.map(MaxMovesRule::name))
}

/// `--root`: how checkpoints search the root in a match.
pub fn play_root() -> OneOf<PlayRoot> {
    one_of(PlayRoot::ALL.map(PlayRoot::name))
}

/// `--precision`: the network's floating-point type.
pub fn precision() -> OneOf<Precision> {
    one_of(Precision::NAMES)
}

impl<T> TypedValueParser for OneOf<T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
    T::Err: std::fmt::Display,
{
    type Value = T;

    fn parse_ref(&self, cmd: &clap::Command, arg: Option<&clap::Arg>, value: &OsStr) -> Result<T, clap::Error> {
        if let Some(parsed) = value.to_str().and_then(|text| text.parse::<T>().ok()) {
            return Ok(parsed);
        }
        // Not a name: clap's own error, which lists the names.
        let name = PossibleValuesParser::new(self.names.clone()).parse_ref(cmd, arg, value)?;
        name.parse::<T>().map_err(|e| clap::Error::raw(ErrorKind::InvalidValue, e.to_string()).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.names.iter().map(|name| PossibleValue::new(*name))))
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[arg(long, default_value = "csa27", value_parser = impasse_rule())]
        impasse: ImpasseRule,
    }

    #[test]
    fn names_are_listed_and_parsed_and_others_refused() {
        assert_eq!(Cli::try_parse_from(["koma", "--impasse", "jsa24"]).unwrap().impasse, ImpasseRule::Jsa24);
        assert_eq!(Cli::try_parse_from(["koma"]).unwrap().impasse, ImpasseRule::Csa27);
        // The library's aliases and case-insensitivity still hold.
        assert_eq!(Cli::try_parse_from(["koma", "--impasse", "Agreement"]).unwrap().impasse, ImpasseRule::Agreement);
        let error = Cli::try_parse_from(["koma", "--impasse", "jsa25"]).unwrap_err().to_string();
        assert!(
            error.contains("jsa25")
                && error.contains("[possible values: csa27, jsa24, try, try-unconditional, jishogi, none]"),
            "{error}"
        );
        let help = Cli::command().render_help().to_string();
        assert!(help.contains("[possible values: csa27, jsa24, try, try-unconditional, jishogi, none]"), "{help}");
    }
}
