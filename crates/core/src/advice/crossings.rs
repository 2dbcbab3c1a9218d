//! Where the fastest of a pair's calibrated paths can change with the array's size.
//!
//! Each fit is a line per range of sizes (Hockney's `fixed + bytes / bandwidth`, joined at its
//! knots), so between two consecutive knots of all the pair's fits every prediction is linear in
//! the size, and two of them change order at most once there. Those knots and crossings cut the
//! sizes into ranges in each of which the order of the paths is the same: `auto` decided once per
//! range (at [`decision_size`]) is the fastest for every array of that range, and a share keeps
//! one plan per range instead of asking the model per array (crates/core/src/explain/auto.rs).
//!
//! Past the largest size the sweep measured, every line is its last segment carried on: nothing
//! was measured there, and two paths whose fitted bandwidths agree to a few percent (the moves,
//! which all drive one copy engine) cross somewhere out there by the fits' noise alone (torch's
//! `move`, `p2p` and `dlpack` between two H200s "crossed" at 221 MiB, calibrated up to 64 MiB). So
//! no cut is made past it, and the last range is decided at a size the sweep measured: the order
//! measured last holds beyond it.

use super::model::{CostModel, Fit};
use crate::paths::PathKind;

/// Beyond the largest knot every line goes on straight; crossings past a petabyte are not asked.
const FAR: f64 = (1u64 << 50) as f64;

impl CostModel {
    /// The fits of `kind` from `source` to `target` at `place` whose sweep gave the verdict of
    /// `like`'s (the paths `auto` may put in its place: one that shares is only ever replaced by
    /// another that shares), by path name. Empty when `like` is not calibrated there.
    pub fn same_verdict_fits<'m>(&'m self, kind: PathKind, source: &str, target: &str, place: &str, like: &str) -> Vec<(&'m str, &'m Fit)> {
        let label = |path: &str| format!("{kind} {source}->{target} {path} @{place}");
        let Some(verdict) = self.fits.get(&label(like)).and_then(|f| f.shares) else {
            return Vec::new();
        };
        // The verdicts are the file's word, and the rules outrank it: a path that copies by design
        // never joins the paths that share, and a share path the rules made to share (DLPack, a
        // capsule, the CUDA array interface) that the file says copied is replaced only by another
        // such path, never by one of gpushare's copies. Otherwise a file that said `dlpack` copies
        // made `auto` copy numpy→torch, where DLPack shares.
        let by_design = |path: &str| crate::paths::copied_by_design(kind, path).is_some();
        if verdict && by_design(like) {
            return Vec::new();
        }
        let zero_copy_only = kind == PathKind::Share && !verdict && !by_design(like);
        let admissible = |path: &str| if verdict || zero_copy_only { !by_design(path) } else { true };
        // Labels sort by `kind source->target `, so the pair's paths are one range of the map: this
        // runs on every `auto` of a calibrated machine, and parsing every label cost µs.
        let prefix = format!("{kind} {source}->{target} ");
        self.fits
            .range::<str, _>((std::ops::Bound::Included(prefix.as_str()), std::ops::Bound::Unbounded))
            .take_while(|(label, _)| label.starts_with(&prefix))
            .filter_map(|(label, fit)| Some((super::model::split_label(label)?, fit)))
            .filter(|([k, s, t, path, p], fit)| {
                *k == kind.name() && *s == source && *t == target && *p == place && fit.shares == Some(verdict) && admissible(path)
            })
            .map(|([.., path, _], fit)| (path, fit))
            .collect()
    }

    /// The sizes, in bytes, at which the fastest of [`CostModel::same_verdict_fits`] may change
    /// (see the module): sorted, none repeated. Empty for a pair whose candidates all cost the same
    /// at every size (paths that share: no bytes move) or order the same way at every size.
    pub fn size_breaks(&self, kind: PathKind, source: &str, target: &str, place: &str, like: &str) -> Vec<u64> {
        self.size_breaks_and_ceiling(kind, source, target, place, like).0
    }

    /// [`CostModel::size_breaks`] and the largest size any of those fits was measured at (see the
    /// module; `None` where none says), from one lookup of the fits: what `auto` decides with.
    /// Every fit of the pair's paths of `kind` at `place`, whatever its sweep's verdict: for a
    /// choice made on one described array, whose verdict by each path the rules predict (the
    /// sweep's float32 arrays say nothing of another dtype or layout).
    pub fn pair_fits<'m>(&'m self, kind: PathKind, source: &str, target: &str, place: &str) -> Vec<(&'m str, &'m Fit)> {
        let prefix = format!("{kind} {source}->{target} ");
        self.fits
            .range::<str, _>((std::ops::Bound::Included(prefix.as_str()), std::ops::Bound::Unbounded))
            .take_while(|(label, _)| label.starts_with(&prefix))
            .filter_map(|(label, fit)| Some((super::model::split_label(label)?, fit)))
            .filter(|([k, s, t, _, p], _)| *k == kind.name() && *s == source && *t == target && *p == place)
            .map(|([.., path, _], fit)| (path, fit))
            .collect()
    }

    pub fn size_breaks_and_ceiling(&self, kind: PathKind, source: &str, target: &str, place: &str, like: &str) -> (Vec<u64>, Option<u64>) {
        let fits: Vec<&Fit> = self.same_verdict_fits(kind, source, target, place, like).into_iter().map(|(_, f)| f).collect();
        (size_breaks(&fits), largest_measured(&fits))
    }
}

