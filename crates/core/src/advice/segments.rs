//! A copying path's cost size range by size range: one Hockney line `fixed + bytes / bandwidth`
//! between each two neighbouring sizes of the calibration sweep, as NCCL's tuner keeps one line per
//! protocol and each protocol serves its own range of sizes.
//!
//! Why one line is not enough: a copy's cost per byte changes with size where the data stops fitting
//! a cache or the allocator changes strategy. On the 2× H200 run the `host` path
//! (device → pageable host → device) moved 5–6 GB/s below 4 MiB and 1.6–2 GB/s at 16–64 MiB; the
//! one line relative least squares fits through 64 KiB, 1, 16 and 64 MiB missed its own sweep by up
//! to 73 % and the sizes between by a median 39 % (benchmarks/replay_advice.py). Each segment still
//! has the form the issue asks for; only the range it holds over is narrower.
//!
//! A segment's line goes through its two end points, the sweep's medians made [`non_decreasing`]
//! (a copy of more bytes never takes less time), so the sweep's own points are matched wherever
//! they rose with size and say nothing about the error. The error a segmented fit states is therefore measured
//! out of sample: each inner point predicted from the segments made without it
//! ([`leave_one_out_error`]), over a span four to sixteen times wider than the segments it keeps.

use serde::{Deserialize, Serialize};

use super::model::Observation;

/// The measured points the segments join: one per size (the median where a size was measured more
/// than once), by size; `None` with fewer than two sizes or a time that is not a positive number.
pub fn knots(points: &[Observation]) -> Option<Vec<Observation>> {
    if points.iter().any(|p| !(p.seconds.is_finite() && p.seconds > 0.0)) {
        return None;
    }
    let mut sizes: Vec<u64> = points.iter().map(|p| p.bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let knots: Vec<Observation> = sizes
        .into_iter()
        .map(|bytes| {
            let mut at: Vec<f64> = points.iter().filter(|p| p.bytes == bytes).map(|p| p.seconds).collect();
            at.sort_by(f64::total_cmp);
            let mid = at.len() / 2;
            let seconds = if at.len() % 2 == 1 { at[mid] } else { (at[mid - 1] + at[mid]) / 2.0 };
            Observation { bytes, seconds }
        })
        .collect();
    (knots.len() >= 2).then_some(knots)
}

/// `knots` made non-decreasing in time (the pool-adjacent-violators fit: each run of sizes whose
/// times fell as the size grew is given their mean): a copy of more bytes by the same path never
/// takes less time, so a size measured slower than a larger one is noise in one of the two, and
/// neither is the path's cost. On the 2-core CPU torch→jax by `copy` took 83.6 µs at 104 KiB and
/// 37.8 µs at 180 KiB in one sweep; the segment through the first priced 96 KiB at 77 µs, and the
/// array of that size took 32.7 µs (2.4x).
pub fn non_decreasing(knots: &[Observation]) -> Vec<Observation> {
    // Blocks of neighbouring knots pooled to one level: (sum of seconds, count).
    let mut blocks: Vec<(f64, usize)> = Vec::with_capacity(knots.len());
    for k in knots {
        blocks.push((k.seconds, 1));
        while blocks.len() >= 2 {
            let (sum_b, n_b) = blocks[blocks.len() - 1];
            let (sum_a, n_a) = blocks[blocks.len() - 2];
            if sum_a / n_a as f64 <= sum_b / n_b as f64 {
                break;
            }
            blocks.pop();
            *blocks.last_mut().expect("two blocks") = (sum_a + sum_b, n_a + n_b);
        }
    }
    let levels = blocks.iter().flat_map(|&(sum, n)| std::iter::repeat_n(sum / n as f64, n));
    knots.iter().zip(levels).map(|(k, seconds)| Observation { bytes: k.bytes, seconds }).collect()
}

/// A range of a copying path's sweep over which its cost per byte rose [`super::model::REGIME_CHANGE`]
/// times or more ([`regime_changes`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RegimeChange {
    /// The smaller of the two neighbouring sizes, bytes.
    pub from: u64,
    /// The larger, bytes.
    pub to: u64,
    /// The largest cost per byte measured from `from` to `to` over the smallest one measured at
    /// the same size or a smaller one.
    pub rise: f64,
}

