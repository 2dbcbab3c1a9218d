//! The lab's loops within one process: every path for one array ([`compare`]) and sizes × paths
//! ([`bench`]), each path one run of THE pipeline.
//!
//! A loop runs over a [`PathLab`], which knows the frameworks: it measures one path on one array
//! (the pipeline under the lab's timing policy), makes a sweep's arrays and says which path `auto`
//! takes for one of them. What is decided here is decided once for every caller: which row is
//! `auto`'s, that a path `auto` takes but the sweep does not hold is measured too where asked, that
//! each size's arrays are made once and only when a path needs them, that the `shared` path's row
//! (which starts from a SharedBuffer) is never ranked against the others, and that Ctrl-C ends a
//! sweep with the points measured so far.

use crate::render::lab::{BenchRun, PathRun};

/// What the loops ask of the frameworks' side.
pub trait PathLab {
    /// An array the paths start from (with its description, where it has one).
    type Source;
    /// The result of a path that worked, which a comparison hands back.
    type Kept;
    /// Why a sweep's array could not be made.
    type MakeError;
    /// What stops a loop: Ctrl-C ([`PathLab::interrupted`]), or gpushare's own failure.
    type Error;

    /// Measures `path` on `source`: its row (a failed one saying why, where the path does not apply
    /// or failed) and, where it worked, its result.
    fn try_path(&mut self, source: &Self::Source, path: &str, is_auto: bool) -> Result<(PathRun, Option<Self::Kept>), Self::Error>;
    /// A sweep's array of `size` bytes; `shared`: the view of a SharedBuffer the `shared` path starts
    /// from. `Ok(Err(why))` when it could not be made.
    fn make_source(&mut self, size: u64, shared: bool) -> Result<Result<Self::Source, Self::MakeError>, Self::Error>;
    /// The row of `path` for an array that could not be made.
    fn unmade(&mut self, path: &str, why: &Self::MakeError) -> Result<PathRun, Self::Error>;
    /// The path `auto` takes for this very array, where the lab can say (else the sweep's answer for
    /// an array of its size stands).
    fn auto_for(&mut self, source: &Self::Source) -> Result<Option<String>, Self::Error>;
    /// A sweep is about to measure `path` at `size`.
    fn measuring(&mut self, size: u64, path: &str) -> Result<(), Self::Error>;
    /// A sweep measured one more point.
    fn measured(&mut self) -> Result<(), Self::Error>;
    /// Whether `error` is Ctrl-C, which ends a sweep with what it measured.
    fn interrupted(error: &Self::Error) -> bool;
}

/// Every path of `paths` on `source`, in that order; `auto` stands for the path `auto` takes, whose
/// row is marked. The rows, and (path, result) of the paths that worked.
pub fn compare<L: PathLab>(lab: &mut L, source: &L::Source, paths: &[String], auto: &str) -> Result<Compared<L::Kept>, L::Error> {
    let mut compared = Compared { runs: Vec::with_capacity(paths.len()), kept: Vec::new() };
    for name in paths {
        let path = if name == "auto" { auto } else { name.as_str() };
        let (mut run, kept) = lab.try_path(source, path, path == auto)?;
        run.auto = path == auto;
        compared.runs.push(run);
        if let Some(kept) = kept {
            compared.kept.push((path.to_string(), kept));
        }
    }
    Ok(compared)
}

/// What a comparison measured.
pub struct Compared<K> {
    pub runs: Vec<PathRun>,
    pub kept: Vec<(String, K)>,
}

/// What a sweep is asked to measure.
pub struct SweepPlan<'a> {
    pub sizes: &'a [u64],
    pub paths: &'a [String],
    /// The path `auto` takes at each size for an array like the sweep's (one per size).
    pub autos: &'a [String],
    /// Ask the lab which path `auto` takes for the array the sweep made, which is the row marked (a
    /// share of that array takes it: JAX copies a NumPy array that is not 64-byte aligned, so where
    /// the allocator placed it decides).
    pub ask_auto: bool,
    /// Measure too the path `auto` took for an array where the sweep does not hold it.
    pub measure_auto: bool,
}

/// What a sweep measured: its points, the paths measured (those asked, then those `auto` added),
/// and whether Ctrl-C ended it before the last point.
pub struct Swept {
    pub points: Vec<BenchRun>,
    pub paths: Vec<String>,
    pub interrupted: bool,
}

/// For each size, every path of the plan on that size's arrays, each made once and only when a path
/// needs it.
pub fn bench<L: PathLab>(lab: &mut L, plan: &SweepPlan<'_>) -> Result<Swept, L::Error> {
    let mut swept = Swept { points: Vec::with_capacity(plan.sizes.len() * plan.paths.len()), paths: plan.paths.to_vec(), interrupted: false };
    match sweep(lab, plan, &mut swept) {
        Ok(()) => Ok(swept),
        Err(e) if L::interrupted(&e) => {
            swept.interrupted = true;
            Ok(swept)
        }
        Err(e) => Err(e),
    }
}

fn sweep<L: PathLab>(lab: &mut L, plan: &SweepPlan<'_>, swept: &mut Swept) -> Result<(), L::Error> {
    for (&size, like_the_sweeps) in plan.sizes.iter().zip(plan.autos) {
        // The plain array and the SharedBuffer's view, made once per size.
        let mut arrays: [Option<Result<L::Source, L::MakeError>>; 2] = [None, None];
        let mut auto = like_the_sweeps.clone();
        if plan.ask_auto && plan.paths.iter().any(|p| p != "shared") {
            let plain = lab.make_source(size, false)?;
            if let Ok(source) = &plain
                && let Some(chosen) = lab.auto_for(source)?
            {
                auto = chosen;
            }
            arrays[0] = Some(plain);
        }
        // A path auto took for this array that the sweep does not hold is measured too where auto
        // was asked for; elsewhere no row of this size is marked.
        let extra = (plan.measure_auto && !plan.paths.contains(&auto)).then(|| auto.clone());
        if let Some(path) = &extra
            && !swept.paths.contains(path)
        {
            swept.paths.push(path.clone());
        }
        for path in plan.paths.iter().chain(extra.as_ref()) {
            lab.measuring(size, path)?;
            let shared = path == "shared";
            let slot = &mut arrays[usize::from(shared)];
            if slot.is_none() {
                *slot = Some(lab.make_source(size, shared)?);
            }
            let mut run = match slot.as_ref().expect("made above") {
                Ok(source) => lab.try_path(source, path, *path == auto)?.0,
                Err(why) => {
                    let mut run = lab.unmade(path, why)?;
                    run.reason = run.reason.map(|r| format!("could not make the source array: {r}"));
                    run
                }
            };
            run.auto = *path == auto;
            // The shared path starts from a SharedBuffer, not from the array the others start
            // from: shown, never ranked against them.
            run.comparable = !shared;
            swept.points.push(BenchRun { size, run });
            lab.measured()?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "lab_tests.rs"]
mod tests;
