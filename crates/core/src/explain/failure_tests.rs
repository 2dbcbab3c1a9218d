#[test]
fn known_failures_map_to_fixes() {
    let (reason, fix) = super::explain_failure("RuntimeError: Can't export tensors that require gradient, use tensor.detach()").unwrap();
    assert!(reason.contains("grad") && fix.contains("detach"));
    assert!(super::explain_failure("something new").is_none());
    let (reason, fix) = super::explain_failure(
        "JaxRuntimeError: INTERNAL: Address of buffer 0 must be a multiple of 10, but was 0x7fd8ad000208",
    )
    .unwrap();
    assert!(reason.contains("16-byte") && fix.contains("clone()"));
}
