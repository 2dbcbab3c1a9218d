//! Where the fastest of a pair's calibrated paths can change with the array's size.
//!
//! Each fit is a line per range of sizes (Hockney's `fixed + bytes / bandwidth`, joined at its
//! knots), so between two consecutive knots of all the pair's fits every prediction is linear in
//! the size, and two of them change order at most once there. Those knots and crossings cut the
//! sizes into ranges in each of which the order of the paths is the same: `auto` decided once per
//! range (at [`decision_size`]) is the fastest for every array of that range, and a share keeps
//! one plan per range instead of asking the model per array (crates/core/src/explain/auto.rs).

use super::model::{CostModel, Fit};

/// Beyond the largest knot every line goes on straight; crossings past a petabyte are not asked.
const FAR: f64 = (1u64 << 50) as f64;

impl CostModel {
    /// The fits of `kind` from `source` to `target` at `place` whose sweep gave the verdict of
    /// `like`'s (the paths `auto` may put in its place: one that shares is only ever replaced by
    /// another that shares), by path name. Empty when `like` is not calibrated there.
    pub fn same_verdict_fits<'m>(&'m self, kind: &str, source: &str, target: &str, place: &str, like: &str) -> Vec<(&'m str, &'m Fit)> {
        let label = |path: &str| format!("{kind} {source}->{target} {path} @{place}");
        let Some(verdict) = self.fits.get(&label(like)).and_then(|f| f.shares) else {
            return Vec::new();
        };
        // Labels sort by `kind source->target `, so the pair's paths are one range of the map: this
        // runs on every `auto` of a calibrated machine, and parsing every label cost µs.
        let prefix = format!("{kind} {source}->{target} ");
        self.fits
            .range::<str, _>((std::ops::Bound::Included(prefix.as_str()), std::ops::Bound::Unbounded))
            .take_while(|(label, _)| label.starts_with(&prefix))
            .filter_map(|(label, fit)| Some((super::model::split_label(label)?, fit)))
            .filter(|([k, s, t, _, p], fit)| *k == kind && *s == source && *t == target && *p == place && fit.shares == Some(verdict))
            .map(|([.., path, _], fit)| (path, fit))
            .collect()
    }

    /// The sizes, in bytes, at which the fastest of [`CostModel::same_verdict_fits`] may change
    /// (see the module): sorted, none repeated. Empty for a pair whose candidates all cost the same
    /// at every size (paths that share: no bytes move) or order the same way at every size.
    pub fn size_breaks(&self, kind: &str, source: &str, target: &str, place: &str, like: &str) -> Vec<u64> {
        let fits: Vec<&Fit> = self.same_verdict_fits(kind, source, target, place, like).into_iter().map(|(_, f)| f).collect();
        size_breaks(&fits)
    }
}

/// The sizes at which the fastest of `fits` may change: every fit's knots and every crossing of
/// two fits between consecutive knots. Knots matter only where two fits are compared, so one fit
/// alone has none.
pub fn size_breaks(fits: &[&Fit]) -> Vec<u64> {
    if fits.len() < 2 {
        return Vec::new();
    }
    let mut edges: Vec<f64> = vec![0.0, FAR];
    for fit in fits.iter().filter(|f| f.knots.len() >= 2) {
        edges.extend(fit.knots.iter().map(|k| k.bytes as f64));
    }
    edges.sort_by(f64::total_cmp);
    edges.dedup();
    let mut breaks: Vec<u64> = edges[1..edges.len() - 1].iter().map(|&b| b as u64).collect();
    for range in edges.windows(2) {
        let (lo, hi) = (range[0], range[1]);
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
    breaks.retain(|&b| b > 0);
    // A knot where no two fits change order cuts nothing: the ranges on either side of it keep one
    // order of all the fits (so any choice among them, whatever filters it, is the same there).
    let order_in = |class: usize| {
        let at = decision_size(&breaks, if class == 0 { 0 } else { breaks[class - 1] });
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
        Fit { fixed, per_byte, sizes: vec![1, 2, 3], error: 0.0, shares: Some(false), knots: Vec::new(), host_speed: None, speed_exponent: None }
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
