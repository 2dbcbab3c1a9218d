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
        worker: None,
        predicted_time: None,
        streams: None,
    }
}

#[test]
fn text_table_has_one_unit_and_drops_empty_columns() {
    let text = share_table_text(&[row("x", Verdict::Shared, None, 3e-6), row("y", Verdict::Shared, None, 2e-3)]);
    assert!(text.contains("median (µs)"));
    assert!(text.contains("2000"), "{text}");
    assert!(!text.contains("why"));
    assert!(!text.contains("contexts"));
    assert!(text.contains("torch→tf"));
}

#[test]
fn html_escapes_and_marks_verdicts() {
    let html = share_table_html(&[row("<b>", Verdict::Copied, Some("dtype changed & more"), 1e-6)]);
    assert!(html.contains("&lt;b&gt;"));
    assert!(html.contains("dtype changed &amp; more"));
    assert!(html.contains("class=\"copied\""));
    assert!(html.contains(">why</th>"));
    assert_eq!(html.matches("<tr>").count(), 2);
}

#[test]
fn context_column_reads_the_driver_answer() {
    let mut t = tensor("jax", 0x1000);
    assert_eq!(context_text(&t), "n/a");
    t.cuda = Some(std::sync::Arc::new(serde_json::json!({"context": 0})));
    assert!(context_text(&t).contains("pool"));
    t.cuda = Some(std::sync::Arc::new(serde_json::json!({"context": 4096, "context_is_primary": true})));
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
    assert!(!share_table_html(std::slice::from_ref(&r)).contains("memory"));
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
    assert!(html.contains(">memory</span> driver ±0 B"), "{html}");
    assert!(share_table_text(&[r]).contains("consumer stream 7; producer makes stream 7 wait"));
}

#[test]
fn base64_matches_rfc_4648_vectors() {
    use crate::render::base64;
    for (plain, encoded) in
        [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")]
    {
        assert_eq!(base64(plain.as_bytes()), encoded);
    }
    assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
}

#[test]
fn text_table_fits_100_columns_and_wraps_what_is_long() {
    let tf_device = "/job:localhost/replica:0/task:0/device:CPU:0";
    let reason = "the target framework cannot import this layout without a copy: ".repeat(6);
    let mut r = row("a_rather_long_variable_name", Verdict::Copied, Some(&reason), 1.5e-3);
    r.target.device = tf_device.into();
    r.target.cuda = Some(std::sync::Arc::new(serde_json::json!({"context": 4096, "context_is_primary": true, "device_name": "NVIDIA H200"})));
    r.predicted = Some(crate::report::Prediction { verdict: Verdict::Shared, reason: Some("same layout".into()) });
    let text = share_table_text(&[r.clone(), row("y", Verdict::Shared, None, 2e-6)]);
    for line in text.lines() {
        assert!(line.chars().count() <= TEXT_WIDTH, "{} columns: {line}\n{text}", line.chars().count());
    }
    // Nothing is cut off: every word of the long fields is there.
    let words: Vec<&str> = text.split_whitespace().collect();
    for long in [tf_device, "NVIDIA", "H200]", "UNEXPECTED", "predicted"] {
        assert!(words.iter().any(|w| w.contains(long)), "{long} missing:\n{text}");
    }
    // Counted over the words, since wrapping may break a phrase across lines.
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(joined.matches("cannot import this layout").count(), 6, "{text}");
    assert!(text.contains("  why       the target framework"), "{text}");
    assert!(text.contains("  contexts  n/a → 0x1000 primary"), "{text}");

    // A row too wide even for the short columns becomes heading: value pairs, still within 100.
    let mut wide = row(&"n".repeat(100), Verdict::Shared, None, 1e-6);
    wide.source.shape = vec![1; 12];
    let text = share_table_text(&[wide]);
    assert!(text.lines().all(|l| l.chars().count() <= TEXT_WIDTH), "{text}");
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(joined.contains("name: nnnn") && joined.contains("verdict: shared"), "{text}");
}

#[test]
fn wrap_never_drops_a_character() {
    let text = format!("short {} end", "x".repeat(250));
    let lines = wrap(&text, 40, "> ", "  ");
    assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
    let joined: String = lines.iter().map(|l| l[2..].to_string()).collect::<Vec<_>>().join("");
    assert_eq!(joined.replace(' ', ""), text.replace(' ', ""));
    assert_eq!(wrap("", 10, "a ", "  "), vec!["a ".to_string()]);
}

#[test]
fn envelope_text_is_the_envelope_of_the_value() {
    // The fast text form and the Value form must say the same (the text keeps the fields' order).
    let mut r = row("x", Verdict::Copied, Some("a reason"), 2e-6);
    r.target.cuda = Some(std::sync::Arc::new(serde_json::json!({"context": 18446744073709551615u64, "device_name": "H200"})));
    let reports = vec![r];
    let text = crate::report::envelope_text("shares", &reports).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed, crate::report::envelope("shares", serde_json::to_value(&reports).unwrap()));
    assert!(text.contains("18446744073709551615"), "{text}");
}

