use super::*;
use crate::report::{ShareReport, TensorReport, Verdict};
use crate::stats::Timing;

fn tensor(fw: &str, ptr: u64) -> TensorReport {
    TensorReport {
        framework: fw.into(),
        dtype: "float32".into(),
        shape: vec![2, 3],
        strides: vec![3, 1],
        device: "cpu".into(),
        dlpack_device: (1, 0),
        dlpack_device_name: "cpu:0".into(),
        data_ptr: ptr,
        byte_offset: 0,
        nbytes: 24,
        span: (ptr, ptr + 24),
        contiguous: true,
        alignment: 64,
        readonly: false,
        dlpack_version: None,
        cuda: None,
    }
}

fn row(name: &str, verdict: Verdict, reason: Option<&str>, median: f64) -> ShareReport {
    ShareReport {
        name: Some(name.into()),
        path: "dlpack".into(),
        source: tensor("torch", 0x1000),
        target: tensor("tf", if verdict == Verdict::Shared { 0x1000 } else { 0x2000 }),
        verdict,
        reason: reason.map(Into::into),
        notes: vec![],
        timing: Timing::from_samples(vec![median, median * 2.0], 1),
        shares_origin: None,
        predicted: None,
        memory: None,
        streams: None,
    }
}

#[test]
fn text_table_has_one_unit_and_drops_empty_columns() {
    let text = share_table_text(&[row("x", Verdict::Shared, None, 3e-6), row("y", Verdict::Shared, None, 2e-3)]);
    assert!(text.contains("median (µs)"));
    assert!(text.contains("2000"), "{text}");
    assert!(!text.contains("why"));
    assert!(!text.contains("ctx"));
    assert!(text.contains("torch→tf"));
}

#[test]
fn html_escapes_and_marks_verdicts() {
    let html = share_table_html(&[row("<b>", Verdict::Copied, Some("dtype changed & more"), 1e-6)]);
    assert!(html.contains("&lt;b&gt;"));
    assert!(html.contains("dtype changed &amp; more"));
    assert!(html.contains("class=\"copied\""));
    assert!(html.contains("<th>why</th>"));
    assert_eq!(html.matches("<tr>").count(), 2);
}

#[test]
fn context_column_reads_the_driver_answer() {
    let mut t = tensor("jax", 0x1000);
    assert_eq!(context_text(&t), "n/a");
    t.cuda = Some(serde_json::json!({"context": 0}));
    assert!(context_text(&t).contains("pool"));
    t.cuda = Some(serde_json::json!({"context": 4096, "context_is_primary": true}));
    assert_eq!(context_text(&t), "0x1000 primary");
}

#[test]
fn tensor_renderings_list_every_field() {
    let t = tensor("numpy", 0x1040);
    for key in ["framework", "dtype", "strides", "dlpack_device", "data_ptr", "nbytes", "alignment", "readonly"] {
        assert!(tensor_text(&t).contains(key));
        assert!(tensor_html(&t).contains(key));
    }
}

#[test]
fn an_unexpected_outcome_is_shown_with_the_prediction() {
    let mut r = row("x", Verdict::Copied, Some("dtype changed"), 1e-6);
    r.predicted = Some(crate::report::Prediction { verdict: Verdict::Shared, reason: None });
    let text = share_table_text(std::slice::from_ref(&r));
    assert!(text.contains("UNEXPECTED copy"), "{text}");
    assert!(text.contains("predicted shared"));
    assert!(share_table_html(&[r]).contains("UNEXPECTED copy"));
}

#[test]
fn memory_and_stream_columns_appear_only_with_data() {
    let mut r = row("x", Verdict::Shared, None, 1e-6);
    assert!(!share_table_html(std::slice::from_ref(&r)).contains("<th>memory</th>"));
    r.memory = Some(crate::report::MemoryLedger {
        ordinal: 0,
        driver_used: Some(0),
        frameworks: Default::default(),
        seconds: 0.0,
        summary: "driver ±0 B".into(),
    });
    r.streams = Some(crate::report::StreamReport {
        path: "dlpack".into(),
        producer_stream: Some(3),
        consumer_stream: Some(7),
        max_version: None,
        wait: "producer makes stream 7 wait".into(),
    });
    let html = share_table_html(std::slice::from_ref(&r));
    assert!(html.contains("<th>memory</th>") && html.contains("driver ±0 B"));
    assert!(share_table_text(&[r]).contains("consumer stream 7; producer makes stream 7 wait"));
}
