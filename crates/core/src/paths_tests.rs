//! Tests of the path table (crates/core/src/paths.rs).

use super::*;

#[test]
fn every_name_is_declared_once_per_kind() {
    for p in PATHS {
        assert_eq!(PATHS.iter().filter(|q| q.kind == p.kind && q.name == p.name).count(), 1, "{}", p.name);
        assert!(p.colour.starts_with('#') && p.colour.len() == 7);
    }
    assert_eq!(names(Share).collect::<Vec<_>>(), ["dlpack", "capsule", "cai", "host", "pinned", "copy", "shared"]);
    assert_eq!(names(Move).collect::<Vec<_>>(), ["p2p", "pinned", "dlpack", "move"]);
    assert_eq!(names(Process).collect::<Vec<_>>(), ["ipc", "torch_mp", "shm", "nccl", "nccl_socket", "gloo", "remote"]);
}

#[test]
fn a_name_two_kinds_share_has_one_colour() {
    for p in PATHS {
        assert_eq!(colour(p.name), PATHS.iter().find(|q| q.name == p.name).unwrap().colour);
    }
    assert_eq!(colour("auto"), AUTO.colour);
}

#[test]
fn copies_by_design_differ_by_kind() {
    assert_eq!(copied_by_design(Share, "dlpack"), None);
    assert!(copied_by_design(Move, "dlpack").unwrap().starts_with("copied by design"));
    assert!(copied_by_design(Share, "host").unwrap().starts_with("copied by design"));
    assert_eq!(copied_by_design(Move, "move"), None);
}

#[test]
fn a_path_list_is_read_once_for_every_kind() {
    let share: Vec<&str> = names(PathKind::Share).collect();
    assert_eq!(parse_list(PathKind::Share, ["all"]), Ok(share.clone()));
    assert_eq!(parse_list(PathKind::Share, [""]), Ok(share));
    assert_eq!(parse_list(PathKind::Share, ["copy, dlpack,copy", "auto"]), Ok(vec!["copy", "dlpack", "auto"]));
    assert_eq!(parse_list(PathKind::Move, ["p2p,move"]), Ok(vec!["p2p", "move"]));
    assert_eq!(parse_list(PathKind::Process, ["all"]), Ok(names(PathKind::Process).collect()));
    let e = parse_list(PathKind::Share, ["dlpack,teleport"]).unwrap_err();
    assert!(e.starts_with("unknown transfer path 'teleport'; known paths: dlpack, capsule,") && e.ends_with(", auto, all"), "{e}");
    // A name of another kind is not one of this kind's.
    assert!(parse_list(PathKind::Move, ["host"]).unwrap_err().starts_with("unknown move path 'host'"));
    assert!(parse_list(PathKind::Process, ["dlpack"]).unwrap_err().starts_with("unknown process path 'dlpack'"));
    assert!(parse_list(PathKind::Share, ["all,dlpack"]).is_err(), "all stands alone");
}
