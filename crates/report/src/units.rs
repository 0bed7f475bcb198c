//! Numbers as people read them.

/// `850ns`, `12.3us`, `4.56ms`, `1.23s`.
pub fn nanos(ns: u64) -> String {
    let ns = ns as f64;
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{:.1}us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2}ms", ns / 1e6)
    } else {
        format!("{:.2}s", ns / 1e9)
    }
}

/// A plain quantity for an axis: whole from 10 up, two significant digits below (`0.1`
/// stays `0.1`, where `{:.0}` would print `0`).
pub fn number(v: f64) -> String {
    if v.abs() >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        let decimals = (1 - v.abs().log10().floor() as i32).max(0) as usize;
        let text = format!("{v:.decimals$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    }
}

/// Guest instructions, to three significant digits past a thousand: `1329`, `12.3k`,
/// `456k`, `3.10M`, `1.25G`.
pub fn instructions(n: f64) -> String {
    let scaled = |divisor: f64, unit: &str| {
        let v = n / divisor;
        let decimals = if v < 9.995 {
            2
        } else if v < 99.95 {
            1
        } else {
            0
        };
        format!("{v:.decimals$}{unit}")
    };
    if n < 9_999.5 {
        format!("{n:.0}")
    } else if n < 999_500.0 {
        scaled(1e3, "k")
    } else if n < 999_500_000.0 {
        scaled(1e6, "M")
    } else {
        scaled(1e9, "G")
    }
}

/// `200 B`, `64 KiB`, `1 MB`: the payload as matrix.yaml would spell it.
pub fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 6] = [
        (1 << 30, "GiB"),
        (1_000_000_000, "GB"),
        (1 << 20, "MiB"),
        (1_000_000, "MB"),
        (1 << 10, "KiB"),
        (1_000, "kB"),
    ];
    UNITS
        .iter()
        .find(|(unit, _)| n >= *unit && n.is_multiple_of(*unit))
        .map_or_else(
            || format!("{n} B"),
            |(unit, name)| format!("{} {name}", n / unit),
        )
}

/// `1.97x (1.91-2.03)`.
pub fn ratio(ratio: f64, low: f64, high: f64) -> String {
    format!("{ratio:.2}x ({low:.2}-{high:.2})")
}

/// `3.2e-11`, `0.42`.
pub fn p_value(p: f64) -> String {
    if p < 1e-3 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// A UTC timestamp, `2026-11-29 21:04 UTC`, without a date library: days from the civil
/// calendar algorithm of Howard Hinnant ("chrono-Compatible Low-Level Date Algorithms").
pub fn utc(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let seconds_of_day = unix_seconds % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        seconds_of_day / 3600,
        seconds_of_day % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_numbers() {
        assert_eq!(nanos(850), "850ns");
        assert_eq!(nanos(12_345), "12.3us");
        assert_eq!(bytes(200), "200 B");
        assert_eq!(bytes(1_000_000), "1 MB");
        assert_eq!(bytes(65_536), "64 KiB");
        assert_eq!(bytes(6_500_000), "6500 kB");
        assert_eq!(ratio(1.974, 1.91, 2.031), "1.97x (1.91-2.03)");
        assert_eq!(instructions(1329.4), "1329");
        assert_eq!(instructions(9_999.6), "10.0k");
        assert_eq!(instructions(12_345.0), "12.3k");
        assert_eq!(instructions(456_000.0), "456k");
        assert_eq!(instructions(999_600.0), "1.00M");
        assert_eq!(instructions(3_104_000.0), "3.10M");
        assert_eq!(instructions(1.25e9), "1.25G");
    }

    #[test]
    fn axis_numbers_keep_their_small_values() {
        assert_eq!(number(0.1), "0.1");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(12.4), "12");
        assert_eq!(number(4538.6), "4539");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc(1_796_000_000), "2026-11-30 00:53 UTC");
    }
}