/// The cells of the first `<tr …>` after `from` in `html`, as their opening tags.
fn cells_of_row<'a>(html: &'a str, from: &str) -> Vec<&'a str> {
    let start = html.find(from).expect(from) + from.len() - "<tr>".len();
    let row = &html[start..];
    let row = &row[..row.find("</tr>").unwrap()];
    row.match_indices("<t")
        .filter(|(i, _)| ["d ", "d>", "h ", "h>"].iter().any(|t| row[i + 2..].starts_with(t)))
        .map(|(i, _)| &row[i..i + row[i..].find('>').unwrap() + 1])
        .collect()
}

/// Asserts what every table of a notebook needs from its cells: alignment inline
/// (JupyterLab's td{text-align:right} beats a <style> block), text left with a readable minimum
/// width, numbers right.
pub(crate) fn assert_cells_read(html: &str) {
    for tag in html.match_indices("<td").chain(html.match_indices("<th")).map(|(i, _)| &html[i..i + html[i..].find('>').unwrap() + 1]) {
        if tag.starts_with("<thead") {
            continue;
        }
        if tag.contains("colspan") {
            assert!(tag.contains("text-align:left"), "detail line not left-aligned: {tag}");
        } else if tag.contains("num") {
            assert!(tag.contains("text-align:right"), "number not right-aligned inline: {tag}");
        } else {
            assert!(tag.contains("text-align:left") && tag.contains("min-width:"), "text cell without inline alignment and width: {tag}");
        }
        assert!(!tag.contains("anywhere"), "overflow-wrap:anywhere is dropped by the sanitiser: {tag}");
    }
}

#[test]
fn the_html_table_has_seven_columns_and_the_rest_on_a_detail_line() {
    let tf_device = "/job:localhost/replica:0/task:0/device:CPU:0";
    let mut r = row("x", Verdict::Copied, Some("dtype changed int64 → int32: JAX narrows 64-bit integers"), 1.5e-6);
    r.target.device = tf_device.into();
    r.target.cuda = Some(std::sync::Arc::new(serde_json::json!({"context": 4096, "context_is_primary": true})));
    r.memory = Some(crate::report::MemoryLedger {
        ordinal: 0,
        driver_used: Some(0),
        frameworks: Default::default(),
        seconds: 0.0,
        summary: "driver +64 MiB".into(),
    });
    r.streams = Some(crate::report::StreamReport {
        path: "dlpack".into(),
        producer_stream: Some(3),
        consumer_stream: Some(7),
        max_version: None,
        wait: "producer makes stream 7 wait".into(),
    });
    let html = share_table_html(&[r, row("y", Verdict::Shared, None, 2e-6)]);
    let header = cells_of_row(&html, "<thead><tr>");
    assert_eq!(header.len(), 7, "{header:?}");
    for row_start in ["<tbody><tr>", "</tr><tr>"] {
        assert_eq!(cells_of_row(&html, row_start).len(), 7, "{html}");
    }
    // The row says what happened; the detail line says why, in full.
    assert!(html.contains(">dtype changed int64 → int32</td>"), "{html}");
    // The long things are on the detail line, the device breakable only at / and :.
    let detail = &html[html.find("class=\"gpushare-detail\"").unwrap()..];
    let detail = &detail[..detail.find("</tr>").unwrap()];
    assert!(detail.contains("colspan=\"7\""), "{detail}");
    assert!(detail.contains("/<wbr>job:<wbr>localhost/<wbr>replica:<wbr>0/<wbr>task:<wbr>0/<wbr>device:<wbr>CPU:<wbr>0"), "{detail}");
    for label in ["devices", "pointers", "contexts", "samples", "min", "memory", "streams", "why"] {
        assert!(detail.contains(&format!(">{label}</span>")), "{label} missing: {detail}");
    }
    assert_eq!(html.matches("class=\"gpushare-detail\"").count(), 2);
    assert!(detail.contains("JAX narrows 64-bit integers"), "{detail}");
    assert_cells_read(&html);
    // The why wraps inside a bounded width but is never squeezed below a text column.
    assert!(html.contains(&format!("{};max-width:26em", crate::render::cells::TEXT_MIN)), "{html}");
}

