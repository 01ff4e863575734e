//! A real one-node Slurm (Debian's `slurm-wlm` 22.05 with `munge`) on localhost: slurmctld and
//! slurmd configured in a temporary folder, without cgroups (`proctrack/linuxproc`,
//! `task/none`), on free ports, stopped when dropped. Needs root (the daemons run as root, and
//! munged as its own user).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The node comes up within a few seconds here; a minute means it is not coming.
const START_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Slurm {
    dir: tempfile::TempDir,
    /// Whether this harness started munged (then it stops it too).
    started_munge: bool,
}

impl Slurm {
    /// Starts Slurm, or `None` (after saying why) outside CI when it cannot be set up here.
    ///
    /// # Panics
    /// When it is installed but does not come up, and in CI when it cannot be set up.
    pub fn start() -> Option<Self> {
        for (tool, package) in [
            ("slurmctld", "slurm-wlm"),
            ("slurmd", "slurm-wlm"),
            ("sbatch", "slurm-wlm"),
            ("munged", "munge"),
        ] {
            crate::tool(tool, package)?;
        }
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if !root {
            let message = "a local Slurm needs root (its daemons and munged)";
            if std::env::var_os("CI").is_some() {
                panic!("{message}; CI runs as root");
            }
            eprintln!("SKIPPED: {message}");
            return None;
        }
        let started_munge = start_munge();
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a Slurm folder: {e}"));
        let slurm = Self { dir, started_munge };
        slurm.write_config();
        for daemon in ["slurmctld", "slurmd"] {
            let status = Command::new(daemon)
                .arg("-f")
                .arg(slurm.conf())
                .status()
                .unwrap_or_else(|e| panic!("starting {daemon}: {e}"));
            assert!(status.success(), "{daemon} did not start: {}", slurm.logs());
        }
        let started = Instant::now();
        loop {
            let out = slurm.command("sinfo").args(["-h", "-o", "%t"]).output();
            if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle") {
                return Some(slurm);
            }
            assert!(
                started.elapsed() < START_TIMEOUT,
                "the Slurm node did not come up: {}",
                slurm.logs()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `slurm.conf` (clients read it through `SLURM_CONF`).
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// A Slurm client command (`sbatch`, `squeue`, `scancel`...) for this cluster.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env("SLURM_CONF", self.conf());
        command
    }

    /// Waits until no job is queued or running, at most `limit`; whether it got there.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            let out = self.command("squeue").arg("-h").output();
            if out.is_ok_and(|o| o.status.success() && o.stdout.is_empty()) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        false
    }

    /// Both daemons' logs, for failure messages.
    pub fn logs(&self) -> String {
        ["slurmctld.log", "slurmd.log"]
            .iter()
            .map(|name| {
                let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                format!(
                    "{name}: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn write_config(&self) {
        let d = self.dir.path();
        for sub in ["state", "spool"] {
            std::fs::create_dir_all(d.join(sub)).unwrap_or_else(|e| panic!("{sub}: {e}"));
        }
        let host = hostname();
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let memory_mib = total_memory_mib().saturating_sub(2048).max(1024);
        let (ctld_port, d_port) = free_ports();
        let text = format!(
            "ClusterName=tessera-test\nSlurmctldHost={host}(127.0.0.1)\nSlurmUser=root\nSlurmdUser=root\n\
             SlurmctldPort={ctld_port}\nSlurmdPort={d_port}\nAuthType=auth/munge\n\
             StateSaveLocation={state}\nSlurmdSpoolDir={spool}\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\nSelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU_Memory\nReturnToService=2\nKillWait=10\n\
             NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mib} State=UNKNOWN\n\
             PartitionName=main Nodes={host} Default=YES MaxTime=INFINITE State=UP\n",
            state = d.join("state").display(),
            spool = d.join("spool").display(),
            d = d.display(),
        );
        std::fs::write(self.conf(), text).unwrap_or_else(|e| panic!("slurm.conf: {e}"));
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = self.command("scancel").arg("--user=root").status();
        for pid_file in ["slurmd.pid", "slurmctld.pid"] {
            kill_from(&self.dir.path().join(pid_file));
        }
        if self.started_munge {
            kill_from(Path::new("/run/munge/munged.pid"));
        }
    }
}

fn kill_from(pid_file: &Path) {
    if let Ok(pid) = std::fs::read_to_string(pid_file) {
        let _ = Command::new("kill").arg(pid.trim()).status();
    }
}

/// Starts munged as the munge user unless it answers already; whether it was started here.
fn start_munge() -> bool {
    let answers = || {
        Command::new("sh")
            .args(["-c", "munge -n | unmunge >/dev/null 2>&1"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if answers() {
        return false;
    }
    let status = Command::new("sh")
        .args([
            "-c",
            "mkdir -p /run/munge && chown munge:munge /run/munge && su -s /bin/sh munge -c /usr/sbin/munged",
        ])
        .status();
    assert!(
        status.is_ok_and(|s| s.success()) && answers(),
        "munged did not start (is /etc/munge/munge.key there?)"
    );
    true
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

fn total_memory_mib() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        })
        .map_or(4096, |kib| kib / 1024)
}

/// Two distinct free ports (both held while asked, so they differ).
fn free_ports() -> (u16, u16) {
    let bind = || {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("a free port: {e}"))
    };
    let (a, b) = (bind(), bind());
    let port = |l: &std::net::TcpListener| l.local_addr().map_or(0, |a| a.port());
    (port(&a), port(&b))
}
