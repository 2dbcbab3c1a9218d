//! The cost model of this machine: every path's time predicted before it runs.
//!
//! Each path, for one framework pair and one place (a device, the host, a pair of GPUs, another
//! process), costs `fixed + bytes / bandwidth`: the Hockney form NCCL's tuner uses
//! (src/graph/tuning.cc: a latency plus size over bus bandwidth). The two numbers are fitted from a
//! calibration sweep of at least three sizes by least squares on the *relative* error, because the
//! sizes span orders of magnitude and a 4 KiB handoff's 5 µs matters as much to its user as a
//! 256 MiB copy's 700 µs does to theirs. A fit remembers how well it matched its own sweep: that is
//! the error the model states for it, and what a measurement is later checked against.
//!
//! The model is cached per machine (devices, driver, framework versions: [`CostModel::stale_against`]
//! says what changed) by the Python layer, as JSON in the user's cache directory.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::segments;

/// The fewest distinct sizes a fit is made from: two points fit any line, a third checks it.
pub const MIN_SIZES: usize = 3;

/// At and above this many bytes the accuracy goal is the tighter one.
pub const LARGE_BYTES: u64 = 1 << 20;

/// How a share's fixed cost follows the host's speed: as the slowdown's power 0.6, not one for one
/// (part of it is the driver's and the device's work, not the interpreter's). Chosen on the three
/// runs (the 2-core CPU machine, an H100, 2x H200) by refitting their recorded sweeps
/// (benchmarks/replay_advice.py's way): the median error of the shares at 1 MiB and up was 16.3,
/// 10.0 and 13.1 % with it, 16.2, 10.3 and 16.6 % one for one, 17.4, 18.3 and 17.4 % without the
/// speeds. Chosen on those runs: the next run is its out-of-sample check.
pub const HOST_SPEED_EXPONENT: f64 = 0.6;

/// The same for a share in host memory: one for one. There the fixed cost is all host work (the
/// interpreter and the frameworks' own code; no driver call waits on a device), so it follows the
/// host's speed whole. Measured from the calibration sweeps alone (each share path's time at four
/// moments against the host's speed then, one line per path, benchmarks/replay_advice.py): the
/// 2-core CPU machine's two runs gave 0.84 and 0.99 (± 0.11), where the H100's gave
/// 0.56 and 0.59 (± 0.04 and 0.07).
pub const HOST_MEMORY_SPEED_EXPONENT: f64 = 1.0;

/// How a share's fixed cost at `place` follows the host's speed: the slowdown to this power.
pub fn host_speed_exponent(place: &str) -> f64 {
    if place == "cpu" { HOST_MEMORY_SPEED_EXPONENT } else { HOST_SPEED_EXPONENT }
}

/// The model's accuracy goals, as relative errors: below and at/above [`LARGE_BYTES`].
pub const GOAL_SMALL: f64 = 0.30;
pub const GOAL_LARGE: f64 = 0.15;

/// What one calibrated path is keyed by: the framework pair, the path and where it ran.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CostKey {
    /// The path table's kind, written as its word in a label.
    pub kind: crate::paths::PathKind,
    pub path: String,
    pub source: String,
    pub target: String,
    /// Where: `cpu`, `cuda:0`, `cuda:0->cuda:1`, `cuda:0->process`.
    pub place: String,
}

impl CostKey {
    /// The key as a string, as the cache file stores it: `share torch->jax dlpack @cuda:0`.
    pub fn label(&self) -> String {
        format!("{} {}->{} {} @{}", self.kind, self.source, self.target, self.path, self.place)
    }

    pub fn parse(label: &str) -> Option<CostKey> {
        let [kind, source, target, path, place] = split_label(label)?;
        Some(CostKey {
            kind: crate::paths::PathKind::parse(kind)?,
            path: path.into(),
            source: source.into(),
            target: target.into(),
            place: place.into(),
        })
    }
}

/// A label's `[kind, source, target, path, place]`, borrowed: `auto` reads the pair's labels on
/// every share of a calibrated machine, where owning them cost microseconds.
pub(super) fn split_label(label: &str) -> Option<[&str; 5]> {
    let (head, place) = label.rsplit_once(" @")?;
    let mut words = head.split(' ');
    let (kind, pair, path) = (words.next()?, words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let (source, target) = pair.split_once("->")?;
    Some([kind, source, target, path, place])
}

/// One measured point of a calibration sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub bytes: u64,
    /// The median time of one handoff at that size, in seconds.
    pub seconds: f64,
}

/// Which term of `fixed + bytes / bandwidth` dominates a prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The fixed cost (calls, descriptions, synchronisation): the size barely matters.
    Fixed,
    /// The bytes over the bandwidth: a copy.
    Bandwidth,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::Fixed => "fixed cost",
            Bound::Bandwidth => "bandwidth",
        }
    }
}

/// `fixed + bytes / bandwidth` for one path, fitted from a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// Seconds every handoff costs whatever its size.
    pub fixed: f64,
    /// Seconds per byte (0 for a path that moves no bytes: a zero-copy handoff).
    pub per_byte: f64,
    /// The sizes it was fitted from, in bytes.
    pub sizes: Vec<u64>,
    /// The largest |predicted − measured| / measured over its own sweep: the error it states.
    pub error: f64,
    /// The path's verdict over its sweep: `Some(true)` shared at every size, `Some(false)` copied
    /// at every size, `None` not said or both (its verdict depends on the array: JAX copies a
    /// NumPy array that is not 64-byte aligned). `auto` replaces a path only by one with the same
    /// verdict, so never a path of `None`, nor by one.
    #[serde(default)]
    pub shares: Option<bool>,
    /// For a path that copies: the sweep's points, one per size (the median there, made
    /// non-decreasing in size), that its line per range of sizes joins ([`super::segments`]); then `fixed` and `per_byte` are the one line over the whole
    /// sweep, shown in the model's table, and a prediction takes the line of its own range.
    /// Empty: the one line holds at every size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knots: Vec<Observation>,
    /// The host's speed its fixed cost is stated at ([`CostModel::add_measured`]): seconds of a
    /// fixed piece of host work, the median over its sweep. `None`: not measured; the fixed cost is
    /// then predicted as it was fitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_speed: Option<f64>,
    /// The power of the slowdown its fixed cost follows ([`host_speed_exponent`] of its place);
    /// `None` (a model cached before the place decided it): [`HOST_SPEED_EXPONENT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_exponent: Option<f64>,
    /// Bytes per second of the slowest resource its copy crosses (the machine's measured ceiling,
    /// `gpushare.ceilings()`), at the largest size measured: past the sweep its cost per byte is
    /// never below that. The last segment's slope alone can be far cheaper: on 2x H200 a copy
    /// within one GPU rose 11.7 µs from 16 to 64 MiB, and carried on it predicted 1 GiB at
    /// 4.0 TB/s, twice what that memory copies at. `None`: not known (the slope goes on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<f64>,
    /// The error of its largest size predicted from the rest of the sweep without it: what a
    /// prediction past the sweep is held to (a copy's cost per byte can change past the last size
    /// measured, as it did between each two of them). `None`: `error` holds there too (a constant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beyond_error: Option<f64>,
    /// For a path that copies: each knot's time predicted by the segments made without it, as a
    /// relative error (0 at the two ends, which nothing on both sides predicts). A knot missed by
    /// [`STEP_ERROR`] or more marks a step in the cost that lies between its neighbours: the two
    /// segments beside it are stated with that error ([`Fit::step_at`]), and `error` is that of the
    /// other knots, so one step does not take the numbers from every size of the path. Empty: a
    /// model cached before this was kept (`error` then holds everywhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_out: Vec<f64>,
    /// For a path that copies: the ranges between two neighbouring sizes of its sweep over which
    /// its cost per byte rose [`REGIME_CHANGE`] times or more ([`segments::regime_changes`]), where
    /// it changed how it copies; the sizes beside each give words, not a number
    /// ([`Fit::regime_change_at`]). Empty: none, or a model cached before these were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regime_changes: Vec<segments::RegimeChange>,
}

