//! `toolcell bench`: what one tool's calls cost on this machine, measured through the same
//! pipeline a model's calls take (dispatch, validation, the gate, a fresh instance, the cap,
//! the audit record when one is kept).
//!
//! The whole-project benchmark, with the native and process-per-call baselines beside it, is
//! `just bench` (BENCHMARKS.md); this is the question a tool author asks of their own tool.

use crate::args::{Cli, Command, DEFAULT_BENCH_CALLS, DEFAULT_BENCH_WARMUP, MAX_BENCH_THREADS};
use crate::exit;
use crate::runtime::{Needs, with_runtime_for};
use serde::Serialize;
use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use toolcell::ToolPort as _;
use toolcell::{CallOptions, Runtime, ToolResponse};

/// How to bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchOptions {
    /// Measured calls, in all (split between the threads).
    pub calls: u32,
    /// Unmeasured calls first.
    pub warmup: u32,
    /// Threads calling at once (at least 1, at most [`MAX_BENCH_THREADS`]).
    pub threads: u32,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            calls: DEFAULT_BENCH_CALLS,
            warmup: DEFAULT_BENCH_WARMUP,
            threads: 1,
        }
    }
}

/// What a bench measured. Times are per call, from entering the pipeline to its answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    /// The tool, as called.
    pub tool: String,
    /// Measured calls.
    pub calls: u32,
    /// Threads that made them.
    pub threads: u32,
    /// How many measured calls did not answer with a result.
    pub errors: u32,
    /// Median, in microseconds.
    pub p50_us: f64,
    /// 99th percentile, in microseconds.
    pub p99_us: f64,
    /// Mean, in microseconds.
    pub mean_us: f64,
    /// Fastest, in microseconds.
    pub min_us: f64,
    /// Slowest, in microseconds.
    pub max_us: f64,
    /// Measured calls divided by the wall time they took together.
    pub calls_per_second: f64,
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = if self.threads == 1 { "" } else { "s" };
        writeln!(
            f,
            "{}: {} calls on {} thread{plural}, each in a fresh instance",
            self.tool, self.calls, self.threads
        )?;
        writeln!(
            f,
            "  p50 {}   p99 {}   mean {}   min {}   max {}",
            micros(self.p50_us),
            micros(self.p99_us),
            micros(self.mean_us),
            micros(self.min_us),
            micros(self.max_us)
        )?;
        write!(f, "  {:.0} calls/s", self.calls_per_second)?;
        if self.errors > 0 {
            write!(f, "\n  {} calls did not answer with a result", self.errors)?;
        }
        Ok(())
    }
}

