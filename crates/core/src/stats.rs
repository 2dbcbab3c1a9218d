//! Timing statistics: median, minimum, quartiles and a noise warning, from raw samples in seconds.

use serde::{Deserialize, Serialize};

/// Above this IQR/median the figure is flagged as noisy (torch.utils.benchmark warns at 10 %/25 %).
pub const NOISY_IQR_RATIO: f64 = 0.25;

/// Summary of repeated timings. Raw samples are kept so nothing is lost to rounding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timing {
    /// Seconds per loop, one sample per repeat.
    pub samples: Vec<f64>,
    /// Loops per sample (`-n`).
    pub loops: u64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// Interquartile range (p75 - p25).
    pub iqr: f64,
    /// Device time per loop measured with CUDA events, when the path ran on a GPU.
    pub device_median: Option<f64>,
    /// Device seconds per loop of each sample, by CUDA events, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_samples: Option<Vec<f64>>,
    /// Untimed runs made before the samples.
    #[serde(default)]
    pub warmup: u64,
    /// Host seconds spent in handoffs that are not samples (the warm-up runs and the runs that
    /// chose the calls per sample): with `samples × loops`, all the handoffs a measurement made.
    #[serde(default)]
    pub untimed: f64,
    /// A handoff to a worker process: the first handoff, timed apart from the samples with its
    /// one-off costs (a process group, a communicator, a segment's copy). Absent in this process,
    /// where the runs before the samples are the untimed warm-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_call: Option<f64>,
}

impl Timing {
    pub fn from_samples(samples: Vec<f64>, loops: u64) -> Timing {
        // One sample, what every plain `share` measures: its own median, minimum, maximum and mean,
        // no spread, without sorting a copy (the same numbers the general case gives).
        if let [only] = samples[..]
            && only.is_finite()
        {
            return Timing { samples, loops, median: only, min: only, max: only, mean: only, iqr: 0.0, device_median: None, device_samples: None, warmup: 0, untimed: 0.0, first_call: None };
        }
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|s| s.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let (median, min, max, mean, iqr) = if sorted.is_empty() {
            (f64::NAN, f64::NAN, f64::NAN, f64::NAN, f64::NAN)
        } else {
            let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
            (
                quantile(&sorted, 0.5),
                sorted[0],
                sorted[sorted.len() - 1],
                mean,
                quantile(&sorted, 0.75) - quantile(&sorted, 0.25),
            )
        };
        Timing { samples, loops, median, min, max, mean, iqr, device_median: None, device_samples: None, warmup: 0, untimed: 0.0, first_call: None }
    }

    pub fn repeats(&self) -> usize {
        self.samples.len()
    }

    /// Adds the device clock's samples (and their median).
    pub fn with_device_samples(mut self, device: Vec<f64>) -> Timing {
        self.device_median = Some(Timing::from_samples(device.clone(), self.loops).median);
        self.device_samples = Some(device);
        self
    }

    /// One call measured once: no median, no minimum, just that sample.
    pub fn is_single(&self) -> bool {
        self.samples.len() == 1 && self.loops == 1
    }

    /// A warning when the spread says the median is not to be trusted (needs at least 4 repeats).
    pub fn noise_warning(&self) -> Option<String> {
        // NaN takes this branch too.
        if self.samples.len() < 4 || self.median.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        let ratio = self.iqr / self.median;
        (ratio > NOISY_IQR_RATIO).then(|| {
            format!("noisy: IQR is {:.0}% of the median; raise -n/-r or quiet the machine", ratio * 100.0)
        })
    }
}

/// Linear-interpolated quantile of sorted data (the method NumPy calls "linear").
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_iqr() {
        let t = Timing::from_samples(vec![4.0, 1.0, 3.0, 2.0, 5.0], 10);
        assert_eq!((t.median, t.min, t.max, t.mean), (3.0, 1.0, 5.0, 3.0));
        assert_eq!(t.iqr, 2.0);
        assert_eq!(t.repeats(), 5);
        assert!(t.noise_warning().is_some());
    }

    #[test]
    fn steady_samples_are_not_noisy_and_empty_is_nan() {
        let t = Timing::from_samples(vec![1.0, 1.01, 0.99, 1.0], 1);
        assert!(t.noise_warning().is_none());
        assert!(Timing::from_samples(vec![], 1).median.is_nan());
        // A median that is NaN or not positive says nothing about noise.
        assert!(Timing::from_samples(vec![f64::NAN; 5], 1).noise_warning().is_none());
        assert!(Timing::from_samples(vec![0.0, 0.0, 0.0, 0.0, 1.0], 1).noise_warning().is_none());
    }

    #[test]
    fn one_sample_reads_as_the_general_case_would() {
        for s in [0.0, 1.5e-6, 3.0] {
            let t = Timing::from_samples(vec![s], 1);
            let sorted = [s];
            assert_eq!((t.median, t.min, t.max, t.mean), (quantile(&sorted, 0.5), s, s, s));
            assert_eq!(t.iqr, quantile(&sorted, 0.75) - quantile(&sorted, 0.25));
        }
        assert!(Timing::from_samples(vec![f64::NAN], 1).median.is_nan());
    }

    #[test]
    fn quantile_interpolates() {
        assert_eq!(quantile(&[0.0, 10.0], 0.25), 2.5);
    }
}
