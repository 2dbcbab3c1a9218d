//! A cell's `metadata.execution`, as nbclient records it (`record_timing`, on by default): when
//! the kernel went busy, echoed the code, replied and went idle. Tools that read executed
//! notebooks (JupyterLab's execution-time display, reports of slow cells) look for these keys.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// The four moments of one execution, each as nbclient writes it (`2026-11-26T13:10:00.123456Z`).
/// A moment that never came (a timeout, a dead kernel) is left out, as nbclient leaves it out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecTiming {
    pub busy: Option<String>,
    pub execute_input: Option<String>,
    pub reply: Option<String>,
    pub idle: Option<String>,
}

impl ExecTiming {
    /// The value of `metadata.execution` (nbclient's key names).
    pub fn to_metadata(&self) -> Value {
        let keys = [
            ("iopub.status.busy", &self.busy),
            ("iopub.execute_input", &self.execute_input),
            ("shell.execute_reply", &self.reply),
            ("iopub.status.idle", &self.idle),
        ];
        let map: Map<String, Value> = keys
            .into_iter()
            .filter_map(|(key, moment)| Some((key.to_string(), Value::String(moment.clone()?))))
            .collect();
        Value::Object(map)
    }
}

/// A message's time as nbclient records it: the header's `date` reformatted as
/// `%Y-%m-%dT%H:%M:%S.%fZ` (its wall-clock part, six fractional digits), or the time of receipt
/// in UTC when the header has no date it can read.
pub fn nbclient_timestamp(header_date: Option<&str>) -> String {
    header_date.and_then(reformat).unwrap_or_else(now_utc)
}

fn reformat(date: &str) -> Option<String> {
    let (day, time) = date.trim().split_once('T')?;
    let wall_end = time.find(['Z', 'z', '+', '-']).unwrap_or(time.len());
    let (hms, fraction) = time[..wall_end].split_once('.').unwrap_or((&time[..wall_end], ""));
    let digits_at = |s: &str, positions: &[usize]| {
        positions.iter().all(|&i| s.as_bytes().get(i).is_some_and(u8::is_ascii_digit))
    };
    let day_ok = day.len() == 10 && digits_at(day, &[0, 1, 2, 3, 5, 6, 8, 9]);
    let hms_ok = hms.len() == 8 && digits_at(hms, &[0, 1, 3, 4, 6, 7]);
    if !day_ok || !hms_ok || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let micros: String = fraction.chars().chain(std::iter::repeat('0')).take(6).collect();
    Some(format!("{day}T{hms}.{micros}Z"))
}

/// Now, in UTC, in the same format.
fn now_utc() -> String {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_micros()
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_dates_are_written_as_nbclient_writes_them() {
        let t = |d| nbclient_timestamp(Some(d));
        assert_eq!(t("2026-11-26T13:10:00.123456Z"), "2026-11-26T13:10:00.123456Z");
        assert_eq!(t("2026-11-26T13:10:00.1234Z"), "2026-11-26T13:10:00.123400Z");
        assert_eq!(t("2026-11-26T13:10:00Z"), "2026-11-26T13:10:00.000000Z");
        assert_eq!(t("2026-11-26T13:10:00.5+00:00"), "2026-11-26T13:10:00.500000Z");
        // Unreadable: the time of receipt, in the same shape.
        let now = t("yesterday");
        assert!(reformat(&now).is_some_and(|r| r == now), "{now}");
    }

    #[test]
    fn days_become_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_783), (2026, 11, 26));
    }

    #[test]
    fn moments_that_never_came_are_left_out() {
        let timing = ExecTiming { busy: Some("b".into()), idle: Some("i".into()), ..Default::default() };
        assert_eq!(
            timing.to_metadata(),
            serde_json::json!({"iopub.status.busy": "b", "iopub.status.idle": "i"})
        );
    }
}