/// The largest size any of `fits` was measured at: its sweep's sizes, or its last knot.
pub fn largest_measured(fits: &[&Fit]) -> Option<u64> {
    fits.iter().filter_map(|f| f.sizes.iter().copied().max().or_else(|| f.knots.last().map(|k| k.bytes))).max()
}

/// The sizes at which the fastest of `fits` may change: every fit's knots and every crossing of
/// two fits between consecutive knots. Knots matter only where two fits are compared, so one fit
/// alone has none.
pub fn size_breaks(fits: &[&Fit]) -> Vec<u64> {
    if fits.len() < 2 {
        return Vec::new();
    }
    let ceiling = largest_measured(fits).unwrap_or(FAR as u64);
    let mut edges: Vec<f64> = vec![0.0, FAR];
    for fit in fits.iter().filter(|f| f.knots.len() >= 2) {
        edges.extend(fit.knots.iter().map(|k| k.bytes as f64));
    }
    edges.sort_by(f64::total_cmp);
    edges.dedup();
    let mut breaks: Vec<u64> = edges[1..edges.len() - 1].iter().map(|&b| b as u64).collect();
    for range in edges.windows(2) {
        // Past the largest size measured: no crossing is looked for (see the module).
        let (lo, hi) = (range[0], range[1].min(ceiling as f64));
        if lo >= hi {
            continue;
        }
        // The lines are straight within (lo, hi): read each just inside both ends.
        let (a, b) = (lo.max(1.0), hi);
        for (i, first) in fits.iter().enumerate() {
            for second in &fits[i + 1..] {
                let at_a = first.seconds(a as u64) - second.seconds(a as u64);
                let at_b = first.seconds(b as u64) - second.seconds(b as u64);
                if at_a * at_b < 0.0 {
                    let crossing = a + (b - a) * at_a / (at_a - at_b);
                    breaks.push(crossing.round() as u64);
                }
            }
        }
    }
    breaks.sort_unstable();
    breaks.dedup();
    breaks.retain(|&b| b > 0 && b <= ceiling);
    // A knot where no two fits change order cuts nothing: the ranges on either side of it keep one
    // order of all the fits (so any choice among them, whatever filters it, is the same there).
    let order_in = |class: usize| {
        let at = decision_size_within(&breaks, if class == 0 { 0 } else { breaks[class - 1] }, Some(ceiling));
        let mut order: Vec<usize> = (0..fits.len()).collect();
        order.sort_by(|&i, &j| fits[i].seconds(at).total_cmp(&fits[j].seconds(at)));
        order
    };
    let orders: Vec<Vec<usize>> = (0..=breaks.len()).map(order_in).collect();
    breaks.iter().enumerate().filter(|&(i, _)| orders[i] != orders[i + 1]).map(|(_, &b)| b).collect()
}

/// Which range of `breaks` holds `bytes` (0: below the first).
pub fn size_class(breaks: &[u64], bytes: u64) -> usize {
    breaks.partition_point(|&b| b <= bytes)
}

