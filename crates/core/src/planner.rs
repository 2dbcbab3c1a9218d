//! What `auto` decided, kept where it was decided: the planner of one cost model. A share's own
//! `auto` per array is [`crate::explain::DecisionMemo`]'s; this keeps the moves' (`device=`),
//! which are decided before a plan is looked up, because the path names the plan.
//!
//! A planner is made with the model it plans with and dropped with it: a new calibration makes a
//! new planner, so nothing decided with the old model outlives it and no cache needs clearing.

use std::sync::Mutex;

use crate::advice::crossings::size_class;
use crate::auto::{auto_size_breaks, resolve_auto, AutoFacts, AUTO_REFERENCE_BYTES};
use crate::paths::Place;

/// One kind of move: the pair, where the array lies and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveKey {
    pub source: String,
    pub target: String,
    pub from: Place,
    pub to: Place,
}

/// `auto`'s path for each range of sizes of one kind of move, for an idle producer and a busy one.
#[derive(Debug)]
struct MoveEntry {
    key: MoveKey,
    breaks: Vec<u64>,
    paths: Vec<Option<(&'static str, &'static str)>>,
}

/// The moves' `auto`, remembered per kind of move and range of sizes (the model decides once per
/// range, [`crate::advice::crossings`]). Working a move's `auto` out asks the driver how the two
/// GPUs are linked (several calls; twice with a model, for an idle and a busy producer): a few µs of
/// the host work `share(device=)` adds to a peer copy, paid once per kind of move here.
#[derive(Debug, Default)]
pub struct MoveAutos(Mutex<Vec<MoveEntry>>);

