//! Logs on standard error at LOG_LEVEL, as text or JSON lines (LOG_FORMAT),
//! as the reference's logger writes them.

use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    pub fn parse(name: &str) -> Option<Level> {
        match name.to_ascii_uppercase().as_str() {
            "DEBUG" | "TRACE" => Some(Level::Debug),
            "INFO" => Some(Level::Info),
            "WARN" | "WARNING" => Some(Level::Warn),
            "ERROR" | "FATAL" | "PANIC" => Some(Level::Error),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warning",
            Level::Error => "error",
        }
    }
}

static SETUP: OnceLock<(Level, bool)> = OnceLock::new();

/// Sets the level and format once, at start.
pub fn init(level: Level, json: bool) {
    let _ = SETUP.set((level, json));
}

pub fn log(level: Level, message: &str) {
    let (threshold, json) = SETUP.get().copied().unwrap_or((Level::Warn, false));
    if level < threshold {
        return;
    }
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default();
    if json {
        let line =
            serde_json::json!({"@timestamp": time, "level": level.name(), "@message": message});
        eprintln!("{line}");
    } else {
        eprintln!("time={time:.3} level={} msg={message:?}", level.name());
    }
}

pub fn debug(message: &str) {
    log(Level::Debug, message);
}

pub fn info(message: &str) {
    log(Level::Info, message);
}

pub fn warn(message: &str) {
    log(Level::Warn, message);
}

pub fn error(message: &str) {
    log(Level::Error, message);
}
