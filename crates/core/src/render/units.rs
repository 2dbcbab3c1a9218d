//! Units: one unit per table column, chosen from the column's values, with sensible significant figures.

/// A time unit: suffix and how many seconds one unit is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeUnit {
    pub suffix: &'static str,
    pub seconds: f64,
}

const TIME_UNITS: [TimeUnit; 4] = [
    TimeUnit { suffix: "ns", seconds: 1e-9 },
    TimeUnit { suffix: "µs", seconds: 1e-6 },
    TimeUnit { suffix: "ms", seconds: 1e-3 },
    TimeUnit { suffix: "s", seconds: 1.0 },
];

/// The largest unit in which the smallest finite value is still at least 1 (torch's `select_unit`).
pub fn time_unit_for(values: &[f64]) -> TimeUnit {
    let smallest = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0).fold(f64::INFINITY, f64::min);
    if !smallest.is_finite() {
        return TIME_UNITS[1];
    }
    *TIME_UNITS.iter().rev().find(|u| smallest >= u.seconds).unwrap_or(&TIME_UNITS[0])
}

/// A number with `sig` significant figures, without scientific notation for table-sized values.
pub fn sig_figs(value: f64, sig: u32) -> String {
    if !value.is_finite() {
        return "n/a".into();
    }
    if value == 0.0 {
        return "0".into();
    }
    // The magnitude of the value as rounded: 9.9996 at three figures is 10.0, not 10.00.
    let rounded: f64 = format!("{:.*e}", sig.saturating_sub(1) as usize, value).parse().unwrap_or(value);
    let magnitude = rounded.abs().log10().floor() as i32;
    let decimals = (sig as i32 - 1 - magnitude).max(0) as usize;
    format!("{value:.decimals$}")
}

#[cfg(test)]
#[test]
fn a_value_that_rounds_up_a_decade_keeps_its_figures() {
    assert_eq!(sig_figs(9.99999, 3), "10.0");
    assert_eq!(sig_figs(0.099996, 3), "0.100");
    assert_eq!(sig_figs(123.4, 3), "123");
}

/// A time in the given unit, three significant figures.
pub fn time_in(seconds: f64, unit: TimeUnit) -> String {
    sig_figs(seconds / unit.seconds, 3)
}

/// A time with its own unit, for single values (`12.3 µs`).
pub fn time(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "n/a".into();
    }
    let unit = time_unit_for(&[seconds]);
    format!("{} {}", time_in(seconds, unit), unit.suffix)
}

/// Bytes in binary units (`4 KiB`, `256 MiB`), exact integers below 1 KiB.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = n as f64;
    let mut i = 0;
    while value >= 1024.0 && i < UNITS.len() - 1 {
        value /= 1024.0;
        i += 1;
    }
    if i == 0 { format!("{n} B") } else { format!("{} {}", sig_figs(value, 3).trim_end_matches(".0"), UNITS[i]) }
}

/// A change of bytes, signed as `bytes` writes the amount: `+64 MiB`, `-512 B`, `±0 B` (the memory
/// ledger's figures, a context's cost).
pub fn signed_bytes(n: i64) -> String {
    let sign = match n.signum() {
        1 => "+",
        -1 => "-",
        _ => "±",
    };
    format!("{sign}{}", bytes(n.unsigned_abs()))
}

/// A size as a label (a table's size column, a plot's tick): `bytes` without the zeros of a whole
/// number, `4 KiB`, `1 MiB`, `1.50 GiB`, `512 B`.
pub fn size_label(n: u64) -> String {
    bytes(n).replace(".00 ", " ")
}

/// A byte unit for a column: the largest binary unit in which the smallest non-zero value is ≥ 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ByteUnit {
    pub suffix: &'static str,
    pub bytes: f64,
}

const BYTE_UNITS: [ByteUnit; 5] = [
    ByteUnit { suffix: "B", bytes: 1.0 },
    ByteUnit { suffix: "KiB", bytes: 1024.0 },
    ByteUnit { suffix: "MiB", bytes: 1_048_576.0 },
    ByteUnit { suffix: "GiB", bytes: 1_073_741_824.0 },
    ByteUnit { suffix: "TiB", bytes: 1_099_511_627_776.0 },
];

pub fn byte_unit_for(values: &[u64]) -> ByteUnit {
    let smallest = values.iter().copied().filter(|v| *v > 0).min();
    match smallest {
        None => BYTE_UNITS[0],
        Some(s) => *BYTE_UNITS.iter().rev().find(|u| s as f64 >= u.bytes).unwrap_or(&BYTE_UNITS[0]),
    }
}

pub fn bytes_in(n: u64, unit: ByteUnit) -> String {
    if n == 0 {
        return "0".into();
    }
    let v = n as f64 / unit.bytes;
    if v.fract() == 0.0 && v < 1e6 { format!("{v:.0}") } else { sig_figs(v, 3) }
}