impl Fit {
    /// The least-squares fit of `fixed + per_byte * bytes` to `points`, minimising the relative
    /// residuals, with neither term negative (a negative fixed cost or bandwidth means the points
    /// are noise around the other term alone: that term is refitted by itself). `None` with fewer
    /// than [`MIN_SIZES`] distinct sizes or a non-positive or non-finite time.
    pub fn from_observations(points: &[Observation]) -> Option<Fit> {
        let mut sizes: Vec<u64> = points.iter().map(|p| p.bytes).collect();
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.len() < MIN_SIZES || points.iter().any(|p| !(p.seconds.is_finite() && p.seconds > 0.0)) {
            return None;
        }
        // Weighted least squares with weights 1/t²: minimise Σ ((a + b·n − t) / t)².
        let (mut sw, mut swn, mut swnn, mut swt, mut swnt) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for p in points {
            let (n, t) = (p.bytes as f64, p.seconds);
            let w = 1.0 / (t * t);
            sw += w;
            swn += w * n;
            swnn += w * n * n;
            swt += w * t;
            swnt += w * n * t;
        }
        let det = sw * swnn - swn * swn;
        let (mut fixed, mut per_byte) = if det.abs() > f64::EPSILON * sw * swnn {
            ((swt * swnn - swn * swnt) / det, (sw * swnt - swn * swt) / det)
        } else {
            (swt / sw, 0.0)
        };
        // A per-byte term worth under 5 % of the time even at the largest size swept is noise the
        // sweep cannot tell from none: a zero-copy handoff does not have a bandwidth of 100 TB/s.
        let largest = *sizes.last().expect("three sizes at least") as f64;
        let negligible = per_byte * largest < 0.05 * (fixed + per_byte * largest);
        if per_byte < 0.0 || negligible {
            (fixed, per_byte) = (swt / sw, 0.0);
        } else if fixed < 0.0 {
            (fixed, per_byte) = (0.0, swnt / swnn);
        }
        let mut fit = Fit { fixed, per_byte, sizes, error: 0.0, shares: None, knots: Vec::new(), host_speed: None, speed_exponent: None, ceiling: None, beyond_error: None, held_out: Vec::new(), regime_changes: Vec::new() };
        fit.error = points.iter().map(|p| fit.relative_error(p)).fold(0.0, f64::max);
        Some(fit)
    }

    /// A fit with no per-byte term (a zero-copy handoff): the relative-error-weighted mean. The
    /// error it states is how far each size of the sweep lay from the constant fitted to the
    /// others (one size held out at a time, [`held_out_constant_error`]), and never less than
    /// how far repeated measurements of one size lay apart ([`rounds_spread`]): its own residuals
    /// flatter it, since the point being checked pulled the mean towards itself.
    pub fn constant(points: &[Observation]) -> Option<Fit> {
        let mut fit = Fit::from_observations(points)?;
        fit.fixed = weighted_constant(points);
        fit.per_byte = 0.0;
        fit.error = held_out_constant_error(points).max(rounds_spread(points));
        Some(fit)
    }

    /// A path that copies: its line per range of sizes through the sweep's points, made
    /// non-decreasing in size ([`super::segments::non_decreasing`]: a size measured slower than a
    /// larger one is noise in one of them) ([`super::segments`]), which a cost per byte that changes with size needs (a cache, the
    /// allocator), with the one line kept for what lies beyond and for the model's table. The error
    /// it states is measured on points left out of the sweep, since the segments meet every point
    /// of it, and never less than the spread of repeated measurements of one size; past the sweep,
    /// the largest size predicted without it ([`Fit::beyond_error`]). With fewer than
    /// [`MIN_SIZES`] sizes, as [`Fit::from_observations`].
    ///
    /// A knot missed by [`STEP_ERROR`] or more marks a step in the cost (on an H200 the `host`
    /// path torch→jax cost 0.19 ms per MiB up to 3 MiB and 1.05 ms per MiB from 8 MiB): only the
    /// segments beside it are stated with that error.
    pub fn segmented(points: &[Observation]) -> Option<Fit> {
        let mut fit = Fit::from_observations(points)?;
        let measured = segments::knots(points)?;
        fit.knots = segments::non_decreasing(&measured);
        fit.held_out = segments::held_out_errors(&measured, fit.per_byte);
        fit.regime_changes = segments::regime_changes(points, &measured);
        // One step: one knot missed that far, or two side by side (a step between them can throw
        // both off their neighbours' lines). Knots missed that far in two places are not a step
        // but a path that did not hold still: every size is stated with the worst.
        let missed: Vec<usize> = (0..fit.held_out.len()).filter(|&i| fit.held_out[i] >= STEP_ERROR).collect();
        let one_step = match missed.as_slice() {
            [] | [_] => true,
            [a, b] => b - a == 1,
            _ => false,
        };
        let stated = fit.held_out.iter().copied().filter(|e| !one_step || *e < STEP_ERROR).fold(0.0, f64::max);
        fit.error = stated.max(rounds_spread(points));
        fit.beyond_error = Some(segments::leave_last_out_error(&measured, fit.per_byte).max(fit.error));
        Some(fit)
    }

    /// `(from, to, error)` of the segment holding `bytes` where a step in the cost lies beside
    /// it: one of its two knots was missed by [`STEP_ERROR`] or more when predicted without it,
    /// so the cost between `from` and `to` bends where the calibration cannot place it. `None`
    /// elsewhere, and outside the sweep (past it [`Fit::beyond_error`] speaks).
    pub fn step_at(&self, bytes: u64) -> Option<(u64, u64, f64)> {
        if self.held_out.len() != self.knots.len() || self.knots.len() < 3 {
            return None;
        }
        let i = self.knots.windows(2).position(|w| bytes >= w[0].bytes && bytes <= w[1].bytes)?;
        let error = self.held_out[i].max(self.held_out[i + 1]);
        (error >= STEP_ERROR).then(|| (self.knots[i].bytes, self.knots[i + 1].bytes, error))
    }

    /// `(from, to, factor)` of the largest change of regime ([`Fit::regime_changes`]) that `bytes`
    /// lies beside: inside its range, or in the range of the sweep's sizes next to it on either
    /// side. Within one regime a copy costs `fixed + per_byte * bytes`, so its time per byte never
    /// rises with size; a rise means the copy changed regime between the two sizes (an allocator
    /// that maps large blocks afresh, a cache that stops holding the data), and where that happens
    /// moves with what ran before: glibc serves blocks up to 32 MiB from its heap once one that
    /// large was freed, and maps each one afresh before. On the 2-core CPU a `host` copy of 24 MiB
    /// took 4.4-6.8 ms in one run and 8.9-15.9 ms in the calibration before it, which predicted it
    /// at up to 3.3x. A size that close may cost either regime's price, so no number within 2x can
    /// be promised: `factor` is the rise. `None` elsewhere and outside the sweep.
    pub fn regime_change_at(&self, bytes: u64) -> Option<(u64, u64, f64)> {
        if bytes > self.largest() {
            return None;
        }
        // Asked with every prediction: the knots are read in place, nothing is allocated.
        let next_below = |b: u64| self.knots.iter().rev().map(|k| k.bytes).find(|&s| s < b).unwrap_or(b);
        let next_above = |b: u64| self.knots.iter().map(|k| k.bytes).find(|&s| s > b).unwrap_or(b);
        self.regime_changes
            .iter()
            .filter(|c| (next_below(c.from)..=next_above(c.to)).contains(&bytes))
            .map(|c| (c.from, c.to, c.rise))
            .max_by(|a, b| a.2.total_cmp(&b.2))
    }

