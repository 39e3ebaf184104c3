//! The autotuner's GPU-free logic: its statistics, the sweep, winner selection and the
//! confirmation verdict, the updated dispatch table, the sampled-row reference, the reports and
//! the reading back of their JSON.

use std::time::{Duration, UNIX_EPOCH};

use flash_attn::reference::{
    attention, attention_rows, random_normal, ErrorStats, Precision, QueryRow,
};
use flash_attn::{
    dispatch_table, dispatch_table_sm90a, AttentionShape, Dtype, Family, ForwardKernel, GridSize,
    SeqBucket, FORWARD_KERNELS, NOT_TUNED, SUPPORTED_HEAD_DIMS,
};
use flash_attn_tools::stats::{
    bootstrap_median_interval, cliffs_delta, mann_whitney_u, median, Interval, BOOTSTRAP_RESAMPLES,
};
use flash_attn_tools::timing::LaunchTimes;
use flash_attn_tools::tuning::{
    groups, measurements_from_json, rank_configs, ranked_tables, render_dispatch_table,
    render_sm90a_dispatch_table, sample_rows, sweep_shapes, to_json, to_svg, updated_sm90a_table,
    updated_table, utc_date, ConfigTimes, Confirmation, Decision, GroupKey, Measurement, Timing,
    TuningRun, Validation, Verdict, SWEEP_SEQ_LENS,
};
use half::f16;

use crate::H100_SM_COUNT;

/// `count` samples `centre + spread * N(0, 1)`, deterministic for `seed` (the normal values
/// pass through f16, which only coarsens them).
fn noisy(centre: f64, spread: f64, count: usize, seed: u64) -> Vec<f64> {
    random_normal::<f16>(count, 0.0, 1.0, seed)
        .into_iter()
        .map(|x| centre + spread * x.to_f64())
        .collect()
}

#[test]
fn median_of_odd_and_even_counts() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    assert_eq!(median(&[7.0]), Some(7.0));
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[1.0, f64::NAN]), None);
}

#[test]
fn bootstrap_interval_holds_the_median_and_narrows_with_less_spread() {
    let wide = noisy(100.0, 5.0, 30, 1);
    let narrow = noisy(100.0, 0.5, 30, 1);
    let wide_interval = bootstrap_median_interval(&wide, BOOTSTRAP_RESAMPLES, 7).unwrap();
    let narrow_interval = bootstrap_median_interval(&narrow, BOOTSTRAP_RESAMPLES, 7).unwrap();
    for (samples, interval) in [(&wide, wide_interval), (&narrow, narrow_interval)] {
        assert!(
            interval.contains(median(samples).unwrap()),
            "{interval:?} misses the median"
        );
        assert!(interval.width() > 0.0, "{interval:?}");
    }
    assert!(
        narrow_interval.width() < wide_interval.width() / 4.0,
        "{narrow_interval:?} vs {wide_interval:?}"
    );
    // Deterministic for a seed; another seed moves it a little.
    assert_eq!(
        bootstrap_median_interval(&wide, BOOTSTRAP_RESAMPLES, 7),
        Some(wide_interval)
    );
    assert_eq!(bootstrap_median_interval(&[], BOOTSTRAP_RESAMPLES, 7), None);
    assert_eq!(bootstrap_median_interval(&wide, 0, 7), None);
}

#[test]
fn bootstrap_interval_of_constant_samples_is_a_point() {
    let interval = bootstrap_median_interval(&[5.0; 20], BOOTSTRAP_RESAMPLES, 1).unwrap();
    assert_eq!((interval.low, interval.high), (5.0, 5.0));
}

#[test]
fn mann_whitney_counts_u_by_hand() {
    // Pairs (x, y) with x > y: 5 > 2, 5 > 3, 5 > 3; ties: 2 = 2 twice, worth a half each.
    let test = mann_whitney_u(&[1.0, 2.0, 2.0, 5.0], &[2.0, 3.0, 3.0]).unwrap();
    assert_eq!(test.u, 4.0);
    // What the Python regression check (scripts/regression_check.py, now flash-attn-regression)
    // computed on the same samples.
    assert!(
        (test.p_value - 0.578_403_013_496_116).abs() < 1e-6,
        "{test:?}"
    );
    assert_eq!(
        mann_whitney_u(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0])
            .unwrap()
            .u,
        0.0
    );
    assert_eq!(
        mann_whitney_u(&[4.0, 5.0, 6.0], &[1.0, 2.0, 3.0])
            .unwrap()
            .u,
        9.0
    );
}

