//! Incremental fingerprint and checkpoint of a 10,000-file workspace after a
//! one-file change, beside `git add -A && git commit` on the same tree
//! (budget: ≤ 50 ms). Prints medians and ratios after criterion's report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::RefCell;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::Criterion;
use minicoder::workspace::{CheckpointStore, ExcludeSet, Fingerprinter, fingerprint};

const DIRS: usize = 100;
const FILES: usize = 100;

fn build_tree(root: &Path) {
    let body: String = "the quick brown fox jumps over the lazy dog\n".repeat(23); // ~1 KB
    for d in 0..DIRS {
        let dir = root.join(format!("dir{d:03}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..FILES {
            std::fs::write(
                dir.join(format!("file{f:03}.txt")),
                format!("{d} {f}\n{body}"),
            )
            .expect("write");
        }
    }
}

fn git(dir: &Path, script: &str) {
    let ok = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .status()
        .expect("run git")
        .success();
    assert!(ok, "{script}");
}

/// Times `op` after `change` on every iteration; keeps every sample.
fn timed(
    samples: &RefCell<Vec<Duration>>,
    iters: u64,
    mut change: impl FnMut(),
    mut op: impl FnMut(),
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        change();
        let start = Instant::now();
        op();
        let took = start.elapsed();
        samples.borrow_mut().push(took);
        total += took;
    }
    total
}

fn median(samples: &RefCell<Vec<Duration>>) -> f64 {
    let mut v = samples.borrow().clone();
    v.sort();
    v.get(v.len() / 2)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    let plain = tmp.path().join("plain");
    build_tree(&ws);
    build_tree(&plain);
    git(&plain, "git init -q && git add -A && git commit -q -m init");

    let mut fingerprinter = Fingerprinter::new(&ws, ExcludeSet::default())
        .with_cache_file(tmp.path().join("fp-cache"))
        .expect("cache");
    let mut store = CheckpointStore::open(&tmp.path().join("cp.git"), &ws, ExcludeSet::default())
        .expect("store");
    fingerprinter.scan().expect("warm fingerprint");
    store.create("warm").expect("warm checkpoint");
    // The racy rule re-reads files changed within the last 2 s: let the
    // freshly built tree age, then warm the caches again, as in a real run.
    std::thread::sleep(Duration::from_millis(2100));
    fingerprinter.scan().expect("rewarm");
    store.create("warm").expect("rewarm");
    assert_eq!(
        fingerprinter.scan().expect("warm").rehashed,
        0,
        "cache not warm"
    );

    let counter = RefCell::new(0u64);
    let bump = |dir: &Path| {
        let mut n = counter.borrow_mut();
        *n += 1;
        std::fs::write(dir.join("dir042/file042.txt"), format!("change {n}\n")).expect("write");
    };
    let (fp_t, cp_t, git_t, cold_t) = (
        RefCell::new(Vec::new()),
        RefCell::new(Vec::new()),
        RefCell::new(Vec::new()),
        RefCell::new(Vec::new()),
    );

    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    let mut group = c.benchmark_group("10k files, one-file change");
    group.bench_function("fingerprint (incremental)", |b| {
        b.iter_custom(|n| {
            timed(
                &fp_t,
                n,
                || bump(&ws),
                || {
                    fingerprinter.scan().expect("scan");
                },
            )
        })
    });
    group.bench_function("checkpoint (incremental)", |b| {
        b.iter_custom(|n| {
            timed(
                &cp_t,
                n,
                || bump(&ws),
                || {
                    store.create("bench").expect("checkpoint");
                },
            )
        })
    });
    group.bench_function("fingerprint (from scratch, no cache)", |b| {
        b.iter_custom(|n| {
            timed(
                &cold_t,
                n,
                || bump(&ws),
                || {
                    fingerprint(&ws, &ExcludeSet::default()).expect("scan");
                },
            )
        })
    });
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("git add -A && git commit", |b| {
        b.iter_custom(|n| {
            timed(
                &git_t,
                n,
                || bump(&plain),
                || git(&plain, "git add -A && git commit -q -m x"),
            )
        })
    });
    group.finish();
    c.final_summary();

    let (f, k, g, s) = (
        median(&fp_t),
        median(&cp_t),
        median(&git_t),
        median(&cold_t),
    );
    println!(
        "summary: median fingerprint {f:.2} ms, checkpoint {k:.2} ms, git add+commit {g:.2} ms, \
         from-scratch fingerprint {s:.2} ms; ratios fingerprint/git {:.3}, checkpoint/git {:.3}, \
         from-scratch/git {:.3} (budget: ≤ 50 ms each for the incremental ones)",
        f / g,
        k / g,
        s / g
    );
}
