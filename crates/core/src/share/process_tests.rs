use super::*;
use crate::report::process::{HostIdentity, HostMapping};

/// A page of a shared-memory segment, at `offset` in it.
pub(crate) fn segment_identity(offset: u64) -> MemoryIdentity {
    MemoryIdentity::Host(HostIdentity {
        file: Some("/dev/shm/psm_1".into()),
        unlinked: false,
        mapping: HostMapping::Shared,
        dev: Some("00:1b".into()),
        inode: 364,
        offset: Some(offset),
        address: 4096,
    })
}

/// A transport that hands over nothing but keeps a log of what the pipeline asked, in order.
struct FakeRoute {
    path: &'static str,
    facts: RouteFacts,
    source: Option<MemoryIdentity>,
    target: Option<MemoryIdentity>,
    staging: Option<Staging>,
    fail_at: Option<usize>,
    by_worker: Option<Vec<f64>>,
    handoffs: usize,
    log: Vec<String>,
}

fn fake(path: &'static str, source: Option<MemoryIdentity>, target: Option<MemoryIdentity>) -> FakeRoute {
    let facts = RouteFacts { framework: "numpy".into(), targets: vec!["numpy".into(), "torch".into()], ..RouteFacts::default() };
    FakeRoute { path, facts, source, target, staging: None, fail_at: None, by_worker: None, handoffs: 0, log: Vec::new() }
}

impl ProcessRoute for FakeRoute {
    type Reply = usize;

    fn path(&self) -> &str {
        self.path
    }
    fn facts(&mut self) -> Result<RouteFacts> {
        self.log.push("facts".into());
        Ok(self.facts.clone())
    }
    fn ipc_refusal(&mut self) -> Result<Option<String>> {
        self.log.push("ipc_refusal".into());
        Err(Error::Worker("the driver could not be asked".into()))
    }
    fn set_up(&mut self) -> Result<f64> {
        self.log.push("set_up".into());
        Ok(0.5)
    }
    fn hand_over(&mut self) -> Result<usize> {
        self.handoffs += 1;
        if self.fail_at == Some(self.handoffs) {
            return Err(Error::Worker(format!("the worker died in handoff {}", self.handoffs)));
        }
        self.log.push(format!("hand_over {}", self.handoffs));
        Ok(self.handoffs)
    }
    fn release(&mut self, reply: usize) -> Result<()> {
        self.log.push(format!("release {reply}"));
        Ok(())
    }
    fn hand_over_timed_by_worker(&mut self, repeat: usize) -> Option<Result<(usize, Vec<f64>)>> {
        let seconds = self.by_worker.clone()?;
        assert_eq!(seconds.len(), repeat + 1);
        Some(Ok((7, seconds)))
    }
    fn sides(&mut self, reply: &usize) -> Result<(SourceSide, ProcessTarget)> {
        self.log.push(format!("sides {reply}"));
        let source = SourceSide { framework: "numpy".into(), nbytes: 32, identity: self.source.clone(), context: None };
        Ok((source, ProcessTarget { pid: Some(8), framework: Some("numpy".into()), identity: self.target.clone(), context: None }))
    }
    fn staging(&mut self) -> Result<Option<Staging>> {
        Ok(self.staging.clone())
    }
    fn mechanism_detail(&mut self) -> Result<Option<String>> {
        Ok((self.path == "torch_mp").then(|| "file_descriptor strategy".into()))
    }
    fn notes(&mut self, reply: &usize) -> Result<Vec<String>> {
        Ok(vec![format!("handed {reply} times")])
    }
}

