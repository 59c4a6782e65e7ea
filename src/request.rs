//! Strict parsing of command arguments into typed requests. Arguments are
//! hostile bytes: every failure is an error that names the argument at fault.

use std::ops::Deref;

use crate::error::SwlError;
use crate::window::{OverLimit, Window, MAX_COST, MAX_MS, MAX_WINDOWS};

/// The moment a request happens at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Now {
    /// `*`: the server's clock, Unix time in milliseconds.
    ServerClock,
    /// An explicit `now_ms`.
    At(u64),
}

/// Which command the arguments are for: PENALIZE and FORCE belong to
/// SWL.CHECK only, OLDEST to SWL.PEEK only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Check,
    Peek,
    Refund,
}

/// `key window_ms limit now_ms [COST n] [WINDOW window_ms limit]...
/// [PENALIZE | FORCE | OLDEST]`, without the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The first window, then each WINDOW option in order; never empty.
    pub windows: Vec<Window>,
    pub now: Now,
    pub cost: u64,
    /// What a request that does not fit does to the log: PENALIZE or
    /// FORCE (SWL.CHECK only, one of them at most once).
    pub over_limit: OverLimit,
    /// Reply also when the oldest entry in the reply's window leaves it
    /// (SWL.PEEK only).
    pub oldest: bool,
}

/// Parses the whole argument vector, command name and key included.
/// Options may come in any order; COST, OLDEST and one of PENALIZE and
/// FORCE at most once each; at most MAX_WINDOWS windows, refused at the
/// WINDOW that would add one more, before its values are read.
pub fn parse<A: Deref<Target = [u8]>>(command: Command, args: &[A]) -> Result<Request, SwlError> {
    let [_name, _key, window_ms, limit, now, options @ ..] = args else {
        return Err(SwlError::WrongArity);
    };
    let mut request = Request {
        windows: vec![parse_window(window_ms, limit)?],
        now: parse_now(now)?,
        cost: 1,
        over_limit: OverLimit::Refuse,
        oldest: false,
    };
    let mut cost_seen = false;
    let mut rest = options.iter();
    while let Some(option) = rest.next() {
        if option.eq_ignore_ascii_case(b"COST") && !cost_seen {
            let value = rest.next().ok_or(SwlError::Syntax)?;
            request.cost = parse_int(value, 1, MAX_COST).ok_or(SwlError::Cost)?;
            cost_seen = true;
        } else if option.eq_ignore_ascii_case(b"WINDOW") {
            if request.windows.len() == MAX_WINDOWS {
                return Err(SwlError::Windows);
            }
            let (Some(window_ms), Some(limit)) = (rest.next(), rest.next()) else {
                return Err(SwlError::Syntax);
            };
            request.windows.push(parse_window(window_ms, limit)?);
        } else if let Some(over_limit) = over_limit_option(option)
            .filter(|_| command == Command::Check && request.over_limit == OverLimit::Refuse)
        {
            request.over_limit = over_limit;
        } else if option.eq_ignore_ascii_case(b"OLDEST")
            && command == Command::Peek
            && !request.oldest
        {
            request.oldest = true;
        } else {
            return Err(SwlError::Syntax);
        }
    }
    Ok(request)
}

/// PENALIZE or FORCE, in any case.
fn over_limit_option(option: &[u8]) -> Option<OverLimit> {
    if option.eq_ignore_ascii_case(b"PENALIZE") {
        Some(OverLimit::Penalize)
    } else if option.eq_ignore_ascii_case(b"FORCE") {
        Some(OverLimit::Force)
    } else {
        None
    }
}

fn parse_window(window_ms: &[u8], limit: &[u8]) -> Result<Window, SwlError> {
    Ok(Window {
        window_ms: parse_int(window_ms, 1, MAX_MS).ok_or(SwlError::WindowMs)?,
        limit: parse_int(limit, 0, MAX_MS).ok_or(SwlError::Limit)?,
    })
}

fn parse_now(now: &[u8]) -> Result<Now, SwlError> {
    if now == b"*" {
        return Ok(Now::ServerClock);
    }
    parse_int(now, 0, MAX_MS)
        .map(Now::At)
        .ok_or(SwlError::NowMs)
}

