//! The regression check (`flash-attn-regression`) on the committed baseline: its rule, its
//! report and the cases it compares.

use flash_attn_tools::regression::{compare, Change, DEFAULT_ALPHA, DEFAULT_TOLERANCE};
use flash_attn_tools::stats::{bootstrap_ratio_interval, Interval, BOOTSTRAP_RESAMPLES};
use flash_attn_tools::timing::TimingFile;

fn baseline() -> TimingFile {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/results/baseline.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `file` with every sample of every case multiplied by `factor`.
fn scaled(file: &TimingFile, factor: f64) -> TimingFile {
    let mut scaled = file.clone();
    for case in scaled.results.iter_mut().chain(&mut scaled.all_kernels) {
        case.samples_us.iter_mut().for_each(|t| *t *= factor);
    }
    scaled
}

#[test]
fn a_change_needs_a_significant_test_and_an_interval_beyond_the_tolerance() {
    let interval = |low, high| Interval { low, high };
    let (alpha, tolerance) = (DEFAULT_ALPHA, DEFAULT_TOLERANCE);
    assert_eq!(
        Change::of(0.001, interval(1.03, 1.05), alpha, tolerance),
        Change::Slower
    );
    assert_eq!(
        Change::of(0.001, interval(0.95, 0.97), alpha, tolerance),
        Change::Faster
    );
    // Significant but within the tolerance, or beyond it but not significant: the same.
    assert_eq!(
        Change::of(0.001, interval(1.01, 1.05), alpha, tolerance),
        Change::Same
    );
    assert_eq!(
        Change::of(0.2, interval(1.03, 1.05), alpha, tolerance),
        Change::Same
    );
}

#[test]
fn the_ratio_interval_holds_the_ratio_of_medians() {
    let base = [10.0, 10.1, 10.2, 10.3, 10.4, 10.5, 10.6];
    let new = base.map(|t| t * 1.5);
    let interval = bootstrap_ratio_interval(&base, &new, BOOTSTRAP_RESAMPLES, 1).unwrap();
    assert!(
        interval.contains(1.5) && interval.width() < 0.1,
        "{interval:?}"
    );
    assert_eq!(
        bootstrap_ratio_interval(&[], &new, BOOTSTRAP_RESAMPLES, 1),
        None
    );
}

#[test]
fn the_baseline_against_itself_is_the_same_and_slowed_down_is_slower() {
    let baseline = baseline();
    let cases = baseline.results.len();
    assert!(cases > 0);
    let (report, slower) = compare(&baseline, &baseline, DEFAULT_ALPHA, DEFAULT_TOLERANCE).unwrap();
    assert_eq!(slower, 0, "{report}");
    assert_eq!(
        report.lines().count(),
        cases + 2,
        "a header, the cases, a summary"
    );
    assert!(
        report.lines().nth(1).unwrap().ends_with("  same"),
        "{report}"
    );
    assert!(
        report.ends_with(&format!(
            "regression check: {cases} cases, 0 slower beyond noise and 2% (alpha 0.01)\n"
        )),
        "{report}"
    );
    let (report, slower) = compare(
        &baseline,
        &scaled(&baseline, 1.1),
        DEFAULT_ALPHA,
        DEFAULT_TOLERANCE,
    )
    .unwrap();
    assert_eq!(slower, cases, "{report}");
    // Python's format of the case line: `True`/`False`, the p-value with a two-digit exponent.
    let first = report.lines().nth(1).unwrap();
    assert!(
        first.contains(" False ") || first.contains(" True "),
        "{first}"
    );
    assert!(first.contains("1.100 ") && first.contains("e-"), "{first}");
    let (_, faster) = compare(&baseline, &scaled(&baseline, 0.9), DEFAULT_ALPHA, 0.02).unwrap();
    assert_eq!(faster, 0, "faster is not slower");
}

#[test]
fn files_without_shared_cases_compare_nothing() {
    let empty = TimingFile {
        device: "none".to_owned(),
        results: Vec::new(),
        all_kernels: Vec::new(),
    };
    let (report, slower) = compare(&baseline(), &empty, DEFAULT_ALPHA, DEFAULT_TOLERANCE).unwrap();
    assert_eq!(slower, 0);
    assert_eq!(
        report,
        "regression check: no case with samples in both files; nothing compared\n"
    );
}

#[test]
fn the_default_api_cases_are_compared_by_shape_whatever_kernel_ran() {
    let default_api = baseline();
    let cases = default_api.results.len();
    assert!(cases > 0);
    // The dispatch picked another kernel for every shape, and each is 10% slower.
    let mut current = scaled(&default_api, 1.1);
    for case in &mut current.results {
        case.config.push_str("_retuned");
    }
    let (report, slower) =
        compare(&default_api, &current, DEFAULT_ALPHA, DEFAULT_TOLERANCE).unwrap();
    assert_eq!(slower, cases, "{report}");
    let first = report.lines().nth(1).unwrap();
    assert!(
        first.contains(" -> ") && first.contains("_retuned"),
        "{first}"
    );
    // A run that timed every kernel against one that did not: still the default API's cases.
    let (_, slower) = compare(&baseline(), &current, DEFAULT_ALPHA, DEFAULT_TOLERANCE).unwrap();
    assert_eq!(slower, cases);
}

#[test]
fn a_case_of_more_keys_than_queries_pairs_only_with_its_own_key_count() {
    let default_api = baseline();
    let cases = default_api.results.len();
    // The same cases timed with other key counts, and 10% slower: no baseline case is theirs.
    let mut other_keys = scaled(&default_api, 1.1);
    for case in &mut other_keys.results {
        case.seq_len_kv = Some(case.seq_len + 64);
    }
    let (report, slower) =
        compare(&default_api, &other_keys, DEFAULT_ALPHA, DEFAULT_TOLERANCE).unwrap();
    assert_eq!(slower, 0, "{report}");
    assert!(report.contains("nothing compared"), "{report}");
    // Against itself each pairs, and the report names both lengths.
    let (report, slower) = compare(
        &other_keys,
        &scaled(&other_keys, 1.1),
        DEFAULT_ALPHA,
        DEFAULT_TOLERANCE,
    )
    .unwrap();
    assert_eq!(slower, cases, "{report}");
    let first_case = &other_keys.results[0];
    let label = format!(
        "{},{},{}x{},{}",
        first_case.batch,
        first_case.heads,
        first_case.seq_len,
        first_case.seq_len + 64,
        first_case.head_dim
    );
    assert!(report.contains(&label), "{report}");
    // The baseline's cases (written before the field) read as of as many keys as queries.
    assert!(default_api
        .results
        .iter()
        .all(|case| case.seq_len_kv.is_none()));
}