#[test]
fn mann_whitney_p_values_match_the_python_regression_check() {
    // Values from the former scripts/regression_check.py's mann_whitney_p, the same method in
    // Python (scipy-free), which flash-attn-regression replaced.
    let separated = mann_whitney_u(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
    assert!((separated.unwrap().p_value - 0.012_185_780_355_344_818).abs() < 1e-6);
    let overlapping = mann_whitney_u(
        &[10.0, 10.2, 10.1, 10.4, 10.3, 10.5],
        &[10.25, 10.35, 10.6, 10.7, 10.15, 10.8],
    );
    assert!((overlapping.unwrap().p_value - 0.173_485_468_321_478_5).abs() < 1e-6);
}

#[test]
fn mann_whitney_tells_separated_samples_from_one_distribution() {
    let fast = noisy(100.0, 1.0, 40, 3);
    let slow = noisy(105.0, 1.0, 40, 4);
    let separated = mann_whitney_u(&fast, &slow).unwrap();
    assert!(separated.p_value < 1e-6, "{separated:?}");
    assert!(separated.u < 40.0, "{separated:?}");
    let same = mann_whitney_u(&noisy(100.0, 1.0, 40, 5), &noisy(100.0, 1.0, 40, 6)).unwrap();
    assert!(same.p_value > 0.05, "{same:?}");
    // Every value tied: no evidence at all.
    let tied = mann_whitney_u(&[3.0; 10], &[3.0; 12]).unwrap();
    assert_eq!((tied.u, tied.p_value), (60.0, 1.0));
    assert_eq!(mann_whitney_u(&[], &[1.0]), None);
}

#[test]
fn cliffs_delta_has_the_sign_and_extremes_of_dominance() {
    assert_eq!(cliffs_delta(&[5.0, 6.0], &[1.0, 2.0, 3.0]), Some(1.0));
    assert_eq!(cliffs_delta(&[1.0, 2.0, 3.0], &[5.0, 6.0]), Some(-1.0));
    assert_eq!(cliffs_delta(&[1.0, 2.0], &[1.0, 2.0]), Some(0.0));
    // x > y in 3 of the 4 pairs (2 > 1, 4 > 1, 4 > 3), x < y in 1 (2 < 3): (3 - 1) / 4.
    assert_eq!(cliffs_delta(&[2.0, 4.0], &[1.0, 3.0]), Some(0.5));
    assert_eq!(cliffs_delta(&[1.0], &[]), None);
    // It is the rescaled U of the rank test.
    let (a, b) = (noisy(10.0, 1.0, 25, 8), noisy(10.5, 1.0, 30, 9));
    let u = mann_whitney_u(&a, &b).unwrap().u;
    let delta = cliffs_delta(&a, &b).unwrap();
    assert!((delta - (2.0 * u / (25.0 * 30.0) - 1.0)).abs() < 1e-12);
}

fn kernels_of(dtype: Dtype, head_dim: usize) -> Vec<&'static ForwardKernel> {
    FORWARD_KERNELS
        .iter()
        .filter(|k| k.spec.dtype == dtype && k.spec.tile.head_dim == head_dim)
        .collect()
}

fn times(kernel: &'static ForwardKernel, median_us: &[Option<f64>]) -> ConfigTimes {
    ConfigTimes {
        kernel,
        median_us: median_us.to_vec(),
    }
}

#[test]
fn the_winner_has_the_lowest_mean_time_relative_to_the_best() {
    // Mean times favour `big` (510 vs 520 us); mean ratios favour `small`: the large shape
    // must not outweigh the small one.
    let [big, small] = [kernels_of(Dtype::F16, 64)[0], kernels_of(Dtype::F16, 64)[1]];
    let ranking = rank_configs(&[
        times(big, &[Some(1000.0), Some(20.0)]),
        times(small, &[Some(1030.0), Some(10.0)]),
    ]);
    let order: Vec<_> = ranking.iter().map(|r| r.kernel).collect();
    assert_eq!(order, [small, big]);
    assert!((ranking[0].mean_relative_time - 1.015).abs() < 1e-12);
    assert!((ranking[1].mean_relative_time - 1.5).abs() < 1e-12);
}

