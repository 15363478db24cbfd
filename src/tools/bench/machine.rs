//! The machine a benchmark ran on, as the report states it: cores, memory, CPU model, kernel,
//! the PostgreSQL version, the filesystem its data lives on, and how busy the machine was
//! (its load average) when the run started and ended, and what crossing into the kernel costs
//! here (a system call, a wake-up of another thread).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::probe::status_kib;

/// Facts about the machine; "unknown" where the system does not say.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub cores: usize,
    pub memory_bytes: Option<u64>,
    pub cpu_model: String,
    pub kernel: String,
    pub postgres: String,
    /// The filesystem type of the throwaway cluster's data directory (fsync costs differ).
    pub data_filesystem: Option<String>,
    /// `None` when they could not be measured.
    pub kernel_costs: Option<KernelCosts>,
}

/// What crossing into the kernel costs on this machine. Part of the service's CPU is system
/// calls and wake-ups (sends to PostgreSQL, its answers, the driver thread's hand-overs), which
/// cost what the machine makes them cost, not what its CPU's speed suggests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelCosts {
    /// One system call that does nothing (`getppid`), in µs.
    pub syscall_us: f64,
    /// A byte to a thread blocked reading a socket and a byte back: two wake-ups, in µs.
    pub wake_round_trip_us: f64,
}

/// Trials of each measure; the fastest is kept (other work on the machine only slows one).
const TRIALS: usize = 3;
const SYSCALLS_PER_TRIAL: u32 = 100_000;
const ROUND_TRIPS_PER_TRIAL: u32 = 5_000;

impl KernelCosts {
    /// Measures both, in about a second on a slow machine.
    pub fn measure() -> std::io::Result<KernelCosts> {
        let syscall = fastest(|| Ok(time_syscalls(SYSCALLS_PER_TRIAL)))?;
        let round_trip = fastest(|| time_round_trips(ROUND_TRIPS_PER_TRIAL))?;
        Ok(KernelCosts {
            syscall_us: micros_each(syscall, SYSCALLS_PER_TRIAL),
            wake_round_trip_us: micros_each(round_trip, ROUND_TRIPS_PER_TRIAL),
        })
    }
}

/// The fastest of [`TRIALS`] trials.
fn fastest(mut trial: impl FnMut() -> std::io::Result<Duration>) -> std::io::Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..TRIALS {
        best = best.min(trial()?);
    }
    Ok(best)
}

fn micros_each(total: Duration, count: u32) -> f64 {
    total.as_secs_f64() * 1e6 / f64::from(count)
}

/// `count` system calls that do nothing, made directly (libc may cache a process id).
fn time_syscalls(count: u32) -> Duration {
    let started = Instant::now();
    for _ in 0..count {
        // SAFETY: getppid takes no arguments and cannot fail.
        std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
    }
    started.elapsed()
}

/// `count` round trips of a byte between this thread and another one, each blocked in a read
/// of its end of a socket pair until the other writes.
fn time_round_trips(count: u32) -> std::io::Result<Duration> {
    let (mut here, mut there) = UnixStream::pair()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let mut byte = [0u8];
        for _ in 0..count {
            there.read_exact(&mut byte)?;
            there.write_all(&byte)?;
        }
        Ok(())
    });
    let mut byte = [0u8];
    let started = Instant::now();
    for _ in 0..count {
        here.write_all(&byte)?;
        here.read_exact(&mut byte)?;
    }
    let elapsed = started.elapsed();
    echo.join()
        .map_err(|_| std::io::Error::other("the echo thread panicked"))??;
    Ok(elapsed)
}

impl Machine {
    /// Describes this machine; `postgres` is the version line of the server used and
    /// `data_dir` the throwaway cluster's directory, if the benchmark owns one.
    pub fn describe(postgres: String, data_dir: Option<&Path>) -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes: status_kib(&read("/proc/meminfo"), "MemTotal:").map(|k| k * 1024),
            cpu_model: cpu_model(&read("/proc/cpuinfo")).unwrap_or_else(|| "unknown".into()),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            postgres,
            data_filesystem: data_dir.and_then(|dir| filesystem_of(&read("/proc/mounts"), dir)),
            kernel_costs: KernelCosts::measure().ok(),
        }
    }
}

/// The 1, 5 and 15 minute load averages (runnable and waiting tasks), if the system says.
pub fn load_average() -> Option<[f64; 3]> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The first three fields of `/proc/loadavg`.
fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut fields = text.split_whitespace().map(str::parse::<f64>);
    Some([
        fields.next()?.ok()?,
        fields.next()?.ok()?,
        fields.next()?.ok()?,
    ])
}

/// The first `model name` of `/proc/cpuinfo`.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, model)| model.trim().to_owned())
}

/// The type of the filesystem mounted at the longest mount point above `path`.
fn filesystem_of(mounts: &str, path: &Path) -> Option<String> {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_device, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
            path.starts_with(point).then_some((point.len(), kind))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, kind)| kind.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_model_is_the_first_model_name() {
        let cpuinfo = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            cpu_model(cpuinfo).as_deref(),
            Some("Intel(R) Xeon(R) Processor")
        );
        assert_eq!(cpu_model(""), None);
    }

    #[test]
    fn kernel_costs_are_measured_as_positive_times() {
        let costs = KernelCosts::measure().unwrap();
        assert!(costs.syscall_us > 0.0, "{costs:?}");
        // A round trip holds at least two system calls on each side.
        assert!(costs.wake_round_trip_us > costs.syscall_us, "{costs:?}");
    }

    #[test]
    fn the_load_average_is_the_first_three_fields() {
        assert_eq!(
            parse_loadavg("0.42 1.10 2.50 3/612 12345\n"),
            Some([0.42, 1.10, 2.50])
        );
        assert_eq!(parse_loadavg("0.42 x"), None);
        assert_eq!(parse_loadavg(""), None);
    }

    #[test]
    fn the_deepest_mount_point_names_the_filesystem() {
        let mounts =
            "overlay / overlay rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n/dev/vda /data ext4 rw 0 0\n";
        assert_eq!(
            filesystem_of(mounts, Path::new("/tmp/history-pg-1")).as_deref(),
            Some("tmpfs")
        );
        assert_eq!(
            filesystem_of(mounts, Path::new("/var/lib")).as_deref(),
            Some("overlay")
        );
        assert_eq!(
            filesystem_of(mounts, Path::new("/database")).as_deref(),
            Some("overlay")
        );
    }
}
