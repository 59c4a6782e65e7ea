//! Every error a command can reply with. `Display` is the exact reply text.

use std::fmt;

use crate::window::{MAX_COST, MAX_MS, MAX_WINDOWS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwlError {
    /// Redis's own arity error, produced by `RedisModule_WrongArity`.
    WrongArity,
    WindowMs,
    Limit,
    NowMs,
    Cost,
    /// More windows than one call may have.
    Windows,
    Syntax,
    WrongType,
    /// A bug caught before it could unwind into the server.
    Internal,
}

impl fmt::Display for SwlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwlError::WrongArity => write!(f, "ERR wrong number of arguments"),
            SwlError::WindowMs => write!(f, "ERR window_ms must be an integer from 1 to {MAX_MS}"),
            SwlError::Limit => write!(f, "ERR limit must be an integer from 0 to {MAX_MS}"),
            SwlError::NowMs => write!(f, "ERR now_ms must be an integer from 0 to {MAX_MS}, or *"),
            SwlError::Cost => write!(f, "ERR cost must be an integer from 1 to {MAX_COST}"),
            SwlError::Windows => {
                write!(f, "ERR too many windows: at most {MAX_WINDOWS} per call")
            }
            SwlError::Syntax => write!(f, "ERR syntax error"),
            SwlError::WrongType => write!(
                f,
                "WRONGTYPE Operation against a key holding the wrong kind of value"
            ),
            SwlError::Internal => write!(f, "ERR internal error in the swl module"),
        }
    }
}