/// Where a copy's cost per byte rose [`super::model::REGIME_CHANGE`] times or more between two
/// neighbouring sizes of its sweep (`knots`), each measurement counted, not only the median of
/// each size: the rounds of one size disagree where a regime's place moves from one moment to the
/// next (on the 2-core CPU torch->tf by `host` took 1.5 ms and 5.3 ms at 8 MiB, 5.3 and 10.9 ms at
/// 16 MiB, and the medians rose only 1.5x from one size to the next). Within one regime a copy's
/// time per byte never rises with size (`fixed + per_byte * bytes`): a measurement at a size costing
/// twice per byte what one at that size or a smaller one cost is two regimes.
pub fn regime_changes(points: &[Observation], knots: &[Observation]) -> Vec<RegimeChange> {
    let per_byte = |p: &Observation| p.seconds / p.bytes.max(1) as f64;
    knots
        .windows(2)
        .filter_map(|w| {
            let (from, to) = (w[0].bytes, w[1].bytes);
            let within: Vec<&Observation> = points.iter().filter(|p| (from..=to).contains(&p.bytes)).collect();
            let rise = within
                .iter()
                .flat_map(|y| within.iter().filter(|x| x.bytes <= y.bytes).map(move |x| per_byte(y) / per_byte(x)))
                .filter(|r| r.is_finite())
                .fold(0.0, f64::max);
            (rise >= super::model::REGIME_CHANGE).then_some(RegimeChange { from, to, rise })
        })
        .collect()
}

/// `(fixed, per_byte)` of the line that holds at `bytes`: `fixed + per_byte * bytes` is the
/// interpolation between the two knots around it. Below the first knot the first segment's line
/// goes on (never below zero seconds). Above the last: the largest size's own cost per byte past
/// the first knot's time (`tail_per_byte`, the sweep's, where that is nothing), never less than
/// `floor_per_byte` (the hardware's ceiling: no copy is cheaper per byte). A segment whose line
/// would cross zero above zero bytes (a cost per byte that grows with size) is stated as its
/// average cost per byte there, with no fixed part.
pub fn line_at(knots: &[Observation], bytes: u64, tail_per_byte: f64, floor_per_byte: f64) -> (f64, f64) {
    debug_assert!(knots.len() >= 2, "a segment needs two knots");
    let n = bytes as f64;
    let last = knots.len() - 2;
    let i = knots.windows(2).position(|w| bytes <= w[1].bytes).unwrap_or(last);
    let (n0, t0) = (knots[i].bytes as f64, knots[i].seconds);
    let (n1, t1) = (knots[i + 1].bytes as f64, knots[i + 1].seconds);
    let slope = (t1 - t0) / (n1 - n0);
    // Below the first knot the first segment's line goes on, at no more than the path's cost per
    // byte over the whole sweep (`tail_per_byte`): between two small sizes a copy's time is its
    // fixed cost plus noise, and the slope of that noise carried down priced tf->numpy by `copy` at
    // 3 KiB at 1.8 µs from 2.3 at 4 KiB and 3.8 at 8 KiB (4.1 measured).
    let slope = if n < n0 && tail_per_byte > 0.0 && slope > tail_per_byte { tail_per_byte } else { slope };
    let intercept = t0 - slope * n0;
    // Past the last knot: the largest size's own cost per byte past the path's fixed cost (the
    // first knot's time at most), never below the floor. A copy that large is bound by what it
    // crosses per byte, so the bytes after it cost what its own bytes did. Not the sweep's cost
    // per byte either, a line through every size: on 2x H200 it priced 200 MiB by `pinned` 20 %
    // above the 4.6 ms measured, where 64 MiB's own cost per byte said 4.8 ms. The
    // last segment's slope is the difference of two noisy times, wrong both ways: on the 2-core
    // CPU jax->torch by `host` cost 14.4 ms at 45 MiB and 16.1 ms at 64 MiB, a slope that priced
    // 200 MiB at 27.9 ms (57.5 ms measured, the 0.25 ms per MiB of the 64 MiB copy itself); on 2x
    // H200 jax->cupy by `host` rose 0.30 ms per MiB between 45 and 64 MiB, and 200 MiB ran at
    // 0.11. Five recorded CPU runs, replayed (benchmarks/replay_advice.py, from 64 MiB up): `copy`
    // missed by a median 12-21 % as recorded, 5-12 % refitted this way; `host` 6-19 %, 7-13 %.
    let own = (t1 - knots[0].seconds.min(t1)) / n1;
    let beyond = if own > 0.0 { own } else { tail_per_byte.max(0.0) }.max(floor_per_byte.max(0.0));
    let seconds = if n < n0 {
        if slope <= 0.0 {
            t0
        } else if intercept < 0.0 {
            t0 * n / n0
        } else {
            intercept + slope * n
        }
    } else if n > n1 {
        t1 + beyond * (n - n1)
    } else {
        t0 + slope * (n - n0)
    };
    // The same seconds as a fixed part and a part per byte, neither negative.
    let (fixed, per_byte) = if n > n1 && beyond != slope { (t1 - beyond * n1, beyond) } else { (intercept, slope) };
    if n <= 0.0 || per_byte <= 0.0 {
        (seconds, 0.0)
    } else if fixed >= 0.0 && !(n < n0 && intercept < 0.0) {
        (fixed, per_byte)
    } else {
        (0.0, seconds / n)
    }
}