    /// The sizes a calibration should measure next for this fit: the geometric middle (rounded
    /// to 4 KiB) of every gap between two of its sizes wider than [`REFINE_WIDE`], where a copy's
    /// cost per byte can change with nothing at the gap's ends to show it (on the 2-core CPU
    /// torch→tf by `host` ran 0.13 ms per MiB from 1 to 3 MiB and far more from there to 8 MiB,
    /// while 512 KiB, 1 and 8 MiB lay on one line), and of each gap at least [`REFINE_GAP`] wide
    /// beside every knot its neighbours' line missed by [`REFINE_ERROR`] or more.
    /// Empty for a fit with no knots (a path that moves no bytes).
    pub fn refinements(&self) -> Vec<u64> {
        if self.held_out.len() != self.knots.len() || self.knots.len() < 3 {
            return Vec::new();
        }
        let middle = |lo: u64, hi: u64| (((lo as f64 * hi as f64).sqrt() as u64) / 4096 * 4096).max(lo + 1);
        let gaps = |lo: usize, hi: usize| (self.knots[lo].bytes, self.knots[hi].bytes);
        let mut sizes: Vec<u64> = (1..self.knots.len())
            .map(|i| gaps(i - 1, i))
            .filter(|&(lo, hi)| lo > 0 && hi as f64 > REFINE_WIDE * lo as f64)
            .map(|(lo, hi)| middle(lo, hi))
            .collect();
        for (knot, _) in self.held_out.iter().enumerate().filter(|(_, e)| **e >= REFINE_ERROR) {
            sizes.extend(
                [(knot.saturating_sub(1), knot), (knot, knot + 1)]
                    .into_iter()
                    .filter(|&(lo, hi)| lo < hi && hi < self.knots.len())
                    .map(|(lo, hi)| gaps(lo, hi))
                    .filter(|&(lo, hi)| lo > 0 && hi as f64 >= REFINE_GAP * lo as f64)
                    .map(|(lo, hi)| middle(lo, hi)),
            );
        }
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// `(fixed, per_byte)` of the line that holds at `bytes`.
    pub fn line_at(&self, bytes: u64) -> (f64, f64) {
        let floor = self.ceiling.filter(|c| c.is_finite() && *c > 0.0).map_or(0.0, |c| 1.0 / c);
        if self.knots.len() >= 2 {
            segments::line_at(&self.knots, bytes, self.per_byte, floor)
        } else if self.per_byte > 0.0 && self.per_byte < floor && bytes > self.largest() {
            // One line over a copy (a model cached before segments): past its sweep no cheaper per
            // byte than the slowest resource it crosses, carried on from its largest size.
            let (largest, n) = (self.largest() as f64, bytes as f64);
            let at_largest = self.fixed + self.per_byte * largest;
            let fixed = at_largest - floor * largest;
            // As a segment states it: neither part negative.
            if fixed >= 0.0 { (fixed, floor) } else { (0.0, (at_largest + floor * (n - largest)) / n) }
        } else {
            (self.fixed, self.per_byte)
        }
    }

    /// Predicted seconds for `bytes`.
    pub fn seconds(&self, bytes: u64) -> f64 {
        let (fixed, per_byte) = self.line_at(bytes);
        fixed + per_byte * bytes as f64
    }

    /// Bytes per second of the per-byte term; `None` for a path that moves no bytes. A parameter
    /// of the line, not a rate any copy reached: over a sweep whose fixed cost grows with size it
    /// reads far above the hardware (7.7 TB/s for a copy within one H200, whose copies measured
    /// 1.9 TB/s at most). Tables show [`Fit::largest_throughput`] instead.
    pub fn bandwidth(&self) -> Option<f64> {
        (self.per_byte > 0.0).then(|| 1.0 / self.per_byte)
    }

    /// `(bytes, bytes per second)` at the largest size the sweep measured: the rate a copy of that
    /// size reached, fixed cost included (what a table's bandwidth means, and what the hardware's
    /// ceiling bounds); `None` for a path that moves no bytes or a fit that names no size.
    pub fn largest_throughput(&self) -> Option<(u64, f64)> {
        if self.per_byte <= 0.0 {
            return None;
        }
        let largest = self.sizes.iter().copied().max().or_else(|| self.knots.last().map(|k| k.bytes))?;
        let seconds = self.seconds(largest);
        (seconds > 0.0).then(|| (largest, largest as f64 / seconds))
    }

    /// Which term dominates at `bytes`.
    pub fn bound(&self, bytes: u64) -> Bound {
        let (fixed, per_byte) = self.line_at(bytes);
        if per_byte * bytes as f64 > fixed { Bound::Bandwidth } else { Bound::Fixed }
    }

    /// How much slower the host is at `host_speed` than the speed this fit's fixed cost is stated
    /// at (1.0 where either is unknown).
    pub fn slowdown(&self, host_speed: Option<f64>) -> f64 {
        match (self.host_speed, host_speed) {
            (Some(then), Some(now)) if then > 0.0 && now.is_finite() && now > 0.0 => now / then,
            _ => 1.0,
        }
    }

    /// The factor the fixed cost takes at `host_speed`: the slowdown to its place's exponent.
    fn fixed_factor(&self, host_speed: Option<f64>) -> f64 {
        self.slowdown(host_speed).powf(self.speed_exponent.unwrap_or(HOST_SPEED_EXPONENT))
    }

    /// Predicted seconds for `bytes` with the host running at `host_speed`: the fixed part scales
    /// with the host's speed, the per-byte part (a copy engine, a link, memory) does not.
    pub fn seconds_at(&self, bytes: u64, host_speed: Option<f64>) -> f64 {
        let seconds = self.seconds(bytes);
        seconds + self.fixed.min(seconds) * (self.fixed_factor(host_speed) - 1.0)
    }

    fn relative_error(&self, p: &Observation) -> f64 {
        (self.seconds(p.bytes) - p.seconds).abs() / p.seconds
    }

    /// How far a measurement may lie from this fit's prediction before a table flags it: the
    /// error the fit showed on sizes it did not see (and between repeated measurements), past the
    /// sweep the error of its largest size predicted without it, and never tighter than the
    /// model's accuracy goal for that size (a fit that happened to match its held-out points
    /// still has noise to come).
    pub fn tolerance(&self, bytes: u64) -> f64 {
        let goal = if bytes >= LARGE_BYTES { GOAL_LARGE } else { GOAL_SMALL };
        let beyond = if bytes > self.largest() { self.beyond_error.unwrap_or(0.0) } else { 0.0 };
        let step = self.step_at(bytes).map_or(0.0, |(_, _, error)| error);
        // A rise of `factor` in the cost per byte: a size beside it may cost either side's price.
        let regime = self.regime_change_at(bytes).map_or(0.0, |(_, _, factor)| factor - 1.0);
        self.error.max(beyond).max(step).max(regime).max(goal)
    }

    /// The largest size it was fitted from, bytes (0 when it names none).
    pub fn largest(&self) -> u64 {
        self.sizes.iter().copied().max().or_else(|| self.knots.last().map(|k| k.bytes)).unwrap_or(0)
    }

    /// Whether `bytes` lies inside the sizes it was fitted from: not above the largest (past it
    /// every line is only carried on), nor more than 4x below the smallest (below it a handoff is
    /// its fixed cost, which the smallest size measured).
    pub fn covers(&self, bytes: u64) -> bool {
        self.extrapolated_from(bytes).is_none()
    }

    /// The calibrated size a prediction for `bytes` is carried on from, where it lies outside the
    /// sweep ([`Fit::covers`]): the largest size above it, the smallest far below it.
    pub fn extrapolated_from(&self, bytes: u64) -> Option<u64> {
        let lo = self.sizes.iter().copied().min().or_else(|| self.knots.first().map(|k| k.bytes))?;
        let hi = self.largest();
        if bytes > hi {
            Some(hi)
        } else if bytes < lo / 4 {
            Some(lo)
        } else {
            None
        }
    }
}

/// The relative-error-weighted constant of `points`: minimises Σ ((c − t) / t)².
fn weighted_constant(points: &[Observation]) -> f64 {
    let (sw, swt) = points.iter().fold((0.0, 0.0), |(sw, swt), p| (sw + 1.0 / (p.seconds * p.seconds), swt + 1.0 / p.seconds));
    swt / sw
}

/// The largest |c − t| / t of a size's time `t` (the median of its measurements) against the
/// constant `c` fitted to the other sizes: a constant's error on sizes it did not see. 0 with
/// fewer than two sizes.
///
/// Why the largest and not a robust quantile: refitting two recorded 2x H200 runs (docs/gpu-results/),
/// the sharing rows measured beyond their stated error were 11 and 20 of 124 with the
/// largest, 22 and 36 with the largest but one. One high size held out can never state 100 % or
/// more (the constant of the others lies below it); only a size that ran at under half the others'
/// level can, and then the path's level did move.
pub fn held_out_constant_error(points: &[Observation]) -> f64 {
    let Some(knots) = segments::knots(points) else { return 0.0 };
    (0..knots.len())
        .map(|i| {
            let mut others = knots.clone();
            let held = others.remove(i);
            (weighted_constant(&others) - held.seconds).abs() / held.seconds
        })
        .fold(0.0, f64::max)
}

/// How far repeated measurements of one size lay apart: the largest |t − median| / median over
/// the sizes measured more than once (a process sweep's rounds). What a fit cannot promise to do
/// better than, however well it matched the medians. 0 where no size was measured twice.
pub fn rounds_spread(points: &[Observation]) -> f64 {
    let Some(knots) = segments::knots(points) else { return 0.0 };
    knots
        .iter()
        .map(|k| {
            points
                .iter()
                .filter(|p| p.bytes == k.bytes)
                .map(|p| (p.seconds - k.seconds).abs() / k.seconds)
                .fold(0.0, f64::max)
        })
        .fold(0.0, f64::max)
}

/// At or above this stated error a prediction is not given as a number: a row it describes cannot
/// be promised within 2x, and says so instead ([`Prediction::unpredictable`]).
pub const UNPREDICTABLE_TOLERANCE: f64 = 1.0;

/// A knot of a copying path's segments missed by this much when predicted from its neighbours
/// marks a step in the cost between them ([`Fit::step_at`]): the segments beside it cannot be
/// promised within 2x, the rest of the path can be held to the other knots' error.
pub const STEP_ERROR: f64 = UNPREDICTABLE_TOLERANCE;

/// A knot missed by this much when predicted from its neighbours is worth measuring around
/// ([`Fit::refinements`]): a calibration measures the middle of each gap beside it.
pub const REFINE_ERROR: f64 = GOAL_SMALL;

/// A copy's gap between two calibrated sizes wider than this (the larger over the smaller) is
/// always measured in the middle ([`Fit::refinements`]): the default sweep's 64 KiB to 512 KiB and
/// 1 to 8 MiB are 8x.
pub const REFINE_WIDE: f64 = 4.0;

/// A gap between two calibrated sizes that [`Fit::refinements`] splits beside a missed knot is at
/// least this wide (the larger over the smaller). On an H200 the `host` path cupy→torch cost
/// 3.9 ms at 16 MiB and 17.2 ms at 32 MiB, and 4.9 ms at 24 MiB (host allocations of 32 MiB and up
/// are mapped afresh each time): the line across that 2x gap predicted 24 MiB at 2.1x its time.
pub const REFINE_GAP: f64 = 2.0;

/// Over a fit's sweep, a host whose own speed varied by more than this factor was busy: the 2-core
/// CPU shared by other work read 1.3x between quiet moments, and 2x and more under load.
pub const BUSY_HOST_SPREAD: f64 = 1.5;

/// A rise of a copy's cost per byte by this factor or more between two neighbouring calibrated
/// sizes marks a change of regime whose place moves ([`Fit::regime_change_at`]): the sizes beside
/// it cannot be promised within 2x.
pub const REGIME_CHANGE: f64 = 2.0;

/// What a table's predicted cell reads for such a prediction.
pub const UNPREDICTABLE_CELL: &str = "not within 2x";

/// A predicted time, with what it rests on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "CostPrediction")]
pub struct Prediction {
    /// Seconds.
    pub seconds: f64,
    /// The fixed part, seconds.
    pub fixed: f64,
    /// Bytes per second of the per-byte part (`None`: the path moves no bytes): a parameter of the
    /// line, which can lie far above any rate a copy reaches (a copy whose cost is mostly fixed
    /// fits a shallow slope); the rate is `rate`.
    pub bandwidth: Option<f64>,
    /// Bytes per second this array is predicted to move at: its bytes over the predicted time, less
    /// any wait for queued work (`None`: the path moves no bytes). What tables and `advise` show.
    #[serde(default)]
    pub rate: Option<f64>,
    /// `fixed cost` or `bandwidth`.
    pub bound: String,
    /// The relative error the model states for it (see [`Fit::tolerance`]).
    pub tolerance: f64,
    /// Whether the size lies outside the sweep it was fitted from: above its largest size, or
    /// more than 4x below its smallest.
    pub extrapolated: bool,
    /// The calibrated size an extrapolated prediction is carried on from (`None`: inside the sweep).
    #[serde(default)]
    pub extrapolated_from: Option<u64>,
    /// Why this prediction is not a number to hold the path to, in words, where its stated error
    /// is 100 % or more ([`UNPREDICTABLE_TOLERANCE`]): the fit missed sizes it did not see by
    /// that much, so the measured time may lie anywhere from half to twice `seconds` or beyond;
    /// or where the rules predict this array a verdict the calibration's arrays did not have
    /// ([`CostModel::predict_for_array`]: a fit of copies does not price a handoff that shares).
    /// Tables show these words instead of the time. `None`: `seconds` is predicted within
    /// `tolerance`.
    #[serde(default)]
    pub unpredictable: Option<String>,
    /// Whether `unpredictable` says so because the rules predict this array a verdict its fit was
    /// not measured with: the model has no word on this path for this array, so where it is the
    /// rules' own choice it is not overruled ([`crate::advice::advise::Advice::decide`], and `auto`
    /// alike: crate::auto::resolve_auto_for_array).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unlike_its_fit: bool,
    /// Seconds added for the producer's queued work a host-side synchronise waits for.
    #[serde(default)]
    pub waits_for_queue: f64,
    /// Seconds added for making the array's device current for the handoff and the one that was
    /// current again after (another device was current: [`CostModel::with_device_switch`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub device_switch: f64,
    /// How much slower (above 1) or faster the host ran, when this was predicted, than when the
    /// path was calibrated: the fixed cost is scaled by it (`None`: the host's speed was not
    /// measured then or now).
    #[serde(default)]
    pub host_slowdown: Option<f64>,
}

/// The words a prediction gives instead of its time where its stated error reaches
/// [`UNPREDICTABLE_TOLERANCE`], saying what made it so.
fn unpredictable_words(tolerance: f64, fit: &Fit, bytes: u64, slowdown: f64) -> Option<String> {
    if tolerance < UNPREDICTABLE_TOLERANCE {
        return None;
    }
    let beyond = fit.beyond_error.filter(|b| bytes > fit.largest() && *b > fit.error);
    let step = fit.step_at(bytes).filter(|_| beyond.is_none());
    let regime = fit.regime_change_at(bytes).filter(|_| beyond.is_none() && step.is_none());
    let why = match beyond {
        // The fit alone would have held: the host's speed moved too far since it was calibrated.
        _ if fit.tolerance(bytes) < UNPREDICTABLE_TOLERANCE => format!(
            "the host runs {:.2}x {} than when this path was calibrated: the fixed cost's correction for it ({:.0} %) \
             and the fit's own error ({:.0} %) together reach 100 %; calibrate again on this machine as it runs now",
            if slowdown >= 1.0 { slowdown } else { 1.0 / slowdown },
            if slowdown >= 1.0 { "slower" } else { "faster" },
            (tolerance - fit.tolerance(bytes)) * 100.0,
            fit.tolerance(bytes) * 100.0,
        ),
        Some(b) => format!(
            "past the largest size calibrated ({}) its line missed that size, predicted without it, by {:.0} %",
            crate::render::units::bytes(fit.largest()),
            b * 100.0
        ),
        None if step.is_some() => {
            let (from, to, error) = step.expect("checked");
            format!(
                "its cost steps somewhere between the sizes calibrated at {} and {} (the line through its neighbours \
                 missed one of them by {:.0} %); calibrate with sizes inside that range to place it",
                crate::render::units::bytes(from),
                crate::render::units::bytes(to),
                error * 100.0
            )
        }
        None if regime.is_some() => {
            let (from, to, factor) = regime.expect("checked");
            format!(
                "its cost per byte rises {factor:.1}x between the sizes calibrated at {} and {} (an allocator or a cache \
                 changes how it copies there, at a size that moves with what ran before): a size this close may cost \
                 either side's price",
                crate::render::units::bytes(from),
                crate::render::units::bytes(to),
            )
        }
        None => format!("its fit missed sizes it did not see (or its repeated measurements differed) by up to {:.0} %", fit.error * 100.0),
    };
    Some(format!("not predictable within 2x here: {why}"))
}

/// The words a prediction gives instead of its time where the rules predict this array a verdict
/// (`shares`) its fit was not measured with: a line fitted to copies prices bytes a handoff that
/// shares does not move (JAX copies a NumPy array that is not 64-byte aligned and shares one that
/// is, so a calibration of such a pair can fit copies, and a 200 MiB array that shares was
/// predicted 136x its time), and a constant fitted to handoffs that moved no bytes prices none of
/// the bytes a copy moves (a dtype the target converts, a layout it compacts).
fn verdict_unlike_its_fit(fit: &Fit, shares: bool) -> Option<String> {
    let priced_by_bytes = fit.per_byte > 0.0 || !fit.knots.is_empty();
    let why = if shares && priced_by_bytes && fit.shares != Some(true) {
        "this array is shared, and the calibration's arrays were copied (at some sizes or all): its fit prices bytes this handoff does not move"
    } else if !shares && !priced_by_bytes && fit.shares != Some(false) {
        "this array is copied, and the calibration's arrays were not: its fit prices none of the bytes this copy moves"
    } else {
        return None;
    };
    Some(format!("not predictable within 2x here: {why}"))
}

impl Fit {
    /// Whether this fit prices a handoff whose verdict is `shares` ([`verdict_unlike_its_fit`]).
    pub fn prices(&self, shares: bool) -> bool {
        verdict_unlike_its_fit(self, shares).is_none()
    }
}

impl Prediction {
    /// Whether `measured` seconds lie further from this prediction than the model's stated error.
    /// A prediction that gave no number ([`Prediction::unpredictable`]) promised nothing to miss.
    pub fn misses(&self, measured: f64) -> bool {
        self.unpredictable.is_none()
            && measured.is_finite() && measured > 0.0 && (self.seconds - measured).abs() / measured > self.tolerance
    }
}

/// How a handoff is ordered against the producer's queued work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ordering {
    /// An event on the device (DLPack's stream argument): the host does not wait.
    DeviceEvent,
    /// gpushare synchronises the source's stream on the host first: the host waits for all of the
    /// producer's queued work (`capsule` and `cai` carry no stream).
    HostSynchronise,
    /// The producer's own call waits or copies synchronously (a framework's move, a host copy).
    ProducerWait,
    /// Nothing to order: host memory.
    None,
    /// Nothing orders it: a legacy capsule into a consumer that reads on its own stream, or the
    /// interface's stream into a consumer that ignores it (JAX), may be read before the producer's
    /// queued work lands. Never recommended on a GPU.
    Unordered,
    /// The producer's stream travels with the array (`__cuda_array_interface__`'s `stream`): the
    /// consumer orders its reads after it.
    ConsumerOrders,
}

