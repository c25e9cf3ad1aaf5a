//! How koma prints an error with its causes.
//!
//! Every koma error's message is complete on its own ("writing X: No space left on device"), and
//! its `source()` still hands the cause on, so a program can reach the `io::Error` beneath
//! (its kind, a full disk) however many layers wrap it. Printing the chain naively would then say
//! the cause twice; [`Report`] prints each link once: a cause whose text its parent's message
//! already contains (`X (the match stopped after 3 games)` contains `X`) is not repeated.

use std::error::Error;
use std::fmt;

/// An error and its causes on one line: `what failed: why: the system's reason`.
pub struct Report<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.0.to_string();
        f.write_str(&shown)?;
        let mut cause = self.0.source();
        while let Some(error) = cause {
            let text = error.to_string();
            let text = text.trim_end();
            if !shown.contains(text) {
                write!(f, ": {text}")?;
                shown = text.to_string();
            }
            cause = error.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[derive(Debug)]
    struct Wrapped {
        context: &'static str,
        includes_cause: bool,
        source: io::Error,
    }

    impl fmt::Display for Wrapped {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self.includes_cause {
                true => write!(f, "{}: {}", self.context, self.source),
                false => f.write_str(self.context),
            }
        }
    }

    /// A cause first, then a note after it: `X (the match stopped after 3 games)`.
    #[derive(Debug)]
    struct Suffixed(io::Error);

    impl fmt::Display for Suffixed {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{} (3 games were written)", self.0)
        }
    }

    impl Error for Suffixed {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.source)
        }
    }

    fn full_disk() -> io::Error {
        io::Error::new(io::ErrorKind::StorageFull, "No space left on device")
    }

    #[test]
    fn a_cause_the_message_already_says_is_not_repeated() {
        let e = Wrapped { context: "writing a.h5", includes_cause: true, source: full_disk() };
        assert_eq!(Report(&e).to_string(), "writing a.h5: No space left on device");
    }

    #[test]
    fn a_cause_the_message_leaves_out_is_appended() {
        let e = Wrapped { context: "writing a.h5", includes_cause: false, source: full_disk() };
        assert_eq!(Report(&e).to_string(), "writing a.h5: No space left on device");
    }

    #[test]
    fn a_cause_inside_the_message_or_with_a_trailing_newline_is_not_repeated() {
        let e = Suffixed(full_disk());
        assert_eq!(Report(&e).to_string(), "No space left on device (3 games were written)");
        // A parser's message often ends with a newline, which its parent may trim.
        let e = Wrapped {
            context: "p.toml",
            includes_cause: true,
            source: io::Error::other("TOML parse error at line 1\n  |\n1 | x =\n"),
        };
        assert_eq!(Report(&e).to_string(), e.to_string(), "the parse error once");
    }

    #[test]
    fn a_chain_of_three_prints_each_link_once() {
        let inner = Wrapped { context: "shard 3", includes_cause: true, source: full_disk() };
        let outer = io::Error::other(inner);
        // io::Error::other displays its payload and returns the payload's source chain.
        assert_eq!(Report(&outer).to_string(), "shard 3: No space left on device");
    }
}