#[test]
fn a_configuration_missing_at_any_shape_cannot_win() {
    // `broken` is fastest where it ran, but failed at the second shape; it still sets the best
    // time at the first.
    let kernels = kernels_of(Dtype::F16, 64);
    let [steady, broken, short, slower] = [kernels[0], kernels[1], kernels[2], kernels[3]];
    let ranking = rank_configs(&[
        times(steady, &[Some(12.0), Some(20.0), Some(30.0)]),
        times(broken, &[Some(10.0), None, Some(29.0)]),
        times(short, &[Some(11.0), Some(19.0)]),
        times(slower, &[Some(13.0), Some(21.0), Some(31.0)]),
    ]);
    let order: Vec<_> = ranking.iter().map(|r| r.kernel).collect();
    assert_eq!(order, [steady, slower]);
    let expected = (12.0 / 10.0 + 20.0 / 19.0 + 30.0 / 29.0) / 3.0;
    assert!((ranking[0].mean_relative_time - expected).abs() < 1e-12);
    assert!(rank_configs(&[]).is_empty());
}

fn timing(samples: &[f64]) -> Timing {
    let mut per_launch_us = samples.to_vec();
    per_launch_us.sort_by(f64::total_cmp);
    Timing::new(LaunchTimes {
        per_launch_us,
        launches_per_repeat: 10,
        host_us_per_launch: 1.0,
    })
    .unwrap()
}

fn passed() -> Validation {
    let stats = ErrorStats {
        max_abs: 1e-3,
        mean_abs: 1e-4,
        non_finite: 0,
    };
    Validation::Passed {
        ours: stats,
        plain: stats,
    }
}

/// A non-causal measurement on an H100.
fn measured(
    kernel: &'static ForwardKernel,
    shape: AttentionShape,
    median_us: Option<f64>,
) -> Measurement {
    Measurement {
        kernel,
        shape,
        causal: false,
        grid: GridSize::of(&shape, H100_SM_COUNT),
        validation: match median_us {
            Some(_) => passed(),
            None => Validation::Failed("error beyond tolerance".to_owned()),
        },
        timing: median_us.map(|us| timing(&[us - 0.1, us, us + 0.1])),
    }
}

#[test]
fn measurements_group_by_dispatch_key_with_the_first_shape_representative() {
    let [a, b] = [kernels_of(Dtype::F16, 64)[0], kernels_of(Dtype::F16, 64)[1]];
    let seed = AttentionShape::new(4, 8, 512, 64);
    let wide = AttentionShape::new(16, 16, 512, 64);
    let wider = AttentionShape::new(32, 16, 512, 64);
    let long = AttentionShape::new(2, 16, 4096, 64);
    let measurements = [
        measured(a, seed, Some(11.0)),
        measured(b, seed, Some(10.0)),
        measured(a, wide, Some(80.0)),
        measured(b, wide, None),
        measured(a, wider, Some(150.0)),
        measured(b, wider, Some(140.0)),
        measured(a, long, Some(500.0)),
        measured(b, long, Some(450.0)),
    ];
    let groups = groups(&measurements);
    let keys: Vec<_> = groups.iter().map(|g| (g.key.bucket, g.key.grid)).collect();
    assert_eq!(
        keys,
        [
            (SeqBucket::UpTo512, GridSize::Small),
            (SeqBucket::UpTo512, GridSize::Large),
            (SeqBucket::Above2048, GridSize::Large),
        ]
    );
    // The seed shape has the small-grid group to itself; 16,16,512 represents the large one.
    let (small, large) = (&groups[0], &groups[1]);
    assert_eq!(small.shapes, [seed]);
    assert_eq!(small.representative(), Some(seed));
    assert_eq!(large.shapes, [wide, wider]);
    assert_eq!(large.representative(), Some(wide));
    assert_eq!(large.candidates[1].median_us, [None, Some(140.0)]);
    // b wins the seed shape, but failed at a large S=512 shape: a wins that group.
    let winners: Vec<_> = groups.iter().map(|g| g.ranking()[0].kernel).collect();
    assert_eq!(winners, [b, a, b]);
    assert_eq!(large.ranking().len(), 1);
    // A single eligible configuration is taken, unconfirmed.
    let decision = large.decide(None, Some(b)).unwrap();
    assert_eq!(
        (decision.kernel, decision.confirmed, decision.margin_percent),
        (a, false, 0.0)
    );
}