fn micros(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

/// Call `name` with `arguments` through `runtime`: once to check that it answers with a
/// result (if not, that answer is the error), then `options.warmup` times, then
/// `options.calls` times measured, on `options.threads` threads.
pub fn run(
    runtime: &Runtime,
    name: &str,
    arguments: &str,
    options: BenchOptions,
) -> Result<BenchReport, ToolResponse> {
    let call = || {
        runtime.call_with(
            &toolcell::ToolRequest::new("bench", name, arguments),
            &CallOptions::default(),
        )
    };
    let first = call();
    if first.is_error() {
        return Err(first);
    }
    for _ in 0..options.warmup {
        let _ = call();
    }
    let threads = options.threads.clamp(1, MAX_BENCH_THREADS);
    let calls = options.calls.max(1);
    let started = Instant::now();
    let per_thread: Vec<(Vec<Duration>, u32)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|index| {
                // Split the calls as evenly as they go: the first threads take one more.
                let share = calls / threads + u32::from(index < calls % threads);
                scope.spawn(move || {
                    let mut times = Vec::with_capacity(share as usize);
                    let mut errors = 0;
                    for _ in 0..share {
                        let began = Instant::now();
                        let response = call();
                        times.push(began.elapsed());
                        errors += u32::from(response.is_error());
                    }
                    (times, errors)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().unwrap_or_default())
            .collect()
    });
    let wall = started.elapsed();
    let errors = per_thread.iter().map(|(_, errors)| errors).sum();
    let mut times: Vec<Duration> = per_thread
        .into_iter()
        .flat_map(|(times, _)| times)
        .collect();
    times.sort_unstable();
    // Microseconds, to the nanosecond: what a clock can tell, and all a reader needs.
    let us = |d: Duration| (d.as_secs_f64() * 1e9).round() / 1e3;
    let total: Duration = times.iter().sum();
    Ok(BenchReport {
        tool: name.to_owned(),
        calls: u32::try_from(times.len()).unwrap_or(u32::MAX),
        threads,
        errors,
        p50_us: us(percentile(&times, 0.50)),
        p99_us: us(percentile(&times, 0.99)),
        mean_us: (us(total) / times.len().max(1) as f64 * 1e3).round() / 1e3,
        min_us: us(times.first().copied().unwrap_or_default()),
        max_us: us(times.last().copied().unwrap_or_default()),
        calls_per_second: times.len() as f64 / wall.as_secs_f64().max(f64::MIN_POSITIVE),
    })
}

/// The `q` quantile of sorted `times` (nearest rank); zero for none.
fn percentile(times: &[Duration], q: f64) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((times.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    times[rank.min(times.len() - 1)]
}

/// `toolcell bench NAME [ARGUMENTS]`.
pub(crate) fn command(cli: &Cli) -> ExitCode {
    let Command::Bench {
        name,
        arguments,
        calls,
        warmup,
        threads,
        json,
        keep_resident_mib,
    } = &cli.command
    else {
        return ExitCode::from(exit::USAGE);
    };
    let options = BenchOptions {
        calls: *calls,
        warmup: *warmup,
        threads: *threads,
    };
    with_runtime_for(
        cli,
        Needs {
            keep_resident_mib: *keep_resident_mib,
            ..Needs::default()
        },
        |runtime| match run(&runtime, name, arguments, options) {
            Ok(report) => {
                let text = if *json {
                    serde_json::to_string(&report).unwrap_or_default()
                } else {
                    report.to_string()
                };
                if writeln!(std::io::stdout().lock(), "{text}").is_err() {
                    return ExitCode::from(exit::FAILED);
                }
                ExitCode::SUCCESS
            }
            // The first call did not answer with a result: say why, as `call` would.
            Err(response) => crate::commands::call::respond(&runtime, &response, false, false),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use toolcell::{FnTool, ToolInfo};

    /// A runtime holding one native `count` tool, and how many times it ran.
    fn counting_runtime() -> (Runtime, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let count = FnTool::new(
            ToolInfo::new(
                "count",
                "Counts its calls.",
                serde_json::json!({"type": "object"}),
            ),
            move |_, _| {
                counter.fetch_add(1, Ordering::SeqCst);
                async { Ok("counted".to_owned()) }
            },
        );
        let runtime = Runtime::builder()
            .builtin_tools(false)
            .cache_dir(None)
            .pool_slots(1)
            .native(count)
            .build()
            .expect("runtime");
        (runtime, calls)
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let times: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile(&times, 0.5), Duration::from_micros(51));
        assert_eq!(percentile(&times, 0.99), Duration::from_micros(99));
        assert_eq!(percentile(&times, 0.0), Duration::from_micros(1));
        assert_eq!(percentile(&times, 1.0), Duration::from_micros(100));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn a_bench_counts_every_call_on_every_thread() {
        let (runtime, calls) = counting_runtime();
        let options = BenchOptions {
            calls: 101,
            warmup: 5,
            threads: 4,
        };
        let report = run(&runtime, "count", "{}", options).expect("count answers");
        assert_eq!(report.calls, 101);
        assert_eq!(report.threads, 4);
        assert_eq!(report.errors, 0);
        assert!(report.min_us <= report.p50_us && report.p50_us <= report.p99_us);
        assert!(report.p99_us <= report.max_us);
        // The check, the warm-up and the measured calls all ran the tool.
        assert_eq!(calls.load(Ordering::SeqCst), 1 + 5 + 101);
    }

    #[test]
    fn a_call_that_does_not_answer_with_a_result_is_not_benched() {
        let (runtime, calls) = counting_runtime();
        let refused = run(&runtime, "count", "[]", BenchOptions::default());
        assert!(
            matches!(refused, Err(ToolResponse::Failed { .. })),
            "{refused:?}"
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            0,
            "arguments that break the schema never run the tool, and nothing is repeated"
        );
    }
}