/// Seconds at `bytes` through `knots`.
pub fn seconds(knots: &[Observation], bytes: u64, tail_per_byte: f64) -> f64 {
    let (fixed, per_byte) = line_at(knots, bytes, tail_per_byte, 0.0);
    fixed + per_byte * bytes as f64
}

/// The largest |predicted − measured| / measured of an inner knot predicted by the segments made
/// without it: the error of a size the sweep did not measure, as the sweep itself shows it. 0 with
/// no inner knot (two sizes: nothing to check them against).
pub fn leave_one_out_error(knots: &[Observation], tail_per_byte: f64) -> f64 {
    held_out_errors(knots, tail_per_byte).into_iter().fold(0.0, f64::max)
}

/// Each knot's |predicted − measured| / measured by the segments through the measured knots
/// without it, 0 for the first and the last (nothing lies beyond them to predict them from inside
/// the sweep): where a cost bends, the knots beside the bend are the ones missed. The measured
/// knots, not the [`non_decreasing`] ones a fit predicts with: a sweep whose times fell and rose
/// again is stated with the error that shows, however its line was smoothed.
pub fn held_out_errors(knots: &[Observation], tail_per_byte: f64) -> Vec<f64> {
    (0..knots.len())
        .map(|i| {
            if i == 0 || i + 1 >= knots.len() {
                return 0.0;
            }
            let mut without = knots.to_vec();
            let left_out = without.remove(i);
            (seconds(&without, left_out.bytes, tail_per_byte) - left_out.seconds).abs() / left_out.seconds
        })
        .collect()
}