#[test]
fn the_sweep_measures_a_small_and_a_large_grid_in_every_key_length_bucket() {
    for &head_dim in SUPPORTED_HEAD_DIMS {
        let shapes = sweep_shapes(head_dim, H100_SM_COUNT);
        let key = |s: &AttentionShape| (s.batch, s.heads_q, s.seq_len_q);
        let listed: Vec<_> = shapes.iter().map(key).collect();
        // Each group's representative first: the seed shape, then 16,16,512.
        assert_eq!(
            listed,
            [
                (4, 8, 512),
                (16, 16, 512),
                (32, 16, 512),
                (64, 16, 128),
                (8, 16, 128),
                (32, 16, 256),
                (4, 16, 256),
                (8, 16, 1024),
                (1, 16, 1024),
                (4, 16, 2048),
                (1, 8, 2048),
                (2, 16, 4096),
                (1, 4, 4096),
            ]
        );
        for shape in &shapes {
            assert_eq!(
                *shape,
                AttentionShape::new(shape.batch, shape.heads_q, shape.seq_len_q, head_dim)
            );
        }
        for bucket in SeqBucket::ALL {
            for grid in GridSize::ALL {
                assert!(
                    shapes.iter().any(|s| SeqBucket::of(s.seq_len_kv) == bucket
                        && GridSize::of(s, H100_SM_COUNT) == grid),
                    "D={head_dim}: no {grid:?} shape with keys {}",
                    bucket.label()
                );
            }
        }
    }
    // The small-grid shapes follow the device: at most 2 tiles per SM, down to one head.
    for seq_len in SWEEP_SEQ_LENS {
        for sm_count in [16, 58, 132, 170] {
            let small: Vec<_> = sweep_shapes(64, sm_count)
                .into_iter()
                .filter(|s| s.seq_len_q == seq_len && GridSize::of(s, sm_count) == GridSize::Small)
                .collect();
            assert_eq!(small.len(), 1, "S={seq_len} on {sm_count} SMs: {small:?}");
            let shape = small[0];
            assert!(
                GridSize::query_tiles(&shape) <= 2 * sm_count
                    || (shape.batch, shape.heads_q) == (1, 1),
                "{shape:?} on {sm_count} SMs"
            );
        }
    }
}

fn key() -> GroupKey {
    GroupKey {
        dtype: Dtype::F16,
        head_dim: 64,
        causal: true,
        bucket: SeqBucket::UpTo1024,
        grid: GridSize::Large,
    }
}

/// Winner, runner-up and a third kernel of the key's element type and head dim.
fn contenders() -> [&'static ForwardKernel; 3] {
    let kernels = kernels_of(Dtype::F16, 64);
    [kernels[0], kernels[1], kernels[2]]
}

fn confirmation(winner_us: Vec<f64>, runner_up_us: Vec<f64>) -> Confirmation {
    let [winner, runner_up, _] = contenders();
    let shape = AttentionShape::new(8, 16, 1024, 64);
    Confirmation::new(key(), shape, (winner, winner_us), (runner_up, runner_up_us)).unwrap()
}

#[test]
fn a_win_beyond_the_noise_is_confirmed_and_taken() {
    let [win, run, _] = contenders();
    let c = confirmation(noisy(100.0, 0.5, 40, 1), noisy(103.0, 0.5, 40, 2));
    assert_eq!(c.verdict, Verdict::WinnerConfirmed);
    assert!(c.test.p_value < 1e-6 && c.cliffs_delta > 0.9, "{c:?}");
    assert!(
        (c.margin_percent() - 3.0).abs() < 0.5,
        "{}",
        c.margin_percent()
    );
    // A confirmed winner replaces the current entry, even the runner-up.
    assert_eq!(c.choose(Some(run)), win);
    assert_eq!(c.choose(None), win);
}

#[test]
fn a_win_inside_the_noise_is_a_tie_that_keeps_the_current_entry() {
    let [win, run, elsewhere] = contenders();
    let c = confirmation(noisy(100.0, 1.0, 40, 3), noisy(100.0, 1.0, 40, 4));
    assert_eq!(c.verdict, Verdict::TieWithinNoise, "{c:?}");
    assert_eq!(c.choose(Some(run)), run);
    assert_eq!(c.choose(Some(win)), win);
    assert_eq!(c.choose(Some(elsewhere)), win);
    assert_eq!(c.choose(None), win);
}