/// A plain decimal integer within `min..=max`: ASCII digits only, no sign,
/// no spaces, no leading zeros (as Redis itself parses integers).
fn parse_int(bytes: &[u8], min: u64, max: u64) -> Option<u64> {
    let canonical = match bytes {
        [] => false,
        [b'0'] => true,
        [first, ..] => *first != b'0' && bytes.len() <= 16,
    };
    if !canonical || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = bytes
        .iter()
        .fold(0u64, |acc, digit| acc * 10 + u64::from(digit - b'0'));
    (min..=max).contains(&value).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_as(command: Command, args: &[&str]) -> Result<Request, SwlError> {
        let argv: Vec<&[u8]> = std::iter::once("SWL.X")
            .chain(args.iter().copied())
            .map(str::as_bytes)
            .collect();
        super::parse(command, &argv)
    }

    fn parse(args: &[&str]) -> Result<Request, SwlError> {
        parse_as(Command::Check, args)
    }

    fn window(window_ms: u64, limit: u64) -> Window {
        Window { window_ms, limit }
    }

    #[test]
    fn parses_the_four_required_arguments() {
        assert_eq!(
            parse(&["k", "1000", "10", "1700000000000"]),
            Ok(Request {
                windows: vec![window(1000, 10)],
                now: Now::At(1_700_000_000_000),
                cost: 1,
                over_limit: OverLimit::Refuse,
                oldest: false,
            })
        );
    }

    #[test]
    fn star_means_the_server_clock() {
        assert_eq!(
            parse(&["k", "1", "0", "*"]).map(|r| r.now),
            Ok(Now::ServerClock)
        );
    }

    #[test]
    fn cost_keyword_is_case_insensitive() {
        for keyword in ["COST", "cost", "CoSt"] {
            assert_eq!(
                parse(&["k", "1", "5", "0", keyword, "3"]).map(|r| r.cost),
                Ok(3)
            );
        }
    }

    #[test]
    fn bounds_are_inclusive() {
        let max = MAX_MS.to_string();
        let max_cost = MAX_COST.to_string();
        let request = parse(&["k", &max, &max, &max, "COST", &max_cost]);
        assert_eq!(
            request,
            Ok(Request {
                windows: vec![window(MAX_MS, MAX_MS)],
                now: Now::At(MAX_MS),
                cost: MAX_COST,
                over_limit: OverLimit::Refuse,
                oldest: false,
            })
        );
        assert_eq!(
            parse(&["k", "1", "0", "0"]).map(|r| r.windows),
            Ok(vec![window(1, 0)])
        );
    }

    #[test]
    fn malformed_numbers_name_their_argument() {
        let over = (MAX_MS + 1).to_string();
        let bad = [
            "", "-1", "+1", " 1", "1 ", "1.0", "1e3", "0x10", "01", "abc", "1\0", &over,
        ];
        for text in bad {
            assert_eq!(
                parse(&["k", text, "1", "0"]),
                Err(SwlError::WindowMs),
                "{text:?}"
            );
            assert_eq!(
                parse(&["k", "1", text, "0"]),
                Err(SwlError::Limit),
                "{text:?}"
            );
            assert_eq!(
                parse(&["k", "1", "1", text]),
                Err(SwlError::NowMs),
                "{text:?}"
            );
            let cost = parse(&["k", "1", "1", "0", "COST", text]);
            assert_eq!(cost, Err(SwlError::Cost), "{text:?}");
        }
        assert_eq!(parse(&["k", "0", "1", "0"]), Err(SwlError::WindowMs));
        assert_eq!(
            parse(&["k", "1", "1", "0", "COST", "0"]),
            Err(SwlError::Cost)
        );
        let over_cost = (MAX_COST + 1).to_string();
        assert_eq!(
            parse(&["k", "1", "1", "0", "COST", &over_cost]),
            Err(SwlError::Cost)
        );
        assert_eq!(parse(&["k", "1", "1", "**"]), Err(SwlError::NowMs));
        assert_eq!(
            parse(&["k", "1", "1", "99999999999999999999999"]),
            Err(SwlError::NowMs)
        );
    }

    #[test]
    fn the_first_bad_argument_is_named() {
        assert_eq!(parse(&["k", "x", "y", "z"]), Err(SwlError::WindowMs));
        assert_eq!(parse(&["k", "1", "y", "z"]), Err(SwlError::Limit));
    }

    #[test]
    fn too_few_arguments_is_an_arity_error() {
        assert_eq!(parse(&["k", "1", "1"]), Err(SwlError::WrongArity));
        assert_eq!(parse(&[]), Err(SwlError::WrongArity));
    }

    #[test]
    fn unknown_repeated_or_incomplete_options_are_syntax_errors() {
        for options in [
            &["NOPE"][..],
            &["COST"],
            &["COST", "1", "COST", "1"],
            &["COST", "1", "extra"],
            &["COSTS", "1"],
            &[""],
            &["WINDOW"],
            &["WINDOW", "10"],
            &["PENALIZE", "PENALIZE"],
            &["WINDOW", "10", "1", "10"],
        ] {
            let args: Vec<&str> = ["k", "1", "1", "0"]
                .iter()
                .chain(options)
                .copied()
                .collect();
            assert_eq!(parse(&args), Err(SwlError::Syntax), "{options:?}");
        }
    }

    #[test]
    fn options_come_in_any_order_and_windows_keep_theirs() {
        let expected = Ok(Request {
            windows: vec![window(1000, 10), window(10, 2), window(60000, 100)],
            now: Now::ServerClock,
            cost: 2,
            over_limit: OverLimit::Penalize,
            oldest: false,
        });
        let orders: [&[&str]; 3] = [
            &[
                "COST", "2", "WINDOW", "10", "2", "WINDOW", "60000", "100", "PENALIZE",
            ],
            &[
                "penalize", "window", "10", "2", "cost", "2", "Window", "60000", "100",
            ],
            &[
                "WINDOW", "10", "2", "PENALIZE", "WINDOW", "60000", "100", "COST", "2",
            ],
        ];
        for options in orders {
            let args: Vec<&str> = ["k", "1000", "10", "*"]
                .iter()
                .chain(options)
                .copied()
                .collect();
            assert_eq!(parse(&args), expected, "{options:?}");
        }
    }

    #[test]
    fn window_arguments_are_checked_like_the_first_window() {
        let base = ["k", "1000", "10", "0", "WINDOW"];
        let with = |extra: [&str; 2]| {
            let args: Vec<&str> = base.iter().chain(&extra).copied().collect();
            parse(&args)
        };
        assert_eq!(with(["0", "1"]), Err(SwlError::WindowMs));
        assert_eq!(with(["10", "-1"]), Err(SwlError::Limit));
        assert_eq!(with(["10", "0"]).map(|r| r.windows.len()), Ok(2));
    }

    #[test]
    fn at_most_max_windows_are_taken_and_one_more_is_refused_at_its_keyword() {
        let with_windows = |n: usize, tail: &[&str]| {
            let mut args = vec!["k", "1000", "10", "0"];
            for _ in 1..n {
                args.extend(["WINDOW", "10", "1"]);
            }
            args.extend(tail);
            parse(&args)
        };
        let most = with_windows(MAX_WINDOWS, &["COST", "2"]);
        assert_eq!(
            most.map(|r| (r.windows.len(), r.cost)),
            Ok((MAX_WINDOWS, 2))
        );
        assert_eq!(with_windows(MAX_WINDOWS + 1, &[]), Err(SwlError::Windows));
        // Refused before the values of the window past the maximum are read.
        assert_eq!(
            with_windows(MAX_WINDOWS, &["WINDOW", "x"]),
            Err(SwlError::Windows)
        );
        assert_eq!(
            SwlError::Windows.to_string(),
            "ERR too many windows: at most 100 per call"
        );
    }

    #[test]
    fn oldest_is_for_peek_only_and_once() {
        let args = ["k", "1000", "10", "0", "oldest", "COST", "2"];
        let peek = parse_as(Command::Peek, &args).map(|r| (r.oldest, r.cost));
        assert_eq!(peek, Ok((true, 2)));
        for command in [Command::Check, Command::Refund] {
            assert_eq!(parse_as(command, &args), Err(SwlError::Syntax));
        }
        let twice = ["k", "1000", "10", "0", "OLDEST", "OLDEST"];
        assert_eq!(parse_as(Command::Peek, &twice), Err(SwlError::Syntax));
    }

    #[test]
    fn penalize_is_for_check_only() {
        let args = ["k", "1000", "10", "0", "PENALIZE"];
        assert_eq!(parse(&args).map(|r| r.over_limit), Ok(OverLimit::Penalize));
        for command in [Command::Peek, Command::Refund] {
            assert_eq!(parse_as(command, &args), Err(SwlError::Syntax));
            let other = parse_as(
                command,
                &["k", "1000", "10", "0", "COST", "2", "WINDOW", "1", "1"],
            );
            assert_eq!(other.map(|r| (r.cost, r.windows.len())), Ok((2, 2)));
        }
    }

    #[test]
    fn force_is_taken_in_any_case_and_position() {
        let expected = Ok(Request {
            windows: vec![window(1000, 10), window(10, 2)],
            now: Now::At(0),
            cost: 2,
            over_limit: OverLimit::Force,
            oldest: false,
        });
        let orders: [&[&str]; 4] = [
            &["FORCE", "COST", "2", "WINDOW", "10", "2"],
            &["COST", "2", "force", "WINDOW", "10", "2"],
            &["COST", "2", "WINDOW", "10", "2", "Force"],
            &["window", "10", "2", "fOrCe", "cost", "2"],
        ];
        for options in orders {
            let args: Vec<&str> = ["k", "1000", "10", "0"]
                .iter()
                .chain(options)
                .copied()
                .collect();
            assert_eq!(parse(&args), expected, "{options:?}");
        }
    }

    #[test]
    fn force_is_once_never_with_penalize_and_for_check_only() {
        for options in [
            &["FORCE", "FORCE"][..],
            &["force", "COST", "2", "FORCE"],
            &["FORCE", "PENALIZE"],
            &["PENALIZE", "FORCE"],
            &["penalize", "COST", "2", "force"],
            &["FORCE", "OLDEST"],
            &["FORCES"],
        ] {
            let args: Vec<&str> = ["k", "1000", "10", "0"]
                .iter()
                .chain(options)
                .copied()
                .collect();
            assert_eq!(parse(&args), Err(SwlError::Syntax), "{options:?}");
        }
        let args = ["k", "1000", "10", "0", "FORCE"];
        for command in [Command::Peek, Command::Refund] {
            assert_eq!(parse_as(command, &args), Err(SwlError::Syntax));
        }
        assert_eq!(
            SwlError::Syntax.to_string(),
            "ERR syntax error",
            "the text a misplaced PENALIZE gets"
        );
    }
}