impl Ordering {
    pub fn describe(self) -> &'static str {
        match self {
            Ordering::DeviceEvent => "the consumer's stream passed to __dlpack__: the producer orders on the device (a consumer may still wait on the host: JAX does)",
            Ordering::HostSynchronise => "a host-side synchronise: the host waits for the producer's queued work",
            Ordering::ProducerWait => "the producer's own call, which waits for its work",
            Ordering::None => "nothing: host memory has no queue to order against",
            Ordering::Unordered => "nothing the consumer honours (a legacy capsule carries no stream, and some consumers, JAX among them, ignore the one in __cuda_array_interface__), so it may read before the producer's queued work lands",
            Ordering::ConsumerOrders => "the producer's stream in __cuda_array_interface__: the consumer orders its reads after it",
        }
    }
}

/// What one device switch around a handoff cost when the calibration measured it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeviceSwitch {
    /// Seconds a handoff adds.
    pub seconds: f64,
    /// The host's speed then ([`CostModel::add_measured`]'s fixed piece of work, seconds): the
    /// switch is host work (the framework's Python and two driver calls), so it scales with the
    /// host's speed as a share's fixed cost in host memory does, one for one.
    #[serde(default)]
    pub host_speed: Option<f64>,
}

/// The calibrated model of one machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    /// What the model was made for: devices, driver, framework versions (as the Python layer
    /// describes them). A model whose key differs from the machine's is stale.
    pub machine: serde_json::Value,
    /// `CostKey::label()` → its fit.
    pub fits: BTreeMap<String, Fit>,
    /// The sweep's raw points, kept so a later fit (or a reader) needs no rerun.
    #[serde(default)]
    pub observations: BTreeMap<String, Vec<Observation>>,
    /// The host's speed measured with each of those points (seconds of a fixed piece of host work,
    /// one per point), where the sweep measured it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub host_speeds: BTreeMap<String, Vec<f64>>,
    /// Seconds a handoff from a framework spends making the array's device current, and the device
    /// that was current again after, where another device was current (`torch@cuda:0` → seconds;
    /// [`CostModel::device_switch`]). Measured apart from the sweeps, which run with the array's
    /// device current: on 2x H200 torch→cupy by `capsule` took 2.2–3.9 µs with cuda:0 current and
    /// 4.4–4.8 µs with cuda:1 current (JAX makes the last GPU current), at every size.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub device_switches: BTreeMap<String, DeviceSwitch>,
    /// When it was made, seconds since the epoch.
    #[serde(default)]
    pub created: f64,
}

