//! Progress lines as the scripts print them: `==> [m:ss] what`, the time since the
//! outermost script started (`SCRIPT_STARTED_AT`, seconds since the epoch), so that a
//! log shows where the time went.

use std::time::{SystemTime, UNIX_EPOCH};

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The progress line for `what`, `started` seconds after the epoch, at `now`.
pub fn line(what: &str, started: u64, now: u64) -> String {
    let t = now.saturating_sub(started);
    format!("==> [{}:{:02}] {what}", t / 60, t % 60)
}

/// When the outermost script or task started, in seconds since the epoch (now, when
/// none says).
pub fn started_at() -> u64 {
    std::env::var("SCRIPT_STARTED_AT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(now)
}

/// Prints `what` on stderr as a progress line.
pub fn say(what: &str) {
    eprintln!("{}", line(what, started_at(), now()));
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_time_is_minutes_and_seconds_since_the_start() {
        assert_eq!(super::line("x", 100, 100), "==> [0:00] x");
        assert_eq!(super::line("y", 100, 100 + 61), "==> [1:01] y");
        assert_eq!(super::line("z", 200, 100), "==> [0:00] z");
    }
}