#[test]
fn a_reversed_result_is_not_a_win() {
    let [_, run, _] = contenders();
    let c = confirmation(noisy(103.0, 0.5, 40, 5), noisy(100.0, 0.5, 40, 6));
    assert_eq!(c.verdict, Verdict::Contradicted);
    assert!(c.margin_percent() < 0.0);
    assert_eq!(c.choose(Some(run)), run);
}

#[test]
fn decisions_record_the_margin_only_for_a_confirmed_win() {
    let kernels = kernels_of(Dtype::F16, 64);
    let shape = AttentionShape::new(8, 16, 1024, 64);
    let measurements: Vec<Measurement> = kernels
        .iter()
        .enumerate()
        .map(|(i, &k)| Measurement {
            causal: true,
            ..measured(k, shape, Some(100.0 + i as f64))
        })
        .collect();
    let group = &groups(&measurements)[0];
    assert_eq!(group.key, key());
    let (winner, runner_up) = (kernels[0], kernels[1]);
    let confirm = |w: Vec<f64>, r: Vec<f64>| {
        Confirmation::new(key(), shape, (winner, w), (runner_up, r)).unwrap()
    };
    let win = confirm(noisy(100.0, 0.5, 40, 1), noisy(103.0, 0.5, 40, 2));
    let decision = group.decide(Some(&win), Some(runner_up)).unwrap();
    assert_eq!((decision.kernel, decision.confirmed), (winner, true));
    assert_eq!(decision.margin_percent, win.margin_percent());
    let tie = confirm(noisy(100.0, 1.0, 40, 3), noisy(100.0, 1.0, 40, 4));
    let decision = group.decide(Some(&tie), Some(runner_up)).unwrap();
    assert_eq!(
        (decision.kernel, decision.confirmed, decision.margin_percent),
        (runner_up, false, 0.0)
    );
}

#[test]
fn a_tuner_run_replaces_only_the_entries_it_decided() {
    let untuned = updated_table(&[], &[], NOT_TUNED);
    assert_eq!(untuned.len(), dispatch_table().len());
    assert!(untuned
        .iter()
        .all(|e| e.measured_on == NOT_TUNED && !e.confirmed));
    let other = kernels_of(Dtype::F16, 64)[1];
    let decision = Decision {
        key: key(),
        kernel: other,
        margin_percent: 4.2,
        confirmed: true,
    };
    let tuned = updated_table(&untuned, &[decision], "2026-11-22, test GPU");
    let small_grid_sibling = GroupKey {
        grid: GridSize::Small,
        ..key()
    };
    for (before, after) in untuned.iter().zip(&tuned) {
        if key().matches(before) {
            assert_eq!(after.kernel, other);
            assert_eq!(
                (after.margin_percent, after.confirmed, after.measured_on),
                (4.2, true, "2026-11-22, test GPU")
            );
        } else if small_grid_sibling.matches(before) {
            // Still untuned, it follows the kernel its key has for the other grid size.
            assert_eq!(after.kernel, other);
            assert_eq!(
                (after.margin_percent, after.confirmed, after.measured_on),
                (0.0, false, NOT_TUNED)
            );
        } else {
            assert_eq!(before, after);
        }
    }
    let source = render_dispatch_table(&tuned);
    assert!(
        source.contains("\t4.2\ttrue\t2026-11-22, test GPU\n"),
        "{source}"
    );
    assert!(!source.contains("NOT TUNED YET"));
    // The one decided entry replaced one of the head dims 64 and 128's 96 tuned ones; the other
    // head dims' 288 are not tuned yet.
    assert!(source.contains("383 entries are not tuned yet"), "{source}");
    assert!(render_dispatch_table(&untuned).contains("NOT TUNED YET"));
}