/// Bandwidth in GB/s (decimal, as hardware is quoted).
pub fn bandwidth(bytes: u64, seconds: f64) -> String {
    // Written so that NaN takes this branch too.
    if seconds.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || bytes == 0 {
        return "n/a".into();
    }
    format!("{} GB/s", sig_figs(bytes as f64 / seconds / 1e9, 3))
}

pub fn hex(ptr: u64) -> String {
    format!("{ptr:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(time(1.5e-6), "1.50 µs");
        assert_eq!(time(0.0123), "12.3 ms");
        assert_eq!(time(2.0), "2.00 s");
        assert_eq!(time_unit_for(&[3e-6, 4e-3]).suffix, "µs");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(4096), "4.00 KiB");
        assert_eq!(bytes(256 << 20), "256 MiB");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(signed_bytes(64 << 20), "+64 MiB");
        assert_eq!(signed_bytes(-512), "-512 B");
        assert_eq!(signed_bytes(0), "±0 B");
        assert_eq!(signed_bytes(i64::MIN), "-8192 PiB");
        assert_eq!(size_label(4096), "4 KiB");
        assert_eq!(size_label(1536), "1.50 KiB");
        assert_eq!(size_label(1 << 30), "1 GiB");
        assert_eq!(size_label(100), "100 B");
        assert_eq!(bandwidth(1_000_000_000, 0.5), "2.00 GB/s");
        for seconds in [0.0, -1.0, f64::NAN] {
            assert_eq!(bandwidth(1_000_000_000, seconds), "n/a", "{seconds}");
        }
        assert_eq!(sig_figs(1234.5, 3), "1234");
        assert_eq!(sig_figs(f64::NAN, 3), "n/a");
    }

    #[test]
    fn every_size_the_formatters_write_reads_back() {
        for n in [0_u64, 512, 4096, 1536, 10 << 10, 256 << 20, 3 << 30, 5 << 40, 1 << 50, 7 << 50] {
            for text in [bytes(n), size_label(n)] {
                assert_eq!(parse_size(&text), Ok(n), "{text}");
            }
        }
        assert_eq!(parse_size("2T"), Ok(2_000_000_000_000));
        assert_eq!(parse_size("1 PB"), Ok(1_000_000_000_000_000));
    }
}

/// Size units people write, lower-cased, with their factors.
const SIZE_UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("b", 1),
    ("k", 1000),
    ("kb", 1000),
    ("m", 1000_u64.pow(2)),
    ("mb", 1000_u64.pow(2)),
    ("g", 1000_u64.pow(3)),
    ("gb", 1000_u64.pow(3)),
    ("t", 1000_u64.pow(4)),
    ("tb", 1000_u64.pow(4)),
    ("pb", 1000_u64.pow(5)),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    // Every unit `bytes` writes reads back.
    ("pib", 1 << 50),
];

/// One size as people write it: a number (decimals allowed) and an optional unit, `4KiB`, `1.5 MB`,
/// `65536`. The one parser of sizes: `gpushare.lab.parse_size` (the magics, `bench`, `calibrate`)
/// and the command line read them here.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim_start());
    // Python's pattern: digits, optionally a point and more digits.
    let well_formed = match number.split_once('.') {
        None => !number.is_empty(),
        Some((whole, frac)) => {
            !whole.is_empty() && !frac.is_empty() && !frac.contains('.')
        }
    };
    let unit = unit.to_ascii_lowercase();
    let factor = SIZE_UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, f)| *f);
    match (well_formed, factor) {
        (true, Some(factor)) => size_in_bytes(number, factor).ok_or_else(|| {
            format!("cannot read size `{text}`: it is beyond any memory (an array holds at most {MAX_SIZE} bytes, 2^63 - 1)")
        }),
        _ => Err(format!(
            "cannot read size `{text}`: write e.g. 4KiB, 1MiB, 256MiB, 1GiB or a number of bytes"
        )),
    }
}

/// The largest size a sweep can ask for: the frameworks count bytes in signed 64-bit integers,
/// and a larger number reached the kernel as a Python int and ended in a traceback there.
pub const MAX_SIZE: u64 = i64::MAX as u64;

/// `number × factor` in bytes, `None` past [`MAX_SIZE`]. Whole numbers are read exactly (through
/// f64, 2^64 and a 400-digit number saturated into range); decimals as Python's `float` does.
fn size_in_bytes(number: &str, factor: u64) -> Option<u64> {
    let bytes = if number.contains('.') {
        let n = number.parse::<f64>().ok()? * factor as f64;
        if !(n.is_finite() && n < MAX_SIZE as f64) {
            return None;
        }
        n as u64
    } else {
        number.parse::<u64>().ok()?.checked_mul(factor)?
    };
    (bytes <= MAX_SIZE).then_some(bytes)
}

