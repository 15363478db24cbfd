//! What the kernel says about this process during a phase: its peak resident memory (VmHWM,
//! reset between phases through `/proc/self/clear_refs`) and where the CPU time went, per
//! thread name, with the PostgreSQL processes of the machine beside it. Linux only; elsewhere
//! the numbers are absent.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Resets the process's peak RSS to its current RSS; returns whether the kernel took it.
/// Heap freed by earlier phases is handed back to the system first, so that it counts in
/// neither the new peak nor the baseline.
pub fn reset_peak_rss() -> bool {
    // jemalloc is the process's malloc (Rust's and C's): its arenas' unused dirty pages go
    // back now rather than after their decay time. "arena.4096" is MALLCTL_ARENAS_ALL.
    // SAFETY: a write-only mallctl without arguments.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
    // "5" resets the peak resident set size ("high water mark") of the process.
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak RSS since start or the last reset, in bytes.
pub fn peak_rss() -> Option<u64> {
    status_kib(
        &std::fs::read_to_string("/proc/self/status").ok()?,
        "VmHWM:",
    )
    .map(|k| k * 1024)
}

/// The process's current RSS, in bytes.
pub fn current_rss() -> Option<u64> {
    status_kib(
        &std::fs::read_to_string("/proc/self/status").ok()?,
        "VmRSS:",
    )
    .map(|k| k * 1024)
}

/// A `Key:   1234 kB` line of `/proc/*/status` or `/proc/meminfo`, in KiB.
pub fn status_kib(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// CPU time consumed so far: per thread of this process, and by every `postgres` process.
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    at: Instant,
    /// Thread id → (name, clock ticks).
    threads: BTreeMap<u32, (String, u64)>,
    /// Process id → clock ticks of `postgres` processes.
    postgres: BTreeMap<u32, u64>,
}

/// Cores kept busy during an interval (1.0 = one core all the time).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuUsage {
    pub process: f64,
    /// The service's threads: the process less the threads that ran before the service
    /// started (see [`threads_before_the_service`]); `process` when none were set apart.
    pub service: f64,
    /// By thread name, busiest first (threads sharing a name are summed).
    pub threads: Vec<(String, f64)>,
    pub postgres: f64,
}

impl CpuSnapshot {
    pub fn take() -> CpuSnapshot {
        let mut threads = BTreeMap::new();
        for (tid, stat) in stats("/proc/self/task") {
            threads.insert(tid, (stat.name, stat.ticks));
        }
        let postgres = stats("/proc")
            .into_iter()
            .filter(|(_, stat)| stat.name == "postgres")
            .map(|(pid, stat)| (pid, stat.ticks))
            .collect();
        CpuSnapshot {
            at: Instant::now(),
            threads,
            postgres,
        }
    }

    /// What happened between `self` and `later`. Threads and processes that ended in between
    /// are missing from both sides' sums.
    pub fn usage_until(&self, later: &CpuSnapshot) -> CpuUsage {
        self.usage_without(later, &BTreeSet::new())
    }

    /// [`CpuSnapshot::usage_until`], with `foreign` threads left out of the service's share.
    pub fn usage_without(&self, later: &CpuSnapshot, foreign: &BTreeSet<u32>) -> CpuUsage {
        let seconds = later.at.duration_since(self.at).as_secs_f64();
        let per_second = clock_ticks_per_second() as f64;
        if seconds <= 0.0 || per_second <= 0.0 {
            return CpuUsage::default();
        }
        let cores = |ticks: u64| ticks as f64 / per_second / seconds;
        let mut by_name: BTreeMap<&str, u64> = BTreeMap::new();
        let mut service = 0;
        for (tid, (name, ticks)) in &later.threads {
            let before = self.threads.get(tid).map_or(0, |(_, t)| *t);
            let spent = ticks.saturating_sub(before);
            *by_name.entry(name.as_str()).or_default() += spent;
            if !foreign.contains(tid) {
                service += spent;
            }
        }
        let process = by_name.values().sum();
        let mut threads: Vec<(String, f64)> = by_name
            .into_iter()
            .filter(|(_, ticks)| *ticks > 0)
            .map(|(name, ticks)| (name.to_owned(), cores(ticks)))
            .collect();
        threads.sort_by(|a, b| b.1.total_cmp(&a.1));
        let postgres = later
            .postgres
            .iter()
            .map(|(pid, ticks)| ticks.saturating_sub(self.postgres.get(pid).copied().unwrap_or(0)))
            .sum();
        CpuUsage {
            process: cores(process),
            service: cores(service),
            threads,
            postgres: cores(postgres),
        }
    }
}