#[test]
fn the_sm90a_table_holds_the_keys_an_sm90_kernel_won_and_no_others() {
    let family_kernel = |family| {
        kernels_of(Dtype::F16, 128)
            .into_iter()
            .find(|kernel| kernel.spec.family == family)
            .expect("the shipping set has kernels of both families at D=128")
    };
    let (sm90, sm80) = (family_kernel(Family::Sm90), family_kernel(Family::Sm80));
    let won = GroupKey {
        dtype: Dtype::F16,
        head_dim: 128,
        causal: false,
        bucket: SeqBucket::Above2048,
        grid: GridSize::Large,
    };
    let lost = GroupKey {
        causal: true,
        ..won
    };
    let undecided = GroupKey {
        head_dim: 96,
        ..won
    };
    let current = dispatch_table_sm90a();
    let row = |table: &[flash_attn::DispatchEntry], key: GroupKey| {
        table.iter().find(|entry| key.matches(entry)).copied()
    };
    // The committed table has a row for each of the three keys.
    assert!(row(current, won).is_some() && row(current, lost).is_some());
    let decision = |key, kernel| Decision {
        key,
        kernel,
        margin_percent: 3.5,
        confirmed: true,
    };
    let decisions = [decision(won, sm90), decision(lost, sm80)];
    let table = updated_sm90a_table(current, &decisions, "2026-11-26, test GPU");
    let won_row = row(&table, won).expect("an sm90 winner has its row");
    assert_eq!(won_row.kernel, sm90);
    assert_eq!(
        (
            won_row.margin_percent,
            won_row.confirmed,
            won_row.measured_on
        ),
        (3.5, true, "2026-11-26, test GPU")
    );
    assert!(
        row(&table, lost).is_none(),
        "an sm80 winner leaves the key to the main table"
    );
    assert_eq!(row(&table, undecided), row(current, undecided));
    assert_eq!(table.len(), current.len() - 1);
    let text = render_sm90a_dispatch_table(&table);
    assert!(text.contains("GENERATED by `flash-attn-tune --family sm90`"));
    assert!(text.contains(&format!(
        "128\tF16\tfalse\tAbove2048\tLarge\t{}\t3.5\ttrue\t2026-11-26, test GPU\n",
        sm90.entry
    )));
}

#[test]
fn reference_rows_equal_the_full_reference() {
    for (seq_len_q, seq_len_kv) in [(37, 70), (70, 37), (48, 48)] {
        let shape = AttentionShape {
            batch: 2,
            heads_q: 4,
            heads_kv: 2,
            seq_len_q,
            seq_len_kv,
            head_dim: 16,
        };
        let q = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, 1);
        let k = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 2);
        let v = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 3);
        let rows = [
            QueryRow {
                batch: 0,
                head: 0,
                query: 0,
            },
            QueryRow {
                batch: 1,
                head: 3,
                query: seq_len_q - 1,
            },
            QueryRow {
                batch: 1,
                head: 1,
                query: seq_len_q / 2,
            },
            QueryRow {
                batch: 0,
                head: 2,
                query: 5,
            },
        ];
        for causal in [false, true] {
            for precision in [Precision::F64, Precision::Plain(Dtype::F16)] {
                let full = attention(&q, &k, &v, shape, 0.3, causal, precision);
                let sampled = attention_rows(&q, &k, &v, shape, 0.3, causal, precision, &rows);
                for (i, row) in rows.iter().enumerate() {
                    let index = row.index(&shape);
                    assert_eq!(QueryRow::from_index(&shape, index), *row);
                    assert_eq!(
                        sampled.output[i * 16..(i + 1) * 16],
                        full.output[index * 16..(index + 1) * 16],
                        "{row:?} causal={causal} {precision:?} Sq={seq_len_q} Sk={seq_len_kv}"
                    );
                    // Bit-equal, -inf included (the first query sees no key when Sq > Sk).
                    assert_eq!(
                        sampled.logsumexp[i].to_bits(),
                        full.logsumexp[index].to_bits()
                    );
                }
            }
        }
    }
}

#[test]
fn sampled_rows_include_both_ends_and_stay_in_the_shape() {
    let shape = AttentionShape::new(2, 16, 4096, 128);
    let rows = sample_rows(&shape, 64, 9);
    assert_eq!(rows.len(), 64);
    assert_eq!(rows[0].index(&shape), 0);
    assert_eq!(rows[1].index(&shape), shape.lse_elements().unwrap() - 1);
    assert!(rows
        .iter()
        .all(|r| r.index(&shape) < shape.lse_elements().unwrap()));
    assert_eq!(sample_rows(&shape, 64, 9), rows);
    assert_ne!(sample_rows(&shape, 64, 10), rows);
    // A problem with fewer rows is checked whole.
    let small = AttentionShape::new(1, 2, 5, 64);
    let all: Vec<usize> = sample_rows(&small, 64, 9)
        .iter()
        .map(|r| r.index(&small))
        .collect();
    assert_eq!(all, (0..10).collect::<Vec<_>>());
}