/// The size `auto` decides at for an array of `bytes`: one size inside its range of `breaks`, the
/// same for every array of the range, so the choice made for one array holds for all of them (and
/// a share's plan, the predictor and the lab agree whatever size each asked with). With no breaks,
/// `bytes` itself: every size gives the same choice then.
pub fn decision_size(breaks: &[u64], bytes: u64) -> u64 {
    if breaks.is_empty() {
        return bytes;
    }
    let class = size_class(breaks, bytes);
    let lo = if class == 0 { 0 } else { breaks[class - 1] };
    match breaks.get(class) {
        Some(&hi) => lo + (hi - lo) / 2,
        None => lo.saturating_mul(2),
    }
}

/// [`decision_size`], never past `ceiling` (the largest size measured, see the module) unless its
/// range starts there: the last range (or the only one) is decided where its order was measured.
pub fn decision_size_within(breaks: &[u64], bytes: u64, ceiling: Option<u64>) -> u64 {
    let decided = decision_size(breaks, bytes);
    let Some(ceiling) = ceiling else { return decided };
    // With no breaks too: the lines may cross past the ceiling, where no cut is made.
    let class = size_class(breaks, bytes);
    let lo = if class == 0 { 0 } else { breaks[class - 1] };
    decided.min(ceiling).max(lo)
}

