//! What carries a handoff, and the one pipeline every handoff takes once its source is prepared.
//!
//! A handoff's source is prepared first: described, checked, predicted and refused where the path
//! cannot carry it ([`super::Handoff::prepare`] within this process, [`super::process::refusal`] to
//! a worker). A [`Transport`] then carries it, and [`carry`] runs the same steps whatever carries
//! it: hand over under the one timing loop → describe both sides, each where it lives → judge them
//! by the one judge ([`explain::judge_handoff`]) → report. Two transports exist: a route into a
//! framework of this process ([`super::InProcess`]) and a process route to a worker on this host or
//! another ([`super::process::ToWorker`]), as evcxr's child process is a transport behind its one
//! engine.

use super::error::Result;
use crate::explain::{self, Judgement};
use crate::paths::PathKind;
use crate::stats::Timing;

/// One way a handoff reaches its target. [`carry`] calls its steps in order.
pub trait Transport {
    /// What the last handoff delivered: the target's array, or the worker's reply.
    type Delivered;
    /// Both sides of a handoff, described after it ran.
    type Sides;
    /// The typed result: a share's report, or a worker handoff's row.
    type Report;

    /// The path's kind in the path table.
    fn kind(&self) -> PathKind;
    /// The path's name.
    fn path(&self) -> &str;
    /// The handoffs under the transport's timing: the last one's delivery, and their timing.
    fn hand_over(&mut self) -> Result<(Self::Delivered, Timing)>;
    /// Both sides of the last handoff, each described in its own process.
    fn describe(&mut self, delivered: &Self::Delivered) -> Result<Self::Sides>;
    /// The sides as the judge reads them.
    fn judged(sides: &Self::Sides) -> explain::Sides<'_>;
    /// The result of the handoff: its sides, the judge's verdict and the timing.
    fn report(self, delivered: &Self::Delivered, sides: Self::Sides, judgement: Judgement, timing: Timing) -> Result<Self::Report>;
}

/// THE pipeline after preparation: `transport` hands the array over, both sides are described and
/// judged once, and the transport reports. The last delivery (the target's array, the worker's
/// reply) comes back beside the report.
pub fn carry<T: Transport>(mut transport: T) -> Result<(T::Delivered, T::Report)> {
    let (delivered, timing) = transport.hand_over()?;
    let sides = transport.describe(&delivered)?;
    let judgement = explain::judge_handoff(transport.kind(), transport.path(), T::judged(&sides));
    let report = transport.report(&delivered, sides, judgement, timing)?;
    Ok((delivered, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Verdict;
    use crate::report::process::MemoryIdentity;
    use crate::share::process::tests::segment_identity as identity;

    /// A transport that records the steps it is asked for and hands over one identity.
    struct Recorded {
        steps: Vec<&'static str>,
        target: Option<MemoryIdentity>,
    }

    impl Transport for &mut Recorded {
        type Delivered = u32;
        type Sides = (MemoryIdentity, Option<MemoryIdentity>);
        type Report = (Vec<&'static str>, Judgement, usize);

        fn kind(&self) -> PathKind {
            PathKind::Process
        }
        fn path(&self) -> &str {
            "shm"
        }
        fn hand_over(&mut self) -> Result<(u32, Timing)> {
            self.steps.push("hand over");
            Ok((7, Timing::from_samples(vec![1e-6, 2e-6], 1)))
        }
        fn describe(&mut self, delivered: &u32) -> Result<Self::Sides> {
            assert_eq!(*delivered, 7);
            self.steps.push("describe");
            Ok((identity(0), self.target.clone()))
        }
        fn judged(sides: &Self::Sides) -> crate::explain::Sides<'_> {
            crate::explain::Sides::Apart { source: Some(&sides.0), target: sides.1.as_ref(), staged: None }
        }
        fn report(self, _: &u32, _: Self::Sides, judgement: Judgement, timing: Timing) -> Result<Self::Report> {
            self.steps.push("report");
            Ok((self.steps.clone(), judgement, timing.samples.len()))
        }
    }

    #[test]
    fn a_transport_is_handed_over_described_judged_once_and_reported_in_that_order() {
        let mut same = Recorded { steps: Vec::new(), target: Some(identity(0)) };
        let (delivered, (steps, judgement, samples)) = carry(&mut same).unwrap();
        assert_eq!((delivered, samples), (7, 2));
        assert_eq!(steps, ["hand over", "describe", "report"]);
        assert_eq!(judgement.verdict, Verdict::Shared);
        // The judge, not the transport, says "copied" when the worker holds other memory.
        let mut other = Recorded { steps: Vec::new(), target: Some(identity(64)) };
        let (_, (_, judgement, _)) = carry(&mut other).unwrap();
        assert_eq!(judgement.verdict, Verdict::Copied);
    }
}