#[test]
fn the_same_identity_on_both_sides_is_shared_and_moves_nothing() {
    let mut route = fake("torch_mp", Some(segment_identity(0)), Some(segment_identity(0)));
    let handed = hand_to_worker(&mut route, 2, None).unwrap();
    let r = &handed.report;
    let w = r.worker.as_ref().unwrap();
    assert_eq!((r.verdict, r.reason.as_deref(), r.bytes_moved, w.bytes_per_handoff), (Verdict::Shared, None, 0, 0));
    assert_eq!(w.mechanism, "torch.multiprocessing reduce_tensor: file_descriptor strategy");
    assert_eq!((w.source.pid, w.target.as_ref().unwrap().pid), (std::process::id(), Some(8)));
    assert_eq!(r.notes, vec!["handed 3 times".to_string()]);
    assert!(w.segment.is_none() && r.applicable && w.nbytes == 32);
    // The row of every handoff: no description of a target in this process, nothing to rank it by.
    assert!(r.target.is_none() && r.bandwidth.is_none() && !r.auto && !r.fastest);
    assert_eq!(handed.reply, 3);
}

#[test]
fn another_identity_is_copied_with_the_judges_reason() {
    let mut route = fake("shm", Some(segment_identity(0)), Some(segment_identity(64)));
    let r = hand_to_worker(&mut route, 1, None).unwrap().report;
    assert_eq!((r.verdict, r.reason.as_deref()), (Verdict::Copied, Some("same file, different offsets")));
    assert_eq!((r.bytes_moved, r.worker.unwrap().bytes_per_handoff), (32, 0));
    // A send copies into the worker's own buffer every time: by design, whatever the identities say.
    let mut route = fake("gloo", Some(segment_identity(0)), None);
    let r = hand_to_worker(&mut route, 1, None).unwrap().report;
    // The reason is the path table's, as a copying path's is in every table.
    assert_eq!(r.reason.as_deref(), Some("copied by design: gloo sends the bytes over TCP into the worker's own tensor"));
    assert_eq!((r.bytes_moved, r.worker.as_ref().unwrap().bytes_per_handoff), (32, 32));
    // Its bandwidth is of the bytes each handoff moves.
    assert_eq!(r.bandwidth, Some(32.0 / r.timing.unwrap().median));
}

#[test]
fn a_segment_staged_first_is_a_copy_naming_it_and_one_already_there_is_shared() {
    let segment = Segment { name: "psm_1".into(), offset: 0 };
    let mut route = fake("shm", Some(segment_identity(0)), Some(segment_identity(0)));
    route.staging = Some(Staging { segment: segment.clone(), staged_bytes: 32 });
    let r = hand_to_worker(&mut route, 1, None).unwrap().report;
    assert_eq!((r.verdict, r.bytes_moved, r.worker.as_ref().unwrap().bytes_per_handoff), (Verdict::Copied, 32, 0));
    assert!(r.reason.unwrap().contains("(psm_1 + 0)"));
    assert_eq!(r.worker.unwrap().segment.as_ref(), Some(&segment));
    route.staging = Some(Staging { segment, staged_bytes: 0 });
    let r = hand_to_worker(&mut route, 1, None).unwrap().report;
    assert_eq!((r.verdict, r.bytes_moved), (Verdict::Shared, 0));
    assert_eq!(r.worker.unwrap().segment.unwrap().name, "psm_1");
}

#[test]
fn the_last_handoff_is_released_before_each_timed_one_and_the_last_is_kept() {
    let mut route = fake("shm", None, None);
    let handed = hand_to_worker(&mut route, 3, None).unwrap();
    let expected = ["facts", "set_up", "hand_over 1", "release 1", "hand_over 2", "release 2", "hand_over 3", "release 3",
                    "hand_over 4", "sides 4"];
    assert_eq!(route.log, expected);
    let t = handed.report.timing.unwrap();
    assert_eq!((t.repeats(), t.loops), (3, 1));
    assert_eq!(t.min, t.samples.iter().copied().fold(f64::INFINITY, f64::min));
    // The set-up's seconds belong to the first call.
    assert!(t.first_call.unwrap() >= 0.5, "{:?}", t.first_call);
}

#[test]
fn a_failing_handoff_is_the_error_and_nothing_is_judged() {
    let mut route = fake("shm", None, None);
    route.fail_at = Some(2);
    match hand_to_worker(&mut route, 3, None) {
        Err(Error::Worker(m)) => assert_eq!(m, "the worker died in handoff 2"),
        other => panic!("{:?}", other.map(|h| h.report)),
    }
    assert!(!route.log.iter().any(|s| s.starts_with("sides")), "{:?}", route.log);
}

