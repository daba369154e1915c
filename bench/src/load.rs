//! Load generators: a closed loop of N workers for a fixed time, a fixed list of jobs drained by
//! N workers, and a sequential sampler for read latencies.
//!
//! Every operation is an async closure returning `anyhow::Result<()>`; its latency is measured
//! around the call. Durations are bounded by the caller; each operation carries its own timeout
//! (the HTTP client's, or the pool's acquire timeout).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::stats::{Samples, Summary};

/// A closed-loop run: `workers` each issue one operation after the other.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Concurrent workers (clients).
    pub workers: usize,
    /// Time run but not measured, first.
    pub warmup: Duration,
    /// The measured window.
    pub measure: Duration,
}

/// Run `op(worker, sequence)` in `spec.workers` concurrent loops. Operations that complete inside
/// the measured window are counted; the rate is their number over the window.
pub async fn closed_loop<F, Fut>(spec: Spec, op: F) -> Summary
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let measure_from = start + spec.warmup;
    let end = measure_from + spec.measure;
    let workers: Vec<_> = (0..spec.workers.max(1))
        .map(|worker| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut samples = Samples::default();
                let mut sequence = 0_u64;
                loop {
                    let began = Instant::now();
                    if began >= end {
                        break;
                    }
                    let result = op(worker, sequence).await;
                    sequence += 1;
                    let done = Instant::now();
                    if done < measure_from || done > end {
                        continue;
                    }
                    match result {
                        Ok(()) => samples.ok(done - began),
                        Err(e) => samples.failed(&e),
                    }
                }
                samples
            })
        })
        .collect();
    collect(workers).await.summary(spec.measure)
}

/// Run `op(job)` once for each job index in `0..jobs`, with `workers` concurrent workers taking
/// the next job as they finish one; the rate is jobs done over the whole run.
pub async fn drain<F, Fut>(workers: usize, jobs: usize, op: F) -> Summary
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..workers.max(1))
        .map(|_| {
            let (op, next) = (op.clone(), next.clone());
            tokio::spawn(async move {
                let mut samples = Samples::default();
                loop {
                    let job = next.fetch_add(1, Ordering::Relaxed);
                    if job >= jobs {
                        break;
                    }
                    let began = Instant::now();
                    match op(job).await {
                        Ok(()) => samples.ok(began.elapsed()),
                        Err(e) => samples.failed(&e),
                    }
                }
                samples
            })
        })
        .collect();
    let samples = collect(handles).await;
    samples.summary(start.elapsed())
}

/// `count` operations one after the other after `warmup` unmeasured ones (read latencies, where
/// concurrency would only measure the queue).
pub async fn sequential<F, Fut>(warmup: usize, count: usize, op: F) -> Summary
where
    F: Fn() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    for _ in 0..warmup {
        let _ = op().await;
    }
    let mut samples = Samples::default();
    let start = Instant::now();
    for _ in 0..count {
        let began = Instant::now();
        match op().await {
            Ok(()) => samples.ok(began.elapsed()),
            Err(e) => samples.failed(&e),
        }
    }
    samples.summary(start.elapsed())
}

async fn collect(handles: Vec<tokio::task::JoinHandle<Samples>>) -> Samples {
    let mut all = Samples::default();
    for handle in handles {
        match handle.await {
            Ok(samples) => all.merge(samples),
            Err(e) => all.failed(&anyhow::anyhow!("a load worker panicked: {e}")),
        }
    }
    all
}