impl CostModel {
    pub fn new(machine: serde_json::Value, created: f64) -> CostModel {
        CostModel { machine, created, ..Default::default() }
    }

    /// Bounds the fit of `key` by `ceiling` (bytes per second, see [`Fit::ceiling`]); a ceiling
    /// that is not a positive number bounds nothing.
    pub fn set_ceiling(&mut self, key: &CostKey, ceiling: Option<f64>) {
        if let Some(fit) = self.fits.get_mut(&key.label()) {
            fit.ceiling = ceiling.filter(|c| c.is_finite() && *c > 0.0);
        }
    }

    /// Fits `points` for `key` and keeps both; false when they cannot be fitted (fewer than three
    /// sizes, a failed measurement). `shares`: whether the path shared memory in that sweep.
    pub fn add(&mut self, key: &CostKey, points: Vec<Observation>, shares: Option<bool>) -> bool {
        self.add_measured(key, points, None, shares)
    }

    /// [`CostModel::add`] of points each measured with the host's speed of that moment
    /// (`host_speeds`, one per point: seconds of a fixed piece of host work).
    ///
    /// Why: a handoff's fixed cost is host work (the interpreter, the frameworks' own code, driver
    /// calls), and on a shared host that speed drifts. On the H100 and the 2× H200 the
    /// share paths measured a minute after calibration lay a median 19 % above and 33 % below
    /// their fits, every path of a pair off by about the same factor. Each point's fixed part is
    /// brought to the sweep's median speed before fitting, and [`CostModel::predict`] scales it to
    /// the speed measured when it predicts; the per-byte part is left as measured.
    pub fn add_measured(&mut self, key: &CostKey, points: Vec<Observation>, host_speeds: Option<Vec<f64>>, shares: Option<bool>) -> bool {
        let label = key.label();
        let constant = priced_constant(key, shares);
        let fit_of = |pts: &[Observation]| fit_by_what_it_does(pts, constant, shares);
        let speeds = host_speeds.filter(|s| s.len() == points.len() && s.iter().all(|v| v.is_finite() && *v > 0.0));
        let exponent = host_speed_exponent(&key.place);
        let fit = match &speeds {
            None => fit_of(&points),
            Some(speeds) => fit_of(&points).and_then(|raw| {
                let reference = median(speeds);
                let steady: Vec<Observation> = points
                    .iter()
                    .zip(speeds)
                    .map(|(p, speed)| {
                        // The fixed part of this point, as measured (all of a shared handoff's time).
                        let fixed = if constant { p.seconds } else { raw.fixed.min(p.seconds) };
                        let factor = (speed / reference).powf(exponent);
                        Observation { bytes: p.bytes, seconds: p.seconds - fixed * (1.0 - 1.0 / factor) }
                    })
                    .collect();
                fit_of(&steady).map(|f| Fit { host_speed: Some(reference), speed_exponent: Some(exponent), ..f })
            }),
        };
        let fit = fit.map(|f| Fit { shares, ..f });
        self.observations.insert(label.clone(), points);
        match speeds {
            Some(speeds) => self.host_speeds.insert(label.clone(), speeds),
            None => self.host_speeds.remove(&label),
        };
        match fit {
            Some(fit) => {
                self.fits.insert(label, fit);
                true
            }
            None => {
                self.fits.remove(&label);
                false
            }
        }
    }