#[test]
fn a_path_that_does_not_apply_is_refused_before_anything_crosses() {
    let mut route = fake("ipc", None, None);
    match hand_to_worker(&mut route, 1, None) {
        Err(Error::PathNotApplicable { message, reason, .. }) => {
            assert!(message.starts_with("ipc: CUDA IPC shares device memory"), "{message}");
            assert!(reason.unwrap().contains("this array is in host memory"));
        }
        other => panic!("{:?}", other.map(|h| h.report)),
    }
    assert_eq!(route.log, ["facts"]);
    // A costly fact the rule asked for and could not learn is the error.
    route.facts.on_device = true;
    assert!(matches!(hand_to_worker(&mut route, 1, None), Err(Error::Worker(_))));
    assert_eq!(route.log, ["facts", "facts", "ipc_refusal"]);
}

#[test]
fn handoffs_timed_by_the_worker_add_the_set_up_to_the_first() {
    let mut route = fake("nccl", None, None);
    route.by_worker = Some(vec![0.25, 0.003, 0.001, 0.002]);
    route.facts = RouteFacts { on_device: true, source_device: Some(0), worker_device: Some(1), ..route.facts.clone() };
    route.facts.library = Some("numpy".into());
    let handed = hand_to_worker(&mut route, 3, None).unwrap();
    let t = handed.report.timing.unwrap();
    // The samples in the order the worker made them; the first call apart, with the set-up.
    assert_eq!((t.first_call, t.samples.clone(), t.median, t.min), (Some(0.75), vec![0.003, 0.001, 0.002], 0.002, 0.001));
    assert_eq!(handed.reply, 7);
    assert_eq!(route.handoffs, 0);
    assert_eq!(handed.report.bytes_moved, 32);
}

#[test]
fn one_handoff_is_its_own_one_sample() {
    let t = process_timing(0.25, Vec::new());
    assert_eq!((t.samples, t.median, t.min, t.first_call), (vec![0.25], 0.25, 0.25, Some(0.25)));
}

#[test]
fn a_failed_path_is_a_row_with_its_reason_and_nothing_measured() {
    let r = failed_report("gloo", "numpy", 32, "gloo hands torch tensors; this is a numpy array".into(), false);
    let w = r.worker.as_ref().unwrap();
    assert_eq!((r.verdict, r.applicable, r.bytes_moved, r.timing.is_none(), w.target.is_none()), (Verdict::Failed, false, 0, true, true));
    assert_eq!(w.mechanism, "gloo send/recv (torch.distributed, TCP loopback)");
    assert_eq!((w.source.pid, w.source.framework.as_str(), w.nbytes), (std::process::id(), "numpy", 32));
}

#[test]
fn the_prediction_made_before_the_handoff_is_kept_beside_its_measurement_and_a_miss_is_told() {
    let prediction = |seconds: f64| crate::advice::model::Prediction {
        seconds,
        fixed: seconds,
        bandwidth: None,
        rate: None,
        bound: "fixed cost".into(),
        tolerance: 0.2,
        extrapolated: false,
        waits_for_queue: 0.0,
        host_slowdown: None,
        ..Default::default()
    };
    let mut route = fake("torch_mp", Some(segment_identity(0)), Some(segment_identity(0)));
    let r = hand_to_worker(&mut route, 3, None).unwrap().report;
    assert!(r.predicted.is_none() && !r.misses_prediction);
    // A prediction of a nanosecond: every handoff, however fast the fake's, lies beyond its ±20 %.
    let mut route = fake("torch_mp", Some(segment_identity(0)), Some(segment_identity(0)));
    let far = hand_to_worker(&mut route, 3, Some(prediction(1e-9))).unwrap().report;
    assert_eq!(far.predicted.as_ref().map(|p| p.seconds), Some(1e-9));
    let median = far.timing.as_ref().map(|t| t.median).unwrap();
    assert!(far.misses_prediction && median > 1.2e-9);
}