#[test]
fn utc_dates_follow_the_calendar() {
    let day = |days: u64| utc_date(UNIX_EPOCH + Duration::from_secs(days * 86_400 + 3_600));
    assert_eq!(day(0), "1970-01-01");
    assert_eq!(day(10_956), "1999-12-31");
    assert_eq!(day(11_016), "2000-02-29");
    assert_eq!(day(20_779), "2026-11-22");
    assert_eq!(day(47_541), "2100-03-01");
}

#[test]
fn reports_show_failures_and_every_timed_configuration() {
    let [a, b] = [kernels_of(Dtype::F16, 64)[0], kernels_of(Dtype::F16, 64)[1]];
    let shapes = [
        AttentionShape::new(4, 8, 512, 64),
        AttentionShape::new(8, 16, 1024, 64),
    ];
    let measurements = [
        measured(a, shapes[0], Some(11.0)),
        measured(b, shapes[0], Some(22.0)),
        measured(a, shapes[1], Some(100.0)),
        measured(b, shapes[1], None),
    ];
    let tables = ranked_tables(&measurements);
    assert!(tables.contains("FAILED"), "{tables}");
    assert!(tables.contains("2.000"), "b is twice the best: {tables}");
    let svg = to_svg(&measurements);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // Three timed points and two legend markers.
    assert_eq!(svg.matches("<circle").count(), 5, "{svg}");
    assert!(svg.contains(a.entry) && svg.contains(b.entry));
    let table = updated_table(dispatch_table(), &[], "unused");
    let json = to_json(&TuningRun {
        device: "test \"GPU\"",
        sm_count: H100_SM_COUNT,
        date: "2026-11-22",
        seed: 5,
        quick: true,
        measurements: &measurements,
        confirmations: &[],
        table: &table,
    });
    assert!(
        json.contains("\"device\":\"test \\\"GPU\\\"\",\"sm_count\":132,"),
        "{json}"
    );
    // Two measurements, and the table's small-grid entries: dtype x head dim x causal x bucket.
    assert_eq!(
        json.matches("\"grid\":\"small-grid\"").count(),
        2 + 2 * SUPPORTED_HEAD_DIMS.len() * 2 * 6
    );
    assert!(tables.contains("(keys<=512, small-grid)"), "{tables}");
    assert_eq!(json.matches("\"valid\":false").count(), 1);
    assert_eq!(json.matches("\"valid\":true").count(), 3);
    assert_eq!(json.matches('{').count(), json.matches('}').count());
    assert!(!json.contains("NaN") && !json.contains("inf"));
}

/// Measurements that `to_json` writes exactly (times and errors on 4 decimals, no host time):
/// two element types and head dims, both maskings, both grid sizes, and a failure whose reason
/// needs escapes.
fn replottable() -> Vec<Measurement> {
    let mut measurements = Vec::new();
    for (k, kernel) in [kernels_of(Dtype::F16, 64), kernels_of(Dtype::Bf16, 128)]
        .into_iter()
        .flat_map(|kernels| kernels.into_iter().take(2))
        .enumerate()
    {
        for causal in [false, true] {
            let us = 10.0 + k as f64 + if causal { 0.5 } else { 0.0 };
            // 256 to 1024 query tiles: small grids, then large ones.
            let shape = AttentionShape::new(4, 8, 512 * (k + 1), kernel.spec.tile.head_dim);
            measurements.push(Measurement {
                kernel,
                shape,
                causal,
                grid: GridSize::of(&shape, H100_SM_COUNT),
                validation: passed(),
                timing: Some(Timing {
                    times: LaunchTimes {
                        per_launch_us: vec![us - 0.25, us, us + 0.0625],
                        launches_per_repeat: 7,
                        host_us_per_launch: 0.0,
                    },
                    median_interval_us: Interval {
                        low: us - 0.25,
                        high: us + 0.0625,
                    },
                }),
            });
        }
    }
    measurements[1].validation = Validation::Failed("\"NaN\" at row 3\n\\ \u{1}".to_owned());
    measurements[1].timing = None;
    measurements
}