/// |predicted − measured| / measured of the last knot predicted by the segments made without it
/// (the line between the two before it, carried on): how far a prediction past the sweep's
/// largest size can be off, as the sweep itself shows. 0 with fewer than three knots.
pub fn leave_last_out_error(knots: &[Observation], tail_per_byte: f64) -> f64 {
    if knots.len() < 3 {
        return 0.0;
    }
    let (last, without) = knots.split_last().expect("three knots");
    (seconds(without, last.bytes, tail_per_byte) - last.seconds).abs() / last.seconds
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;

    fn obs(points: &[(u64, f64)]) -> Vec<Observation> {
        points.iter().map(|&(bytes, seconds)| Observation { bytes, seconds }).collect()
    }

    /// The `host` path cupy→jax on the 2× H200: fast per byte while it fits the
    /// caches, three times slower per byte from 16 MiB.
    fn host() -> Vec<Observation> {
        obs(&[(64 * KIB, 135.3e-6), (MIB, 336.5e-6), (16 * MIB, 5372.9e-6), (64 * MIB, 36026.4e-6)])
    }

    #[test]
    fn past_the_sweep_a_copy_is_never_predicted_faster_than_its_ceiling() {
        // A copy within one H200 (2x H200: jax→torch `copy`): 16 MiB in 23.2 µs, 64 MiB
        // in 34.9 µs. The last segment's slope, 48 MiB in 11.7 µs, is a "4.3 TB/s" that carried on
        // predicts 1 GiB at 4.0 TB/s; the memory's ceiling (2 TB/s here) bounds it.
        let k = obs(&[(MIB, 40.3e-6), (16 * MIB, 23.2e-6), (64 * MIB, 34.9e-6)]);
        let free = seconds(&k, 1024 * MIB, 0.0);
        assert!((1024 * MIB) as f64 / free > 3.5e12, "{free}");
        let ceiling = 2e12;
        let (fixed, per_byte) = line_at(&k, 1024 * MIB, 0.0, 1.0 / ceiling);
        let bounded = fixed + per_byte * (1024 * MIB) as f64;
        assert!((bounded - (34.9e-6 + (960 * MIB) as f64 / ceiling)).abs() < 1e-12, "{bounded}");
        assert!((1024 * MIB) as f64 / bounded < ceiling && fixed >= 0.0 && per_byte > 0.0);
        // Inside the sweep the floor changes nothing: the measured points hold.
        for p in &k {
            let (f, b) = line_at(&k, p.bytes, 0.0, 1.0 / ceiling);
            assert!(((f + b * p.bytes as f64) / p.seconds - 1.0).abs() < 1e-12);
        }
        // A slope already dearer than the floor goes on as it is.
        let slow = host();
        assert_eq!(line_at(&slow, 256 * MIB, 0.0, 1.0 / 100e9), line_at(&slow, 256 * MIB, 0.0, 0.0));
    }

    #[test]
    fn the_sweep_is_matched_and_each_range_keeps_its_own_bandwidth() {
        let k = knots(&host()).unwrap();
        for p in &k {
            assert!((seconds(&k, p.bytes, 0.0) / p.seconds - 1.0).abs() < 1e-12);
        }
        // Between 16 and 64 MiB: 48 MiB more in 30.7 ms more (1.64 GB/s), so 32 MiB takes a third
        // of that past 16 MiB's 5.4 ms; a line through those two points would cross zero above zero
        // bytes, so the time is stated as 32 MiB at its average rate, 2.15 GB/s, with no fixed part.
        let (fixed, per_byte) = line_at(&k, 32 * MIB, 0.0, 0.0);
        let expected = 5372.9e-6 + (36026.4e-6 - 5372.9e-6) / 3.0;
        assert!((seconds(&k, 32 * MIB, 0.0) - expected).abs() < 1e-12);
        assert_eq!(fixed, 0.0);
        assert!(((1.0 / per_byte) / 2.152e9 - 1.0).abs() < 0.01, "{}", 1.0 / per_byte);
        // Between 64 KiB and 1 MiB the fixed part is the ~120 µs of the calls, and positive.
        let (fixed, per_byte) = line_at(&k, 256 * KIB, 0.0, 0.0);
        assert!(fixed > 100e-6 && fixed < 135e-6 && per_byte > 0.0, "{fixed} {per_byte}");
        // Below the sweep: the first segment's line, never below zero.
        assert!(seconds(&k, 0, 0.0) > 0.0 && seconds(&k, 16 * KIB, 0.0) < 135.3e-6);
        // Above it: 64 MiB's own cost per byte past the first knot's time goes on (0.56 ms per
        // MiB), not the last segment's 0.64.
        let at_256 = seconds(&k, 256 * MIB, 0.0);
        assert!((at_256 - (36026.4e-6 + (36026.4e-6 - 135.3e-6) / 64.0 * 192.0)).abs() < 1e-9, "{at_256}");
    }

    #[test]
    fn a_growing_cost_per_byte_is_stated_without_a_negative_fixed_part() {
        let k = knots(&host()).unwrap();
        for bytes in [KIB, 64 * KIB, 4 * MIB, 20 * MIB, 64 * MIB, 1 << 30] {
            let (fixed, per_byte) = line_at(&k, bytes, 0.0, 0.0);
            assert!(fixed >= 0.0 && per_byte >= 0.0, "{bytes}: {fixed} {per_byte}");
        }
    }

    #[test]
    fn a_last_segment_that_fell_is_continued_at_the_largest_sizes_own_cost_per_byte() {
        let k = obs(&[(MIB, 100e-6), (16 * MIB, 500e-6), (64 * MIB, 480e-6)]);
        // With no tail: the largest size's own cost per byte past the first knot's time (380 µs
        // for 64 MiB), never the flat 480 µs of a slope that fell.
        let own = 380e-6 / (64 * MIB) as f64;
        assert!((seconds(&k, 256 * MIB, 0.0) - (480e-6 + (192 * MIB) as f64 * own)).abs() < 1e-12);
        // The sweep's cost per byte (a line through every size) does not override it...
        let tail = 1.0 / 100e9;
        assert_eq!(seconds(&k, 256 * MIB, tail), seconds(&k, 256 * MIB, 0.0));
        // ...but carries a sweep on whose largest size cost no more than its smallest.
        let flat = obs(&[(MIB, 100e-6), (16 * MIB, 90e-6), (64 * MIB, 100e-6)]);
        assert!((seconds(&flat, 256 * MIB, tail) - (100e-6 + (192 * MIB) as f64 * tail)).abs() < 1e-12);
    }

    #[test]
    fn a_last_segment_steeper_than_the_largest_size_is_not_carried_on() {
        // A slow 64 MiB median (a busy moment) makes the last segment rise 0.30 ms per MiB where
        // the copy costs 0.17 ms per MiB on average at 64 MiB: 200 MiB goes on at the latter.
        let k = obs(&[(64 * KIB, 40e-6), (16 * MIB, 2.7e-3), (45 * MIB, 5.0e-3), (64 * MIB, 10.7e-3)]);
        let own = (10.7e-3 - 40e-6) / (64 * MIB) as f64;
        let at_200 = seconds(&k, 200 * MIB, 0.0);
        assert!((at_200 - (10.7e-3 + own * (136 * MIB) as f64)).abs() < 1e-12, "{at_200}");
        let carried = 10.7e-3 + (10.7e-3 - 5.0e-3) / (19 * MIB) as f64 * (136 * MIB) as f64;
        assert!(at_200 < 0.7 * carried, "{at_200} against the slope's {carried}");
        // The line past the sweep starts where the sweep ends.
        let (fixed, per_byte) = line_at(&k, 200 * MIB, 0.0, 0.0);
        assert!((fixed + per_byte * (64 * MIB) as f64 - 10.7e-3).abs() < 1e-12 && fixed >= 0.0);
    }

    #[test]
    fn a_size_measured_slower_than_a_larger_one_is_pooled_with_it() {
        // torch→jax by `copy` on the 2-core CPU: 104 KiB measured slower than 180 and 300 KiB.
        let k = obs(&[(64 * KIB, 50.0e-6), (104 * KIB, 83.6e-6), (180 * KIB, 37.8e-6), (300 * KIB, 55.5e-6), (MIB, 147e-6)]);
        let smooth = non_decreasing(&k);
        let level = (83.6e-6 + 37.8e-6 + 55.5e-6) / 3.0;
        assert_eq!(smooth.iter().map(|o| o.bytes).collect::<Vec<_>>(), k.iter().map(|o| o.bytes).collect::<Vec<_>>());
        assert!(smooth[1..4].iter().all(|o| (o.seconds - level).abs() < 1e-15), "{smooth:?}");
        assert_eq!((smooth[0].seconds, smooth[4].seconds), (50.0e-6, 147e-6));
        assert!(smooth.windows(2).all(|w| w[0].seconds <= w[1].seconds));
        // 96 KiB: 57 µs through the pooled knots, where the segment to the slow knot said 77 µs
        // (32.7 µs measured).
        let at = seconds(&smooth, 96 * KIB, 0.0);
        assert!(at > 55e-6 && at < 59e-6 && seconds(&k, 96 * KIB, 0.0) > 75e-6, "{at}");
        // A run that falls over several sizes is pooled into one level; a rising sweep is left as it is.
        let falling = non_decreasing(&obs(&[(KIB, 30e-6), (2 * KIB, 20e-6), (4 * KIB, 10e-6)]));
        assert!(falling.iter().all(|o| (o.seconds - 20e-6).abs() < 1e-15), "{falling:?}");
        assert_eq!(non_decreasing(&host()), host());
    }

    #[test]
    fn below_the_sweep_a_copy_falls_no_faster_than_its_cost_per_byte() {
        // tf->numpy by `copy` on the 2-core CPU: 2.3 µs at 4 KiB, 3.8 at 8 KiB, and 0.1 ns a byte
        // over the sweep. The first segment's 0.37 ns a byte carried down says 1.9 µs at 3 KiB
        // (4.1 measured); at the sweep's cost per byte it is 2.2 µs.
        let k = obs(&[(4 * KIB, 2.3e-6), (8 * KIB, 3.8e-6), (64 * KIB, 8.2e-6), (MIB, 110e-6)]);
        let tail = 1e-10;
        let at = seconds(&k, 3 * KIB, tail);
        assert!((at - (2.3e-6 - tail * KIB as f64)).abs() < 1e-15, "{at}");
        assert!(seconds(&k, 3 * KIB, 0.0) < 1.95e-6, "with no tail the segment's own slope");
        // Inside the sweep nothing changes.
        assert_eq!(seconds(&k, 6 * KIB, tail), seconds(&k, 6 * KIB, 0.0));
    }

    #[test]
    fn the_stated_error_is_measured_on_points_left_out() {
        // An exact line: every inner point is predicted by its neighbours.
        let line = obs(&[(64 * KIB, 5e-6 + 65536.0 / 4e11), (MIB, 5e-6 + 1048576.0 / 4e11), (16 * MIB, 5e-6 + 16777216.0 / 4e11)]);
        assert!(leave_one_out_error(&line, 0.0) < 1e-9);
        // The host path's 16 MiB predicted from 1 and 64 MiB: 8.8 ms against 5.4 ms measured.
        let e = leave_one_out_error(&knots(&host()).unwrap(), 0.0);
        assert!((e - (8833.0 / 5372.9 - 1.0)).abs() < 0.01, "{e}");
        assert_eq!(leave_one_out_error(&obs(&[(KIB, 1e-6), (MIB, 2e-6)]), 0.0), 0.0);
    }

    #[test]
    fn repeated_sizes_meet_at_their_median_and_bad_points_give_none() {
        let k = knots(&obs(&[(MIB, 3e-6), (KIB, 1e-6), (MIB, 9e-6), (MIB, 4e-6)])).unwrap();
        assert_eq!(k, obs(&[(KIB, 1e-6), (MIB, 4e-6)]));
        assert!(knots(&obs(&[(KIB, 1e-6)])).is_none());
        assert!(knots(&obs(&[(KIB, 1e-6), (MIB, f64::NAN)])).is_none());
    }
}