impl MoveAutos {
    /// THE `auto`'s path for a move of `key` of an array of `nbytes` (None: not known, or not
    /// asked where there is no model; decided as `auto` decides it, at the rules' reference size). `facts` gives the move's facts (its `nbytes`
    /// and `producer_busy` are set here), asked only when this kind of move or range is new.
    /// With a model, the path for a busy producer may differ (a peer copy waits on the host for
    /// the producer's queue; the framework's own move is queued after it on the device): `busy`,
    /// which asks the driver of the producer's stream, is asked only where the two paths differ.
    pub fn path<'a>(
        &self,
        key: &MoveKey,
        nbytes: Option<u64>,
        facts: impl FnOnce() -> AutoFacts<'a>,
        busy: impl FnOnce() -> bool,
    ) -> &'static str {
        let path = self.try_path(key, nbytes, || Ok::<_, std::convert::Infallible>(facts()), || Ok(busy()));
        match path {
            Ok(path) => path,
        }
    }

    /// [`MoveAutos::path`] where finding the facts or the producer's state can fail (a Python
    /// adapter's attribute, the driver): the first error is returned, and nothing is remembered.
    pub fn try_path<'a, E>(
        &self,
        key: &MoveKey,
        nbytes: Option<u64>,
        facts: impl FnOnce() -> Result<AutoFacts<'a>, E>,
        busy: impl FnOnce() -> Result<bool, E>,
    ) -> Result<&'static str, E> {
        // An unknown size is decided at the reference size, so it is remembered in that one's range.
        let class_of = nbytes.unwrap_or(AUTO_REFERENCE_BYTES);
        let known = {
            let memo = self.0.lock().ok();
            memo.and_then(|memo| {
                let entry = memo.iter().find(|e| e.key == *key)?;
                *entry.paths.get(size_class(&entry.breaks, class_of))?
            })
        };
        let (idle, busy_path) = match known {
            Some(paths) => paths,
            None => {
                let facts = AutoFacts { nbytes, producer_busy: false, ..facts()? };
                let idle = resolve_auto(&facts).path;
                let busy_path = if facts.model.is_some() && key.from != key.to {
                    resolve_auto(&AutoFacts { producer_busy: true, ..facts }).path
                } else {
                    idle
                };
                self.remember(key, &facts, class_of, (idle, busy_path));
                (idle, busy_path)
            }
        };
        Ok(if busy_path != idle && busy()? { busy_path } else { idle })
    }

    fn remember(&self, key: &MoveKey, facts: &AutoFacts<'_>, nbytes: u64, paths: (&'static str, &'static str)) {
        let Ok(mut memo) = self.0.lock() else { return };
        let index = match memo.iter().position(|e| e.key == *key) {
            Some(index) => index,
            None => {
                let breaks = auto_size_breaks(facts);
                let ranges = breaks.len() + 1;
                memo.push(MoveEntry { key: key.clone(), breaks, paths: vec![None; ranges] });
                memo.len() - 1
            }
        };
        let entry = &mut memo[index];
        let class = size_class(&entry.breaks, nbytes);
        entry.paths[class] = Some(paths);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::advice::model::CostModel;
    use crate::auto::tests::move_model as lines;

    /// The framework's own move starts sooner, the peer copy streams faster: equal at 24 MB.
    fn move_model() -> CostModel {
        lines(&[("p2p", 30e-6, 400e9), ("move", 10e-6, 300e9)])
    }

    /// A torch→torch move from cuda:0 to cuda:1 with `model`, its size set by the planner.
    fn facts(model: Option<&CostModel>) -> AutoFacts<'_> {
        crate::auto::tests::move_facts(model, None)
    }

    fn key(to: Place) -> MoveKey {
        MoveKey { source: "torch".into(), target: "torch".into(), from: Place::Device(0), to }
    }

    #[test]
    fn each_range_of_sizes_is_worked_out_once_and_gives_what_auto_gives() {
        let m = move_model();
        let autos = MoveAutos::default();
        let asked = Cell::new(0);
        let path = |n: u64| {
            autos.path(&key(Place::Device(1)), Some(n), || {
                asked.set(asked.get() + 1);
                facts(Some(&m))
            }, || false)
        };
        for (n, expected) in [(1u64 << 20, "move"), (2 << 20, "move"), (256 << 20, "p2p"), (1 << 30, "p2p"), (4096, "move")] {
            assert_eq!(path(n), expected, "{n}");
            assert_eq!(path(n), resolve_auto(&AutoFacts { nbytes: Some(n), ..facts(Some(&m)) }).path, "{n}");
        }
        // Two ranges, each worked out once: the driver's link query behind `facts` is not repeated.
        assert_eq!(asked.get(), 2);
    }

    #[test]
    fn the_producer_is_asked_only_where_its_state_changes_the_path() {
        let m = move_model();
        let autos = MoveAutos::default();
        let asked = Cell::new(0);
        let with = |busy: bool, n: u64| {
            autos.path(&key(Place::Device(1)), Some(n), || facts(Some(&m)), || {
                asked.set(asked.get() + 1);
                busy
            })
        };
        // A large array: p2p when idle; a busy producer's queue makes the peer copy wait on the
        // host, so the framework's own move, queued on the device, is taken.
        assert_eq!(with(false, 256 << 20), "p2p");
        assert_eq!(with(true, 256 << 20), "move");
        assert_eq!(asked.get(), 2);
        // A small one takes `move` either way: nothing to ask.
        assert_eq!(with(true, 1 << 20), "move");
        assert_eq!(asked.get(), 2);
        // Without a model a busy producer changes nothing, and nothing is asked.
        let rules = MoveAutos::default();
        let never = || -> bool { panic!("the producer is asked without a model") };
        assert_eq!(rules.path(&key(Place::Device(1)), Some(256 << 20), || facts(None), never), "p2p");
    }

    #[test]
    fn a_move_to_where_the_array_lies_and_an_unknown_size_are_decided_as_auto_decides() {
        let m = move_model();
        let autos = MoveAutos::default();
        let here = AutoFacts { destination: Some(Place::Device(0)), ..facts(Some(&m)) };
        let never = || -> bool { panic!("nothing to ask of a move that moves nothing") };
        assert_eq!(autos.path(&key(Place::Device(0)), Some(1 << 20), || here, never), "move");
        // No size: the rules' reference size decides, in that size's range, worked out once with it.
        let asked = Cell::new(0);
        for n in [None, Some(1 << 20), None] {
            let path = autos.path(&key(Place::Device(1)), n, || {
                asked.set(asked.get() + 1);
                facts(Some(&m))
            }, || false);
            assert_eq!(path, resolve_auto(&facts(Some(&m))).path);
            assert_eq!(path, resolve_auto(&AutoFacts { nbytes: Some(1 << 20), ..facts(Some(&m)) }).path);
        }
        assert_eq!(asked.get(), 1);
    }
}
