use super::*;
use crate::report::Verdict;
use crate::share::process::failed_report;

/// A worker that records what the loops asked, in order. `auto` is `shm`; `ipc` does not apply;
/// a handoff is numbered and held until released; `stop_at` makes the n-th handoff fail as Ctrl-C
/// (`interrupt`) or as a dead worker.
#[derive(Default)]
struct FakeLab {
    log: Vec<String>,
    held: Vec<u32>,
    handoffs: u32,
    stop_at: Option<u32>,
    interrupt: bool,
    unmakeable: Vec<u64>,
}

#[derive(Debug, PartialEq)]
enum Stop {
    CtrlC,
    WorkerDied,
}

fn row(path: &str, nbytes: u64, first_call: f64) -> crate::render::lab::PathRow {
    let mut r = failed_report(path, "torch", nbytes, String::new(), true);
    r.verdict = Verdict::Shared;
    r.reason = None;
    r.timing = Some(crate::share::process::process_timing(first_call, vec![1e-5]));
    r
}

impl ProcessLab for FakeLab {
    type Source = u64;
    type Kept = u32;
    type Error = Stop;

    fn auto(&mut self, _source: &u64) -> Result<String, Stop> {
        Ok("shm".into())
    }
    fn try_path(&mut self, source: &u64, path: &str, repeat: usize) -> Result<Tried<u32>, Stop> {
        self.handoffs += 1;
        self.log.push(format!("{path} {source} x{repeat}"));
        if self.stop_at == Some(self.handoffs) {
            return Err(if self.interrupt { Stop::CtrlC } else { Stop::WorkerDied });
        }
        if path == "ipc" {
            return Ok(Tried { report: failed_report(path, "torch", *source, "not on the host".into(), false), kept: None });
        }
        self.held.push(self.handoffs);
        Ok(Tried { report: row(path, *source, 0.002), kept: Some(self.handoffs) })
    }
    fn release(&mut self, kept: u32) -> Result<(), Stop> {
        self.log.push(format!("release {kept}"));
        self.held.retain(|h| *h != kept);
        Ok(())
    }
    fn make_source(&mut self, size: u64) -> Result<Result<u64, String>, Stop> {
        Ok(if self.unmakeable.contains(&size) { Err("out of memory".into()) } else { Ok(size) })
    }
    fn failed(&self, path: &str, size: u64, reason: String) -> crate::render::lab::PathRow {
        failed_report(path, "torch", size, reason, true)
    }
    fn interrupted(error: &Stop) -> bool {
        *error == Stop::CtrlC
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_comparison_releases_each_paths_worker_array_before_the_next_path_runs() {
    let mut lab = FakeLab::default();
    let Compared { rows, kept } = compare(&mut lab, &64, &names(&["auto", "ipc", "gloo"]), 3, false).unwrap();
    assert_eq!(rows.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(), ["shm", "ipc", "gloo"]);
    assert!(!rows[1].applicable && rows[1].verdict == Verdict::Failed);
    assert!(kept.is_empty() && lab.held.is_empty());
    assert_eq!(lab.log, ["shm 64 x3", "release 1", "ipc 64 x3", "gloo 64 x3", "release 3"]);
}

#[test]
fn a_comparison_that_keeps_returns_the_handoffs_that_worked_and_releases_them_when_a_worker_dies() {
    let mut lab = FakeLab::default();
    let kept = compare(&mut lab, &64, &names(&["shm", "ipc", "gloo"]), 1, true).unwrap().kept;
    assert_eq!(kept.iter().map(|(p, k)| (p.as_str(), *k)).collect::<Vec<_>>(), [("shm", 1), ("gloo", 3)]);

    let mut lab = FakeLab { stop_at: Some(2), ..FakeLab::default() };
    let stopped = compare(&mut lab, &64, &names(&["shm", "gloo"]), 1, true);
    assert_eq!(stopped.err(), Some(Stop::WorkerDied));
    assert!(lab.held.is_empty(), "the kept handoff was released: {:?}", lab.log);
}

#[test]
fn a_sweep_warms_each_path_up_once_and_notes_it_on_that_paths_first_point_only() {
    let mut lab = FakeLab::default();
    let Swept { points, interrupted } = bench(&mut lab, &[1024, 4096], &names(&["auto", "shm", "gloo"]), 2).unwrap();
    assert!(!interrupted);
    // auto and shm are one path: warmed up once.
    let warm = format!("x{}", WARM_UP_HANDOFFS - 1);
    assert_eq!(lab.log.iter().filter(|l| l.ends_with(&warm)).cloned().collect::<Vec<_>>(), ["shm 1024 x4", "gloo 1024 x4"]);
    assert_eq!(points.len(), 6);
    let noted: Vec<(u64, &str)> = points
        .iter()
        .filter(|p| p.row.notes.iter().any(|n| n.starts_with("timed after 5 warm-up handoffs")))
        .map(|p| (p.size, p.row.path.as_str()))
        .collect();
    assert_eq!(noted, [(1024, "shm"), (1024, "gloo")]);
    assert!(points[0].row.notes[0].contains("the first took 2.00 ms"), "{:?}", points[0].row.notes);
    assert!(lab.held.is_empty());
}

#[test]
fn a_sweep_stopped_by_ctrl_c_keeps_the_points_measured_and_a_dead_worker_is_an_error() {
    // 2 warm-ups, then the first size's two points, then Ctrl-C in the second size's first handoff.
    let mut lab = FakeLab { stop_at: Some(5), interrupt: true, ..FakeLab::default() };
    let Swept { points, interrupted } = bench(&mut lab, &[1024, 4096], &names(&["shm", "gloo"]), 1).unwrap();
    assert!(interrupted);
    assert_eq!(points.iter().map(|p| p.size).collect::<Vec<_>>(), [1024, 1024]);

    let mut lab = FakeLab { stop_at: Some(5), ..FakeLab::default() };
    assert_eq!(bench(&mut lab, &[1024, 4096], &names(&["shm", "gloo"]), 1).err(), Some(Stop::WorkerDied));
}

#[test]
fn a_size_whose_array_cannot_be_made_is_a_failed_point_per_path_saying_why() {
    let mut lab = FakeLab { unmakeable: vec![1024], ..FakeLab::default() };
    let points = bench(&mut lab, &[1024, 4096], &names(&["auto", "gloo"]), 1).unwrap().points;
    let failed: Vec<_> = points.iter().filter(|p| p.row.verdict == Verdict::Failed).collect();
    assert_eq!(failed.iter().map(|p| (p.size, p.row.path.as_str())).collect::<Vec<_>>(), [(1024, "ipc"), (1024, "gloo")]);
    assert!(failed[0].row.reason.as_deref().unwrap().starts_with("could not make the source array: out of memory"));
    // The warm-up ran on the first array that could be made.
    assert!(lab.log.iter().any(|l| l == "shm 4096 x4"));
}