fn json_of(measurements: &[Measurement]) -> String {
    let confirmations = [confirmation(vec![1.0, 2.0], vec![3.0, 4.0])];
    to_json(&TuningRun {
        device: "test GPU",
        sm_count: H100_SM_COUNT,
        date: "2026-11-22",
        seed: 5,
        quick: false,
        measurements,
        confirmations: &confirmations,
        table: &updated_table(dispatch_table(), &[], "unused"),
    })
}

#[test]
fn measurements_read_back_from_the_json_redraw_the_same_svg() {
    let measurements = replottable();
    let grids: Vec<_> = measurements.iter().map(|m| m.grid).collect();
    assert!(grids.contains(&GridSize::Small) && grids.contains(&GridSize::Large));
    let back = measurements_from_json(&json_of(&measurements)).unwrap();
    assert_eq!(back, measurements);
    assert_eq!(to_svg(&back), to_svg(&measurements));
    assert_eq!(measurements_from_json(&json_of(&[])), Ok(Vec::new()));
}

#[test]
fn malformed_measurement_json_is_an_error_naming_the_place() {
    let json = json_of(&replottable());
    let error = |json: &str| measurements_from_json(json).unwrap_err();
    // Line 3 holds the first measurement.
    let bad_count = json.replacen("\"heads\":8", "\"heads\":8.5", 1);
    assert!(
        error(&bad_count).contains("8.5") && error(&bad_count).contains("line 3"),
        "{}",
        error(&bad_count)
    );
    let name = kernels_of(Dtype::F16, 64)[0].entry;
    let unknown = json.replacen(name, "flash_fwd_f16_d64_nope", 1);
    assert!(
        error(&unknown).starts_with("measurement 0: config:")
            && error(&unknown).contains("flash_fwd_f16_d64_nope"),
        "{}",
        error(&unknown)
    );
    let bad_grid = json.replacen("small-grid", "tiny-grid", 1);
    assert!(
        error(&bad_grid).starts_with("measurement 0: grid"),
        "{}",
        error(&bad_grid)
    );
    let cut = json.lines().take(4).collect::<Vec<_>>().join("\n");
    assert!(error(&cut).contains("EOF"), "{}", error(&cut));
    assert!(error("{}").contains("not a tuning.json"));
}

/// The committed runs measured the whole space: they read back in a build of it, and in a
/// default build fail with an error that says how to build one.
#[test]
fn the_committed_tuner_runs_read_back() {
    for (file, measurements) in [("tuning.json", 624), ("screening.json", 6916)] {
        let path = format!("{}/results/tuning/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        match flash_attn::KERNEL_SET {
            flash_attn::KernelSet::All => {
                // The runs measured the 266 kernels exposed before the sm_80 column joined the
                // ptxas gate, which rejects 2 of them (spills on sm_80): leave those out.
                let mut run: serde_json::Value = serde_json::from_str(&text).unwrap();
                let all = run["measurements"].as_array_mut().unwrap();
                assert_eq!(all.len(), measurements, "{path}");
                all.retain(|m| flash_attn::kernel_by_name(m["config"].as_str().unwrap()).is_ok());
                let kept = all.len();
                assert!(
                    kept * 100 >= measurements * 95,
                    "{path}: {kept} of {measurements}"
                );
                let read = measurements_from_json(&run.to_string())
                    .unwrap_or_else(|error| panic!("{path}: {error}"));
                assert_eq!(read.len(), kept, "{path}");
            }
            flash_attn::KernelSet::Shipping => {
                let error = measurements_from_json(&text).unwrap_err();
                assert!(error.contains("FLASH_ATTN_KERNELS=all"), "{path}: {error}");
            }
        }
    }
}

#[test]
fn measurements_of_a_run_before_the_grid_size_read_back_as_large_grids() {
    // Such a run grouped every shape of a bucket together; its entries became the table's
    // large-grid entries.
    let measurements = replottable();
    let json = json_of(&measurements)
        .replace(",\"grid\":\"small-grid\"", "")
        .replace(",\"grid\":\"large-grid\"", "");
    assert!(!json.contains("grid\":"));
    let back = measurements_from_json(&json).unwrap();
    assert_eq!(back.len(), measurements.len());
    for (back, measurement) in back.iter().zip(&measurements) {
        assert_eq!(back.grid, GridSize::Large);
        assert_eq!(
            *back,
            Measurement {
                grid: GridSize::Large,
                ..measurement.clone()
            }
        );
    }
}
