//! The lab's loops over the process paths: every path for one array ([`compare`]) and sizes ×
//! paths ([`bench`]), the same for a worker on this host or another.
//!
//! A loop runs over a [`ProcessLab`], which knows the worker and the frameworks: it resolves
//! `auto`, hands the array over by one path (the one pipeline of [`super::process`]) and releases
//! what the worker holds. What is decided here is decided once for every transport: the order of
//! the paths, that one path's worker array is released before the next path runs, the warm-up of
//! a sweep and what its note says, and that Ctrl-C ends a sweep with the points measured so far.

use crate::render::lab::{BenchPoint, PathRow};

/// Untimed handoffs by each path before a sweep times any. One was not enough: on 2x H200 the first
/// sweep through a new worker after one warm-up still ran torch's `ipc` at 158-170 µs, the next two
/// at 127-142 µs; a first handoff opens the worker's context, and the next few still run the
/// interpreter's unspecialised code.
pub const WARM_UP_HANDOFFS: usize = 5;

/// One path tried: its row (a failed one that says why, where the path does not apply or failed),
/// and the handoff that holds the worker's array, until released.
pub struct Tried<K> {
    pub report: PathRow,
    pub kept: Option<K>,
}

/// Every path tried on one array: a row per path, and the handoffs kept for the caller.
pub struct Compared<K> {
    pub rows: Vec<PathRow>,
    /// (path, handoff) of the paths that worked, when the caller keeps them.
    pub kept: Vec<(String, K)>,
}

/// A sweep's points, and whether Ctrl-C ended it before the last.
pub struct Swept {
    pub points: Vec<BenchPoint>,
    pub interrupted: bool,
}

/// What the loops ask of the worker's side.
pub trait ProcessLab {
    /// The caller's array.
    type Source;
    /// A handoff whose worker array is held until [`ProcessLab::release`].
    type Kept;
    /// What stops a loop: Ctrl-C ([`ProcessLab::interrupted`]), or a worker that died.
    type Error;

    /// The path `auto` takes for `source` to this worker.
    fn auto(&mut self, source: &Self::Source) -> Result<String, Self::Error>;
    /// Hands `source` over by `path`: a first handoff, then `repeat` timed ones. A path that does not
    /// apply or fails is a failed row, not an error.
    fn try_path(&mut self, source: &Self::Source, path: &str, repeat: usize) -> Result<Tried<Self::Kept>, Self::Error>;
    /// Releases the worker's array of a handoff and what this side keeps for it (a worker that died
    /// holds nothing: not an error).
    fn release(&mut self, kept: Self::Kept) -> Result<(), Self::Error>;
    /// A sweep's source array of `size` bytes; `Ok(Err(why))` when it could not be made.
    fn make_source(&mut self, size: u64) -> Result<Result<Self::Source, String>, Self::Error>;
    /// The row of a path that could not run for the reason given.
    fn failed(&self, path: &str, size: u64, reason: String) -> PathRow;
    /// Whether `error` is Ctrl-C, which ends a sweep with what it measured.
    fn interrupted(error: &Self::Error) -> bool;
}

/// The path a name of a path list means for `source`: `auto` resolved by the lab.
fn resolve<L: ProcessLab>(lab: &mut L, source: &L::Source, name: &str) -> Result<String, L::Error> {
    if name == "auto" { lab.auto(source) } else { Ok(name.to_string()) }
}

/// Every path of `names` for `source`, one row each in the order given. Unless `keep`, each path's
/// worker array is released before the next path runs: CUDA maps one allocation once per context,
/// so an open `ipc` mapping would make `torch_mp`'s open of the same block fail. With `keep`, the
/// handoffs that worked are returned (path, handoff) for the caller to hold.
pub fn compare<L: ProcessLab>(
    lab: &mut L,
    source: &L::Source,
    names: &[String],
    repeat: usize,
    keep: bool,
) -> Result<Compared<L::Kept>, L::Error> {
    let mut rows = Vec::with_capacity(names.len());
    let mut kept = Vec::new();
    for name in names {
        let tried = resolve(lab, source, name).and_then(|path| lab.try_path(source, &path, repeat).map(|t| (path, t)));
        let (path, tried) = match tried {
            Ok(done) => done,
            Err(e) => {
                release_all(lab, kept);
                return Err(e);
            }
        };
        let mut row = tried.report;
        // The row of the path `auto` took reads as `auto`'s, as in any comparison.
        row.auto = name == "auto";
        rows.push(row);
        if let Some(handoff) = tried.kept {
            if keep {
                kept.push((path, handoff));
            } else if let Err(e) = lab.release(handoff) {
                release_all(lab, kept);
                return Err(e);
            }
        }
    }
    Ok(Compared { rows, kept })
}