    pub fn fit(&self, key: &CostKey) -> Option<&Fit> {
        self.fits.get(&key.label())
    }

    /// The fits too uncertain to recommend from (their stated error reaches
    /// [`UNPREDICTABLE_TOLERANCE`]), each with why: a busy machine where the host's own speed
    /// (the fixed piece of work measured with each point) varied by more than [`BUSY_HOST_SPREAD`]
    /// over its sweep, else a drifting path (its times moved while the host's speed held).
    pub fn uncertain(&self) -> Vec<(String, String)> {
        self.fits
            .iter()
            .filter_map(|(label, fit)| {
                let spread = self.host_speeds.get(label).and_then(|s| {
                    let (lo, hi) = s.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
                    (lo > 0.0 && hi.is_finite()).then(|| hi / lo)
                });
                // A step in the cost measured on a steady host is the path's own ([`Fit::step_at`]
                // flags the sizes beside it); on a busy one it may be the machine's noise.
                let busy = spread.is_some_and(|s| s > BUSY_HOST_SPREAD);
                let step = if busy { fit.held_out.iter().copied().fold(0.0, f64::max) } else { 0.0 };
                let error = fit.error.max(fit.beyond_error.unwrap_or(0.0)).max(step);
                (error >= UNPREDICTABLE_TOLERANCE).then_some((label, spread, error))
            })
            .map(|(label, spread, error)| {
                let error = error * 100.0;
                let why = match spread {
                    Some(s) if s > BUSY_HOST_SPREAD => format!("busy machine: the host's speed varied {s:.1}x during its sweep, and the fit missed held-out sizes by {error:.0} %"),
                    _ => format!("drifting path: its times missed held-out sizes by {error:.0} % while the host's speed held"),
                };
                (label.clone(), why)
            })
            .collect()
    }

    /// The sizes a calibration should measure next, each `(key, bytes)`: where a copying path's
    /// cost bends between two sizes it measured ([`Fit::refinements`]), so that the bend is placed
    /// rather than drawn as a straight line (which, on an H200, predicted torch→jax by `host` at
    /// 3 MiB 3.3x its time).
    pub fn refinements(&self) -> Vec<(CostKey, u64)> {
        self.fits
            .iter()
            .filter_map(|(label, fit)| Some((CostKey::parse(label)?, fit.refinements())))
            .flat_map(|(key, sizes)| sizes.into_iter().map(move |bytes| (key.clone(), bytes)))
            .collect()
    }

    /// One line saying which fits are too uncertain to recommend from and why ([`CostModel::uncertain`]);
    /// `None` when every fit can be held to its prediction.
    pub fn uncertainty_line(&self) -> Option<String> {
        let uncertain = self.uncertain();
        let (label, why) = uncertain.first()?;
        let busy = uncertain.iter().filter(|(_, w)| w.starts_with("busy")).count();
        let cause = if busy * 2 > uncertain.len() { "the machine was busy" } else { "paths drifted" };
        Some(format!(
            "{} of {} fits too uncertain to recommend from ({cause}; e.g. {label}: {why}): calibrate again on an idle machine",
            uncertain.len(),
            self.fits.len()
        ))
    }

    /// The predicted time of `key` for `bytes`; `queued` is the producer's queued work in seconds,
    /// which a host-side synchronise waits for (0 for an idle producer: the calibration measured
    /// an idle one, so its fixed cost already holds the synchronise itself). `host_speed`: the
    /// host's speed now (seconds of the fixed piece of host work the calibration measured), which
    /// scales the fixed cost; `None`: as calibrated.
    pub fn predict(&self, key: &CostKey, bytes: u64, ordering: Ordering, queued: f64, host_speed: Option<f64>) -> Option<Prediction> {
        let fit = self.fit(key)?;
        let waits = if ordering == Ordering::HostSynchronise && queued.is_finite() { queued.max(0.0) } else { 0.0 };
        let (fixed, per_byte) = fit.line_at(bytes);
        let scaled = fit.seconds_at(bytes, host_speed);
        // A time that is not a number predicts nothing (JSON has no infinity: it would read `null`
        // where the schema promises seconds); a model read from a file is checked before this
        // ([`CostModel::problem`]), one made in a process may still hold such a fit.
        if !(scaled.is_finite() && fixed.is_finite() && scaled >= 0.0) {
            return None;
        }
        // The correction for the host's speed now is itself a guess (how much of the fixed cost is
        // host work, and how it scales): the stated error spans the prediction as calibrated as
        // well as the corrected one, on top of the fit's own error. On an untuned grid on an H200,
        // without it 88 % of measured medians lay within the stated error; a row the correction
        // moved most was the one it missed (jax->torch at 3 KiB: 37 us as calibrated and measured,
        // 55 us corrected for a host read as 1.9x slower).
        let as_calibrated = fit.seconds(bytes);
        let correction = if scaled > 0.0 { (scaled - as_calibrated).abs() / scaled } else { 0.0 };
        let tolerance = fit.tolerance(bytes) + correction;
        let extrapolated_from = fit.extrapolated_from(bytes);
        Some(Prediction {
            seconds: scaled + waits,
            fixed: fixed + (scaled - fit.seconds(bytes)),
            bandwidth: (per_byte > 0.0).then(|| 1.0 / per_byte),
            rate: (per_byte > 0.0 && scaled > 0.0).then(|| bytes as f64 / scaled),
            bound: fit.bound(bytes).name().into(),
            tolerance,
            extrapolated: extrapolated_from.is_some(),
            extrapolated_from,
            unpredictable: unpredictable_words(tolerance, fit, bytes, fit.slowdown(host_speed)),
            unlike_its_fit: false,
            waits_for_queue: waits,
            device_switch: 0.0,
            host_slowdown: (fit.host_speed.is_some() && host_speed.is_some()).then(|| fit.slowdown(host_speed)),
        })
    }