/// This process's threads now, but its main thread. Taken right before the service starts in
/// this process, they are the threads that are not the service's: the embedded broker's, the
/// benchmark's producer's and runtime's. The main thread runs the service's actors and the
/// benchmark's own watch; it counts as the service's whole.
pub fn threads_before_the_service() -> BTreeSet<u32> {
    let main = std::process::id();
    stats("/proc/self/task")
        .into_iter()
        .map(|(tid, _)| tid)
        .filter(|tid| *tid != main)
        .collect()
}

struct Stat {
    name: String,
    ticks: u64,
}

/// `stat` of every numbered entry of `dir` (`/proc` or `/proc/self/task`).
fn stats(dir: &str) -> Vec<(u32, Stat)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let id: u32 = entry.file_name().to_str()?.parse().ok()?;
            let text = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            Some((id, parse_stat(&text)?))
        })
        .collect()
}

/// Name and user + system clock ticks from a `/proc/*/stat` line.
fn parse_stat(text: &str) -> Option<Stat> {
    // The name is in parentheses and may itself hold spaces and parentheses.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // Fields 14 and 15 of stat(5) (utime, stime); fields[0] is field 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Stat {
        name,
        ticks: utime + stime,
    })
}

fn clock_ticks_per_second() -> i64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read_in_kib() {
        let status = "Name:\tx\nVmHWM:\t  123456 kB\nVmRSS:\t   99 kB\n";
        assert_eq!(status_kib(status, "VmHWM:"), Some(123_456));
        assert_eq!(status_kib(status, "VmRSS:"), Some(99));
        assert_eq!(status_kib(status, "VmSwap:"), None);
        assert_eq!(
            status_kib("MemTotal:       24683584 kB\n", "MemTotal:"),
            Some(24_683_584)
        );
    }

    #[test]
    fn a_stat_line_with_an_awkward_name_gives_its_cpu_ticks() {
        let line = "4242 (rdk:broker (1)) S 1 2 3 4 5 6 7 8 9 10 250 17 0 0 20 0 1 0";
        let stat = parse_stat(line).unwrap();
        assert_eq!(stat.name, "rdk:broker (1)");
        assert_eq!(stat.ticks, 267);
    }

    #[test]
    fn threads_set_apart_count_in_the_process_and_not_in_the_service() {
        let hz = u64::try_from(clock_ticks_per_second()).unwrap();
        let at = Instant::now();
        let snapshot = |at: Instant, ticks: u64, threads: &[(u32, &str)]| CpuSnapshot {
            at,
            threads: threads
                .iter()
                .map(|(tid, name)| (*tid, (name.to_string(), ticks)))
                .collect(),
            postgres: BTreeMap::new(),
        };
        let before = snapshot(at, 0, &[(1, "main"), (2, "rdk:mock")]);
        // A second later each thread has used a core-second; the driver started meanwhile.
        let later = snapshot(
            at + std::time::Duration::from_secs(1),
            hz,
            &[(1, "main"), (2, "rdk:mock"), (3, "kafka-driver")],
        );
        let usage = before.usage_without(&later, &BTreeSet::from([2]));
        assert!((usage.process - 3.0).abs() < 1e-9, "{usage:?}");
        assert!((usage.service - 2.0).abs() < 1e-9, "{usage:?}");
        assert_eq!(usage.threads.len(), 3);
    }

    #[test]
    fn this_process_can_see_its_own_memory_and_threads() {
        if cfg!(target_os = "linux") {
            assert!(current_rss().unwrap() > 0);
            assert!(peak_rss().unwrap() >= current_rss().unwrap() / 2);
            let snapshot = CpuSnapshot::take();
            assert!(!snapshot.threads.is_empty());
            let usage = snapshot.usage_until(&CpuSnapshot::take());
            assert!(usage.process >= 0.0);
            assert_eq!(usage.service, usage.process);
        }
    }
}