/// Releases what a comparison kept before it stopped with an error, which is the one reported.
fn release_all<L: ProcessLab>(lab: &mut L, kept: Vec<(String, L::Kept)>) {
    for (_, handoff) in kept {
        let _ = lab.release(handoff);
    }
}

/// A sweep: for each size, a source array from the lab and every path of `names`, `repeat` timed
/// handoffs each; the points, and whether Ctrl-C ended it early.
///
/// Before any point is timed, each path hands the first array over [`WARM_UP_HANDOFFS`] times. A
/// worker's first handoffs by a path pay what later ones do not (its CUDA context and first
/// mapping, NCCL's communicator, imports), and the first call of a timed point holds only part of
/// it: on 2x H200 the samples of the first size swept in each new worker ran 1.2-1.5x those of the
/// later sizes (`ipc`, `torch_mp`), so the smallest size's time was partly the worker's warm-up. The
/// one-off cost is not dropped: the path's first point says what the first warm-up handoff took.
pub fn bench<L: ProcessLab>(
    lab: &mut L,
    sizes: &[u64],
    names: &[String],
    repeat: usize,
) -> Result<Swept, L::Error> {
    let mut points = Vec::new();
    let mut warmed: Option<Vec<(String, String)>> = None;
    match sweep(lab, sizes, names, repeat, &mut points, &mut warmed) {
        Ok(()) => Ok(Swept { points, interrupted: false }),
        Err(e) if L::interrupted(&e) => Ok(Swept { points, interrupted: true }),
        Err(e) => Err(e),
    }
}

fn sweep<L: ProcessLab>(
    lab: &mut L,
    sizes: &[u64],
    names: &[String],
    repeat: usize,
    points: &mut Vec<BenchPoint>,
    warmed: &mut Option<Vec<(String, String)>>,
) -> Result<(), L::Error> {
    for &size in sizes {
        let source = match lab.make_source(size)? {
            Ok(source) => source,
            Err(why) => {
                let why = format!("could not make the source array: {why}");
                for name in names {
                    // No array to resolve `auto` for: the row names the path `auto` takes on a GPU.
                    let path = if name == "auto" { "ipc" } else { name.as_str() };
                    points.push(BenchPoint { size, row: lab.failed(path, size, why.clone()) });
                }
                continue;
            }
        };
        if warmed.is_none() {
            *warmed = Some(warm_up(lab, &source, names)?);
        }
        for name in names {
            let path = resolve(lab, &source, name)?;
            let mut tried = lab.try_path(&source, &path, repeat)?;
            let notes = warmed.as_mut().expect("warmed above");
            if let Some(at) = notes.iter().position(|(p, _)| *p == path) {
                tried.report.notes.push(notes.remove(at).1);
            }
            if let Some(handoff) = tried.kept {
                lab.release(handoff)?;
            }
            tried.report.auto = name == "auto";
            points.push(BenchPoint { size, row: tried.report });
        }
    }
    Ok(())
}

/// [`WARM_UP_HANDOFFS`] handoffs of `source` by each path, and, per path, the note its first point
/// gets: what the first handoff took.
fn warm_up<L: ProcessLab>(lab: &mut L, source: &L::Source, names: &[String]) -> Result<Vec<(String, String)>, L::Error> {
    let mut notes: Vec<(String, String)> = Vec::new();
    let mut done: Vec<String> = Vec::new();
    for name in names {
        let path = resolve(lab, source, name)?;
        if done.contains(&path) {
            continue;
        }
        // A first call, then the samples: WARM_UP_HANDOFFS in all.
        let tried = lab.try_path(source, &path, WARM_UP_HANDOFFS - 1)?;
        if let Some(handoff) = tried.kept {
            lab.release(handoff)?;
        }
        if let Some(first) = tried.report.timing.as_ref().and_then(|t| t.first_call) {
            notes.push((
                path.clone(),
                format!(
                    "timed after {WARM_UP_HANDOFFS} warm-up handoffs by {path} to this worker; the first took {} \
                     (its first use in the worker, not in these times)",
                    crate::render::units::time(first)
                ),
            ));
        }
        done.push(path);
    }
    Ok(notes)
}

#[cfg(test)]
#[path = "process_lab_tests.rs"]
mod tests;