#[test]
fn lab_tables_read_in_a_notebook_too() {
    let c = crate::render::lab::tests::comparison();
    let html = c.html();
    assert!(cells_of_row(&html, "<thead><tr>").len() <= 8);
    assert!(html.contains("Not applicable here (not run): pinned (pinned needs CUDA"), "a footnote, not a row: {html}");
    assert_cells_read(&html);
    assert_cells_read(&crate::render::lab::tests::bench().html());
}

#[test]
fn a_noisy_row_is_named_and_a_single_cold_sample_gets_a_hint() {
    let mut noisy = row("a", Verdict::Shared, None, 1e-6);
    noisy.timing = Timing::from_samples(vec![1e-6, 5e-6, 1e-6, 9e-6, 2e-6], 1);
    let mut cold = row("b", Verdict::Shared, None, 1e-6);
    cold.timing = Timing::from_samples(vec![382e-6], 1);
    let steady = row("c", Verdict::Shared, None, 1e-6);
    let rows = [noisy, cold, steady];
    for out in [share_table_text(&rows), share_table_html(&rows)] {
        let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains("⚠ a: noisy: IQR is"), "the note names the row: {out}");
        assert!(flat.contains("1 sample (b): one call, timed once; without a warm-up it also pays one-time costs"), "{out}");
        assert!(flat.contains("repeat=7, warmup=1"), "{out}");
        assert!(!flat.contains("(c)") && !flat.contains("⚠ c"), "{out}");
    }
}

#[test]
fn inspect_html_is_in_gpushares_own_style_inline() {
    let mut t = tensor("tf", 0x1000);
    t.device = "/job:localhost/replica:0/task:0/device:CPU:0".into();
    let html = tensor_html(&t);
    assert!(html.contains("class=\"gpushare gpushare-inspect\" style=\"font-family:monospace"), "{html}");
    // Every cell carries its alignment and width inline, as the other tables' cells do.
    assert_cells_read(&html);
    assert!(html.contains("/<wbr>job:<wbr>localhost"), "{html}");
}

#[test]
fn a_handoff_to_a_worker_names_each_pointers_process() {
    let mut r = row("x", Verdict::Shared, None, 3e-3);
    r.worker = Some(
        serde_json::from_value(serde_json::json!({
            "mechanism": "POSIX shared memory", "nbytes": 32, "bytes_per_handoff": 0,
            "source": {"pid": 7, "framework": "torch", "identity": null, "context": null},
            "target": {"pid": 8, "framework": "tf", "identity": null, "context": null},
        }))
        .unwrap(),
    );
    let text = share_table_text(std::slice::from_ref(&r));
    assert!(text.contains("0x1000 in pid 7 → 0x1000 in pid 8"), "{text}");
    assert!(share_table_html(std::slice::from_ref(&r)).contains("in pid 8"));
    r.worker = None;
    assert!(share_table_text(std::slice::from_ref(&r)).contains("0x1000 → 0x1000"));
}
