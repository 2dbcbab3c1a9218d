use super::*;

/// A lab that records what the loops asked. Arrays are their size (the shared one negated); `cai`
/// fails; a size in `unmakeable` has no plain array; `auto_for` answers `dlpack` for sizes of
/// 1 MiB and up; the n-th `try_path` is Ctrl-C where `stop_at` says so.
#[derive(Default)]
struct FakeLab {
    log: Vec<String>,
    unmakeable: Vec<u64>,
    tries: u32,
    stop_at: Option<u32>,
}

impl PathLab for FakeLab {
    type Source = i64;
    type Kept = String;
    type MakeError = String;
    type Error = &'static str;

    fn try_path(&mut self, source: &i64, path: &str, is_auto: bool) -> Result<(PathRun, Option<String>), &'static str> {
        self.tries += 1;
        if self.stop_at == Some(self.tries) {
            return Err("ctrl-c");
        }
        self.log.push(format!("{path} {source}{}", if is_auto { " auto" } else { "" }));
        let mut run = PathRun::new(path);
        if path == "cai" {
            run.reason = Some("no interface".into());
            return Ok((run, None));
        }
        run.verdict = crate::report::Verdict::Shared;
        Ok((run, Some(format!("{path} result"))))
    }
    fn make_source(&mut self, size: u64, shared: bool) -> Result<Result<i64, String>, &'static str> {
        self.log.push(format!("make {size}{}", if shared { " shared" } else { "" }));
        if !shared && self.unmakeable.contains(&size) {
            return Ok(Err("out of memory".into()));
        }
        Ok(Ok(if shared { -(size as i64) } else { size as i64 }))
    }
    fn unmade(&mut self, path: &str, why: &String) -> Result<PathRun, &'static str> {
        let mut run = PathRun::new(path);
        run.reason = Some(why.clone());
        Ok(run)
    }
    fn auto_for(&mut self, source: &i64) -> Result<Option<String>, &'static str> {
        Ok((*source >= 1 << 20).then(|| "dlpack".to_string()))
    }
    fn measuring(&mut self, _size: u64, _path: &str) -> Result<(), &'static str> {
        Ok(())
    }
    fn measured(&mut self) -> Result<(), &'static str> {
        Ok(())
    }
    fn interrupted(error: &&'static str) -> bool {
        *error == "ctrl-c"
    }
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_comparison_marks_autos_row_and_keeps_the_results_of_the_paths_that_worked() {
    let mut lab = FakeLab::default();
    let compared = compare(&mut lab, &64, &strings(&["auto", "cai", "host"]), "dlpack").unwrap();
    assert_eq!(compared.runs.iter().map(|r| (r.path.as_str(), r.auto)).collect::<Vec<_>>(), [("dlpack", true), ("cai", false), ("host", false)]);
    assert_eq!(compared.kept.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["dlpack", "host"]);
    assert_eq!(lab.log, ["dlpack 64 auto", "cai 64", "host 64"]);
}

#[test]
fn a_sweep_makes_each_sizes_arrays_once_and_marks_the_path_auto_takes_for_the_array_it_made() {
    let mut lab = FakeLab::default();
    let sizes = [1024, 1 << 20];
    let plan = SweepPlan {
        sizes: &sizes,
        paths: &strings(&["host", "shared", "cai"]),
        autos: &strings(&["host", "host"]),
        ask_auto: true,
        measure_auto: true,
    };
    let swept = bench(&mut lab, &plan).unwrap();
    assert!(!swept.interrupted);
    // At 1 MiB auto takes dlpack for the array made, which the sweep does not hold: measured too.
    assert_eq!(swept.paths, strings(&["host", "shared", "cai", "dlpack"]));
    let rows: Vec<_> = swept.points.iter().map(|p| (p.size, p.run.path.as_str(), p.run.auto, p.run.comparable)).collect();
    assert_eq!(
        rows,
        [
            (1024, "host", true, true),
            (1024, "shared", false, false),
            (1024, "cai", false, true),
            (1 << 20, "host", false, true),
            (1 << 20, "shared", false, false),
            (1 << 20, "cai", false, true),
            (1 << 20, "dlpack", true, true),
        ]
    );
    assert_eq!(lab.log.iter().filter(|l| l.starts_with("make")).count(), 4, "{:?}", lab.log);
}

#[test]
fn a_size_whose_array_cannot_be_made_is_a_row_per_path_saying_why_and_ctrl_c_keeps_what_was_measured() {
    let mut lab = FakeLab { unmakeable: vec![1024], ..FakeLab::default() };
    let sizes = [1024, 4096];
    let paths = strings(&["host", "cai"]);
    let autos = strings(&["host", "host"]);
    let plan = SweepPlan { sizes: &sizes, paths: &paths, autos: &autos, ask_auto: false, measure_auto: false };
    let swept = bench(&mut lab, &plan).unwrap();
    let first = &swept.points[0].run;
    assert_eq!(first.reason.as_deref(), Some("could not make the source array: out of memory"));
    assert_eq!(swept.points.len(), 4);

    let mut lab = FakeLab { stop_at: Some(2), ..FakeLab::default() };
    let swept = bench(&mut lab, &plan).unwrap();
    assert!(swept.interrupted);
    assert_eq!(swept.points.iter().map(|p| (p.size, p.run.path.as_str())).collect::<Vec<_>>(), [(1024, "host")]);
}