    /// [`CostModel::predict`] for one array whose verdict the rules predict (`shares`: whether it
    /// is shared; `None`: not known, or a failure): where that verdict is not the one its fit was
    /// measured with, the prediction says it cannot be held to a number
    /// ([`Prediction::unpredictable`]) instead of pricing the handoff as the calibration's arrays.
    #[allow(clippy::too_many_arguments)]
    pub fn predict_for_array(
        &self,
        key: &CostKey,
        bytes: u64,
        ordering: Ordering,
        queued: f64,
        host_speed: Option<f64>,
        shares: Option<bool>,
    ) -> Option<Prediction> {
        let mut prediction = self.predict(key, bytes, ordering, queued, host_speed)?;
        let fit = self.fit(key)?;
        if let Some(words) = shares.and_then(|shares| verdict_unlike_its_fit(fit, shares)) {
            // The decisive reason, whatever else made the number uncertain: a fit of the other
            // verdict is off by the bytes themselves (a 200 MiB copy that JAX makes of a NumPy array
            // that is not 64-byte aligned ran 2,000x a fit of shares), where the host's speed moves
            // a time by a fraction.
            prediction.unlike_its_fit = true;
            prediction.unpredictable = Some(words);
        }
        Some(prediction)
    }

    /// The path of `kind` from `source` to `target` at `place` that the model predicts fastest for
    /// `bytes`, among those whose sweep gave the same verdict as `like` (a path that shares is
    /// only ever replaced by another that shares), with its predicted seconds. `None` when `like`
    /// itself is not calibrated here.
    /// `allowed` filters the candidates (`auto` takes only paths that apply to any array).
    #[allow(clippy::too_many_arguments)]
    pub fn fastest_like(
        &self,
        kind: crate::paths::PathKind,
        source: &str,
        target: &str,
        place: &str,
        like: &str,
        bytes: u64,
        allowed: impl Fn(&str) -> bool,
    ) -> Option<(String, f64)> {
        self.same_verdict_fits(kind, source, target, place, like)
            .into_iter()
            .filter(|(path, _)| allowed(path))
            .map(|(path, fit)| (path, fit.seconds(bytes)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(path, seconds)| (path.to_string(), seconds))
    }

    /// Why this model, read from a file, cannot be used: the first number that is not one a fit
    /// can hold (not finite, a negative cost or time, an exponent or speed outside what a
    /// calibration makes), a label that names no path of this gpushare, or a verdict the rules
    /// contradict (a path that copies by design claimed to share); `None` when every part checks.
    ///
    /// Why: the cache file is data anyone (or a broken disk) can write, and `auto` and every
    /// prediction act on it. A file that claimed `copy` shares once made `auto` copy numpy→torch
    /// where DLPack shares, and a negative fixed cost predicted -0.29 s. A model that fails here is
    /// treated as absent: the rules alone decide, as on an uncalibrated machine.
    pub fn problem(&self) -> Option<String> {
        if !(self.created.is_finite() && self.created >= 0.0) {
            return Some(format!("its creation time {} is not a time", self.created));
        }
        for (label, fit) in &self.fits {
            if let Some(why) = label_problem(label).or_else(|| fit_problem(label, fit)) {
                return Some(format!("fit {label:?}: {why}"));
            }
        }
        for (label, points) in &self.observations {
            if let Some(p) = points.iter().find(|p| !(p.seconds.is_finite() && p.seconds >= 0.0 && p.seconds <= MAX_SECONDS)) {
                return Some(format!("observation of {label:?}: {} seconds at {} bytes", p.seconds, p.bytes));
            }
        }
        for (label, speeds) in &self.host_speeds {
            if let Some(s) = speeds.iter().find(|s| !host_speed_ok(**s)) {
                return Some(format!("host speed of {label:?}: {s}"));
            }
        }
        for (label, switch) in &self.device_switches {
            if !label.split_once('@').is_some_and(|(source, place)| !source.is_empty() && !place.is_empty()) {
                return Some(format!("device switch {label:?}: not a label of the form `source@place`"));
            }
            if !switch_seconds_ok(switch.seconds) {
                return Some(format!("device switch of {label:?}: {} seconds is not a time a switch takes", switch.seconds));
            }
            if let Some(s) = switch.host_speed.filter(|s| !host_speed_ok(*s)) {
                return Some(format!("device switch of {label:?}: host speed {s} is not one a calibration measures"));
            }
        }
        None
    }

    /// Records `seconds` as the cost of a device switch around a handoff from `source` of an array
    /// at `place` (`cuda:0`); false, and nothing kept, where it is not a time a switch can take.
    /// `host_speed`: the host's speed when it was measured (None: not measured).
    pub fn set_device_switch(&mut self, source: &str, place: &str, seconds: f64, host_speed: Option<f64>) -> bool {
        if !switch_seconds_ok(seconds) || source.is_empty() || place.is_empty() {
            return false;
        }
        let host_speed = host_speed.filter(|s| host_speed_ok(*s));
        self.device_switches.insert(switch_label(source, place), DeviceSwitch { seconds, host_speed });
        true
    }

    /// The seconds a handoff from `source` of an array at `place` adds for a device switch
    /// ([`CostModel::device_switches`]), where it was measured, with the host running at
    /// `host_speed` (None: as measured).
    pub fn device_switch(&self, source: &str, place: &str, host_speed: Option<f64>) -> Option<f64> {
        // A move's place names both ends (`cuda:0->cuda:1`): the switch is to the source's device.
        let from = place.split_once("->").map_or(place, |(from, _)| from);
        let switch = self.device_switches.get(&switch_label(source, from))?;
        let slowdown = match (switch.host_speed, host_speed) {
            (Some(then), Some(now)) if host_speed_ok(now) => now / then,
            _ => 1.0,
        };
        Some(switch.seconds * slowdown.powf(HOST_MEMORY_SPEED_EXPONENT))
    }

    /// `prediction` of a handoff from `source` at `place` made while another device than the
    /// array's is current, with the host running at `host_speed`: the handoff makes the array's
    /// device current and the other one current again after, and that time is added where it was
    /// measured (unchanged where it was not).
    pub fn with_device_switch(&self, mut prediction: Prediction, source: &str, place: &str, host_speed: Option<f64>) -> Prediction {
        if let Some(seconds) = self.device_switch(source, place, host_speed) {
            prediction.seconds += seconds;
            prediction.fixed += seconds;
            // The rate stays the copy's own, as it leaves out a wait for queued work.
            prediction.device_switch = seconds;
        }
        prediction
    }

    /// What differs between the machine this model was made for and `current` (each top-level
    /// field whose value changed, added or went away), in words; `None` when it is current.
    pub fn stale_against(&self, current: &serde_json::Value) -> Option<String> {
        if &self.machine == current {
            return None;
        }
        let (Some(old), Some(new)) = (self.machine.as_object(), current.as_object()) else {
            return Some("made for another machine".into());
        };
        let mut changed: Vec<&str> = old
            .keys()
            .chain(new.keys())
            .filter(|k| old.get(*k) != new.get(*k))
            .map(String::as_str)
            .collect();
        changed.sort_unstable();
        changed.dedup();
        Some(format!("made for another {}", changed.join(", ")))
    }
}

/// The longest time any number of a model may state, in seconds: an hour per handoff is far past
/// anything a calibration measures, and keeps every prediction finite (an hour per byte of 2⁶⁴
/// bytes is still a finite f64).
const MAX_SECONDS: f64 = 3600.0;

/// The longest a device switch may take in a model: the two driver calls take microseconds, and a
/// millisecond is past anything a calibration measures.
const MAX_SWITCH_SECONDS: f64 = 1e-3;

fn switch_seconds_ok(seconds: f64) -> bool {
    seconds.is_finite() && (0.0..=MAX_SWITCH_SECONDS).contains(&seconds)
}

fn switch_label(source: &str, place: &str) -> String {
    format!("{source}@{place}")
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The range of the power a fit's fixed cost follows the host's speed by: the calibration states
/// 0.6 or 1.0 ([`host_speed_exponent`]); a power far outside makes a prediction overflow.
const SPEED_EXPONENTS: std::ops::RangeInclusive<f64> = 0.0..=4.0;

/// A host speed (seconds of [`CostModel::add_measured`]'s fixed piece of work, microseconds on any
/// host) a model may hold: positive and at most a second.
fn host_speed_ok(s: f64) -> bool {
    s.is_finite() && s > 1e-12 && s <= 1.0
}

/// Why a fit's label names nothing this gpushare calibrates, or `None`.
fn label_problem(label: &str) -> Option<String> {
    let Some([kind, _, _, path, place]) = split_label(label) else {
        return Some("not a label of the form `kind source->target path @place`".into());
    };
    let Some(kind) = crate::paths::PathKind::parse(kind) else {
        return Some(format!("{kind:?} is not a kind of path"));
    };
    if path == crate::paths::AUTO.name || crate::paths::find(kind, path).is_none() {
        return Some(format!("{path:?} is not a {} path", kind.name()));
    }
    place.is_empty().then(|| "it names no place".into())
}

/// Why a fit's numbers or verdict cannot be used, or `None`.
fn fit_problem(label: &str, fit: &Fit) -> Option<String> {
    let seconds_ok = |s: f64| s.is_finite() && (0.0..=MAX_SECONDS).contains(&s);
    if !seconds_ok(fit.fixed) {
        return Some(format!("fixed cost {} is not a time in seconds", fit.fixed));
    }
    if !seconds_ok(fit.per_byte) {
        return Some(format!("cost per byte {} is not a time in seconds", fit.per_byte));
    }
    if !(fit.error.is_finite() && fit.error >= 0.0) {
        return Some(format!("stated error {} is not a relative error", fit.error));
    }
    if let Some(k) = fit.knots.iter().find(|k| !seconds_ok(k.seconds)) {
        return Some(format!("knot at {} bytes has {} seconds", k.bytes, k.seconds));
    }
    if fit.knots.windows(2).any(|w| w[0].bytes >= w[1].bytes) {
        return Some("its knots are not in increasing order of size".into());
    }
    if !fit.held_out.is_empty() && fit.held_out.len() != fit.knots.len() {
        return Some(format!("{} held-out errors for {} knots", fit.held_out.len(), fit.knots.len()));
    }
    if let Some(e) = fit.held_out.iter().find(|e| !(e.is_finite() && **e >= 0.0)) {
        return Some(format!("held-out error {e} is not a relative error"));
    }
    if let Some(c) = fit.regime_changes.iter().find(|c| !(c.from < c.to && c.rise.is_finite() && c.rise >= REGIME_CHANGE)) {
        return Some(format!("a change of regime from {} to {} bytes with a rise of {}", c.from, c.to, c.rise));
    }
    if let Some(s) = fit.host_speed.filter(|s| !host_speed_ok(*s)) {
        return Some(format!("host speed {s} is not one a calibration measures"));
    }
    if let Some(e) = fit.speed_exponent.filter(|e| !(e.is_finite() && SPEED_EXPONENTS.contains(e))) {
        return Some(format!("host-speed exponent {e} lies outside {SPEED_EXPONENTS:?}"));
    }
    if let Some(c) = fit.ceiling.filter(|c| !(c.is_finite() && *c > 0.0)) {
        return Some(format!("ceiling {c} is not a rate in bytes per second"));
    }
    // The verdict is the rules' word: a path that copies by design never shared.
    let [kind, _, _, path, _] = split_label(label)?;
    let kind = crate::paths::PathKind::parse(kind)?;
    if fit.shares == Some(true) && crate::paths::copied_by_design(kind, path).is_some() {
        return Some(format!("it says {path} shares memory, and {path} copies by design"));
    }
    None
}

/// Whether the path of `key`, whose sweep gave the verdict `shares`, is priced one cost at every
/// size: it moves no bytes. A handoff that shared at every size did not (its time does not grow
/// with size, and a slope fitted to noisy points would predict 200 µs at 64 MiB for a 50 µs
/// handoff); nor does a process handoff by a handle, whatever it copied once before the first
/// (crate::paths::handoff_moves_bytes).
pub fn priced_constant(key: &CostKey, shares: Option<bool>) -> bool {
    shares == Some(true)
        || !crate::paths::handoff_moves_bytes(key.kind, &key.path)
}

/// The fit of `points` by what the path does: a constant where it moves no bytes
/// ([`priced_constant`]); a line per range of sizes where it copies. A path whose verdict the sweep
/// could not name (`shares` None: it shared at some sizes and copied at others) whose time did not
/// grow with size, by the one line over the sweep (a per-byte term under 5 % of its largest
/// size's time is noise), is a constant too: its segments would carry the noise between its last
/// two sizes on past the sweep as a cost per byte (a zero-copy handoff of 9 µs predicted at
/// 554 µs for 200 MiB).
fn fit_by_what_it_does(points: &[Observation], constant: bool, shares: Option<bool>) -> Option<Fit> {
    if constant {
        return Fit::constant(points);
    }
    let fit = Fit::segmented(points)?;
    if fit.per_byte == 0.0 && shares != Some(false) { Fit::constant(points) } else { Some(fit) }
}

/// The median of a non-empty slice.
fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 }
}

/// One path `auto` may take, as the rules and the model see it before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<'a> {
    pub path: &'a str,
    /// Whether the rules predict the target shares the source's memory.
    pub shares: bool,
    /// The model's prediction; `None` where the path is not calibrated.
    pub seconds: Option<f64>,
}

/// The fastest correct candidate: only paths that share when any shares, the fastest predicted
/// among them. `None` when no candidate has a prediction (then the rules' own choice stands).
pub fn fastest_correct<'a>(candidates: &[Candidate<'a>]) -> Option<&'a str> {
    let any_shares = candidates.iter().any(|c| c.shares);
    candidates
        .iter()
        .filter(|c| c.shares == any_shares)
        .filter_map(|c| c.seconds.filter(|s| s.is_finite()).map(|s| (c.path, s)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(path, _)| path)
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
