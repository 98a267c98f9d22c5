//! CPU time and memory of processes, read from `/proc`: how the load harnesses measure the
//! service, FerretDB and its PostgreSQL (Linux only).

use std::process::Command;

/// Clock ticks per second (`getconf CLK_TCK`), the unit of `/proc/PID/stat`; 100 when unknown.
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU seconds in a `/proc/PID/stat` line: utime + stime, and with `reaped` what the process
/// has reaped of its exited children (cutime + cstime): PostgreSQL's postmaster counts the
/// backends that closed that way.
pub fn stat_seconds(stat: &str, reaped: bool, ticks: f64) -> Option<f64> {
    // The command name, in parentheses, may hold spaces: the fields are after its last `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let last = if reaped { 14 } else { 12 };
    let mut sum = 0.0;
    for i in 11..=last {
        sum += fields.get(i)?.parse::<f64>().ok()?;
    }
    Some(sum / ticks)
}

/// CPU seconds of one process (utime + stime).
#[allow(dead_code)] // each harness uses its part of this module
pub fn seconds_of_pid(pid: u32, ticks: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_seconds(&stat, false, ticks)
}

/// CPU seconds of every process whose name (`comm`) `matches`, their reaped children included;
/// `None` when no process does.
pub fn seconds_of_named(matches: impl Fn(&str) -> bool, ticks: f64) -> Option<f64> {
    let mut total = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if !matches(comm.trim()) {
            continue;
        }
        let Some(seconds) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat_seconds(&stat, true, ticks))
        else {
            continue;
        };
        *total.get_or_insert(0.0) += seconds;
    }
    total
}