/// The range of `breaks` that holds `bytes`, in words (`from 9.77 KiB to 22.9 MiB`); `None` with
/// no breaks (every size is one range).
pub fn range_words(breaks: &[u64], bytes: u64) -> Option<String> {
    let class = size_class(breaks, bytes);
    let words = crate::render::units::bytes;
    match (class.checked_sub(1).map(|i| breaks[i]), breaks.get(class)) {
        (None, None) => None,
        (None, Some(&hi)) => Some(format!("below {}", words(hi))),
        (Some(lo), Some(&hi)) => Some(format!("from {} to {}", words(lo), words(hi))),
        (Some(lo), None) => Some(format!("from {} up", words(lo))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advice::model::Observation;

    fn line(fixed: f64, per_byte: f64) -> Fit {
        // Measured as `gpushare calibrate` measures: 4 KiB to 64 MiB.
        Fit { fixed, per_byte, sizes: vec![4096, 1 << 20, 64 << 20], error: 0.0, shares: Some(false), knots: Vec::new(), host_speed: None, speed_exponent: None, ceiling: None, beyond_error: None, held_out: Vec::new(), regime_changes: Vec::new() }
    }

    #[test]
    fn no_cut_past_the_largest_size_measured_and_the_last_range_decided_where_it_was_measured() {
        // Two moves on one copy engine: 30 µs + 1/400 GB/s against 25 µs + 1/398 GB/s, equal near
        // 400 MB by the lines carried past the 64 MiB the sweep measured (the notebook's "dlpack
        // from 221 MiB up"): no cut there, and every size past 64 MiB decides as 64 MiB does.
        let (a, b) = (line(30e-6, 1.0 / 400e9), line(25e-6, 1.0 / 398e9));
        let crossing = 5e-6 / (1.0 / 398e9 - 1.0 / 400e9);
        assert!(crossing > (64u64 << 20) as f64, "{crossing}");
        assert!(size_breaks(&[&a, &b]).is_empty());
        // One range, decided at the ceiling for any larger array: `b`, as measured at 64 MiB.
        assert_eq!(decision_size_within(&[], 1 << 30, largest_measured(&[&a, &b])), 64 << 20);
        assert_eq!(decision_size_within(&[], 4096, largest_measured(&[&a, &b])), 4096);
        assert!(b.seconds(64 << 20) < a.seconds(64 << 20) && a.seconds(1 << 30) < b.seconds(1 << 30));
        // Measured crossings below the ceiling and a noise crossing just past it: the cuts stay
        // at or below 64 MiB, and the last range is decided there, not at twice its start, where
        // the lines carried on have crossed again.
        let b = line(25e-6, 1.0 / 400e9 + 5e-6 / (100u64 << 20) as f64); // equal to `a` at 100 MiB
        let c = line(10e-6, 1.0 / 400e9 + 20e-6 / (60u64 << 20) as f64); // equal to `a` at 60 MiB
        let fits = [&a, &b, &c];
        let breaks = size_breaks(&fits);
        assert!(!breaks.is_empty() && breaks.iter().all(|&x| x <= 64 << 20), "{breaks:?}");
        let ceiling = largest_measured(&fits);
        assert_eq!(ceiling, Some(64 << 20));
        let fastest = |n: u64| (0..3).min_by(|&i, &j| fits[i].seconds(n).total_cmp(&fits[j].seconds(n))).unwrap();
        let last = decision_size_within(&breaks, 1 << 40, ceiling);
        let lo = *breaks.last().unwrap();
        assert!(last > lo && last <= 64 << 20, "{last}");
        assert_eq!(fastest(last), fastest(64 << 20));
        assert_ne!(fastest(2 * lo), fastest(64 << 20), "the clamp matters here: {breaks:?}");
        assert_eq!(decision_size_within(&breaks, 1, ceiling), decision_size(&breaks, 1));
        // A range that starts at the ceiling is decided at its start.
        assert_eq!(decision_size_within(&[64 << 20], 1 << 30, Some(64 << 20)), 64 << 20);
    }

    #[test]
    fn two_lines_cross_once_where_their_costs_are_equal() {
        // 1 µs + 1 ns/B against 10 µs + 0.1 ns/B: equal at 10 000 bytes.
        let (steep, flat) = (line(1e-6, 1e-9), line(1e-5, 1e-10));
        let breaks = size_breaks(&[&steep, &flat]);
        assert_eq!(breaks, vec![10_000]);
        assert!(steep.seconds(4096) < flat.seconds(4096) && flat.seconds(65536) < steep.seconds(65536));
        assert_eq!(size_class(&breaks, 4096), 0);
        assert_eq!(size_class(&breaks, 10_000), 1);
        // Every size of a range decides at one size, on the same side of the crossing.
        assert_eq!(decision_size(&breaks, 1), decision_size(&breaks, 9_999));
        assert!(decision_size(&breaks, 1) < 10_000 && decision_size(&breaks, 1 << 30) > 10_000);
    }

    #[test]
    fn lines_that_never_cross_and_one_fit_alone_have_no_breaks() {
        assert!(size_breaks(&[&line(1e-6, 1e-10), &line(2e-6, 2e-10)]).is_empty());
        assert!(size_breaks(&[&line(1e-6, 1e-10)]).is_empty());
        // Two zero-copy handoffs: constant, never crossing.
        assert!(size_breaks(&[&line(2e-6, 0.0), &line(5e-6, 0.0)]).is_empty());
    }

    #[test]
    fn a_fit_joined_at_knots_is_cut_at_its_knots_and_crossed_within_its_segments() {
        let knots = |pts: &[(u64, f64)]| pts.iter().map(|&(bytes, seconds)| Observation { bytes, seconds }).collect::<Vec<_>>();
        // A copy whose cost per byte falls past 1 MiB (a cache, the allocator): 2 ns/B below, 0.5 above.
        let mut bent = line(0.0, 1e-9);
        bent.knots = knots(&[(4096, 4096.0 * 2e-9), (1 << 20, (1 << 20) as f64 * 2e-9), (64 << 20, (1 << 20) as f64 * 2e-9 + (63 << 20) as f64 * 0.5e-9)]);
        let fixed = line(1e-3, 0.0);
        let breaks = size_breaks(&[&bent, &fixed]);
        // One crossing: at 2 ns/B the bent line reaches the fixed 1 ms at 500 000 bytes, inside
        // its first segment. The knots change no order there, so they cut nothing.
        assert_eq!(breaks.len(), 1, "{breaks:?}");
        let crossing = breaks[0];
        assert!((bent.seconds(crossing) - 1e-3).abs() < 1e-8 && (499_000..501_000).contains(&crossing), "{crossing}");
        // A second fixed line above the bent one's 1 MiB knot and below its 64 MiB one: the knot
        // at 1 MiB is where the bent line's slope changes, and both crossings are found.
        let later = line(20e-3, 0.0);
        let two = size_breaks(&[&bent, &fixed, &later]);
        assert_eq!(two.len(), 2, "{two:?}");
        assert!(two[1] > 1 << 20 && (bent.seconds(two[1]) - 20e-3).abs() < 1e-7, "{two:?}");
        // The order is the same everywhere inside each range.
        for w in breaks.windows(2) {
            let mid = w[0] + (w[1] - w[0]) / 2;
            let sign = |n: u64| (bent.seconds(n) - fixed.seconds(n)).signum();
            assert_eq!(sign(w[0] + 1), sign(mid));
            assert_eq!(sign(mid), sign(w[1] - 1));
        }
    }
}
