//! Repeated warnings, rate-limited: a WARN or ERROR event from a call site that already
//! logged within `WINDOW` is counted instead of written, and the next one written after the
//! window is preceded by one line saying how many were left out ("... repeated 120 times
//! in 10 s"). An unreachable raft peer makes openraft warn every heartbeat (every 50 ms):
//! without this, a dead node floods its peers' logs.
//!
//! A per-layer filter on the log's formatting layer. The summary line is written straight
//! to stderr in the log's format: an event cannot be emitted from inside a filter (tracing
//! drops events dispatched while another is being dispatched).
use std::collections::HashMap;
use std::io::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::callsite::Identifier;
use tracing::{Level, Metadata};
use tracing_subscriber::layer::{Context, Filter};

/// One call site logs at most once per window; what it logged meanwhile is counted.
pub const WINDOW: Duration = Duration::from_secs(10);

struct Site {
    metadata: &'static Metadata<'static>,
    window_start: Instant,
    suppressed: u64,
}

/// The filter (see the module comment); `json`: write summaries as JSON lines.
pub struct RepeatedWarnings {
    json: bool,
    sites: Mutex<HashMap<Identifier, Site>>,
    last_sweep: Mutex<Instant>,
}

impl RepeatedWarnings {
    pub fn new(json: bool) -> RepeatedWarnings {
        RepeatedWarnings { json, sites: Mutex::new(HashMap::new()), last_sweep: Mutex::new(Instant::now()) }
    }

    /// Whether an event of `metadata` at `now` is written; writes the summary of what its
    /// call site left out when its window is over.
    fn admit(&self, metadata: &'static Metadata<'static>, now: Instant) -> bool {
        if *metadata.level() > Level::WARN {
            return true;
        }
        let mut sites = self.sites.lock().unwrap_or_else(|p| p.into_inner());
        let site = sites.entry(metadata.callsite()).or_insert(Site { metadata, window_start: now, suppressed: 0 });
        if site.suppressed == 0 && site.window_start == now {
            return true; // the first event of this call site
        }
        if now.duration_since(site.window_start) < WINDOW {
            site.suppressed += 1;
            return false;
        }
        self.summarize(site, now);
        site.window_start = now;
        true
    }

    /// Writes "repeated N times" for `site` if it left anything out, and resets its count.
    fn summarize(&self, site: &mut Site, now: Instant) {
        if site.suppressed == 0 {
            return;
        }
        let m = site.metadata;
        let secs = now.duration_since(site.window_start).as_secs().max(1);
        let what = format!(
            "the warning at {}:{} was repeated {} times in {} s (logged once per {} s)",
            m.file().unwrap_or("?"),
            m.line().unwrap_or(0),
            site.suppressed,
            secs,
            WINDOW.as_secs()
        );
        let timestamp = humantime_now();
        let line = if self.json {
            serde_json::json!({"timestamp": timestamp, "level": m.level().as_str(), "fields": {"message": what, "repeated": site.suppressed}, "target": m.target()}).to_string()
        } else {
            format!("{timestamp} {:>5} {}: {what}", m.level().as_str(), m.target())
        };
        let _ = writeln!(std::io::stderr().lock(), "{line}");
        site.suppressed = 0;
    }

    /// At most once a second: summarizes call sites whose window ended with warnings left
    /// out and nothing logged since (so the count is not held until the next warning).
    fn sweep(&self, now: Instant) {
        {
            let mut last = self.last_sweep.lock().unwrap_or_else(|p| p.into_inner());
            if now.duration_since(*last) < Duration::from_secs(1) {
                return;
            }
            *last = now;
        }
        let mut sites = self.sites.lock().unwrap_or_else(|p| p.into_inner());
        for site in sites.values_mut().filter(|s| s.suppressed > 0 && now.duration_since(s.window_start) >= WINDOW) {
            self.summarize(site, now);
            site.window_start = now;
        }
    }
}

/// Now, as the log's text format writes it (RFC 3339, UTC, microseconds).
fn humantime_now() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, mo, d) = civil_from_days(days as i64);
    format!("{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z", rest / 3600, rest % 3600 / 60, rest % 60, now.subsec_micros())
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

impl<S> Filter<S> for RepeatedWarnings {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &tracing::Event<'_>, _: &Context<'_, S>) -> bool {
        let now = Instant::now();
        self.sweep(now);
        self.admit(event.metadata(), now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_site_logs_once_per_window_and_counts_the_rest() {
        let limit = RepeatedWarnings::new(false);
        let warn: &'static Metadata<'static> = {
            struct Cs;
            static CS: Cs = Cs;
            static META: Metadata<'static> = tracing::metadata! {
                name: "test", target: "shardlog::test", level: Level::WARN, fields: &[], callsite: &CS, kind: tracing::metadata::Kind::EVENT
            };
            impl tracing::callsite::Callsite for Cs {
                fn set_interest(&self, _: tracing::subscriber::Interest) {}
                fn metadata(&self) -> &Metadata<'_> {
                    &META
                }
            }
            &META
        };
        let t0 = Instant::now();
        assert!(limit.admit(warn, t0), "the first warning is written");
        for i in 1..=120 {
            assert!(!limit.admit(warn, t0 + Duration::from_millis(50 * i)), "repeats within the window are counted");
        }
        assert_eq!(limit.sites.lock().unwrap()[&warn.callsite()].suppressed, 120);
        assert!(limit.admit(warn, t0 + WINDOW + Duration::from_millis(1)), "after the window: written again");
        assert_eq!(limit.sites.lock().unwrap()[&warn.callsite()].suppressed, 0, "the count was reported");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_791), (2026, 12, 4));
    }
}
