//! Wall-clock time for reports and records (plugins have no time crate).

/// Seconds since the Unix epoch, from the host's wall clock.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// UTC calendar time of `secs` since the epoch:
/// `[year, month, day, hour, minute, second]`.
pub fn utc(secs: u64) -> [i64; 6] {
    let days = (secs / 86_400) as i64;
    let rem = (secs % 86_400) as i64;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    [year, month, day, rem / 3_600, rem % 3_600 / 60, rem % 60]
}

/// `secs` since the epoch as ISO 8601 UTC, e.g. `2026-01-12T12:34:56Z`.
pub fn iso8601(secs: u64) -> String {
    let [year, month, day, hour, minute, second] = utc(secs);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
}
