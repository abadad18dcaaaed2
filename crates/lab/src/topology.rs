//! The lab's namespaces and links, built from a [`Scenario`] with `ip` and
//! `tc` (both always present with iproute2), and removed again.
//!
//! ```text
//!  snd ── r1 ═hop 1═▶ r2 ═hop 2═▶ … ══▶ far ── rcv      probes
//!          ▲ (or the router of cross.hop)    └── xr     cross sink
//!          xs                                           cross sender
//! ```
//!
//! Every namespace is named `tllab-<lab>-<role>`; links exist only inside
//! them (created there with `ip -n`), so deleting the namespaces removes
//! everything a lab made, also after a crash. Shaped hop k is the egress
//! of router k toward the next node. Routers' ingress receive work is
//! steered to CPU 1 with RPS (measured: otherwise forwarding runs
//! inside the sender's `send` and a paced 300 Mbit/s sender got 210).

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};

use tightlink_sys::sockopt;

use crate::kernel::{self, Offload};
use crate::scenario::{Qdisc, Scenario};

pub const PREFIX: &str = "tllab-";

/// Addresses of the roles (inside the lab; no clash with the host's).
pub const SND_IP: &str = "10.77.1.1";
pub const RCV_IP: &str = "10.77.2.2";
pub const XS_IP: &str = "10.77.3.1";
pub const XR_IP: &str = "10.77.4.2";

/// Delay lines' status files and logs.
pub const DELAY_STATUS_DIR: &str = "/run/tightlink-lab";

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("lab needs root or CAP_NET_ADMIN (namespaces, veth, tc): {0}")]
    NotPermitted(String),
    #[error("{0}")]
    Command(String),
    #[error("lab name '{0}': use 1-20 of a-z, 0-9 and '-'")]
    BadName(String),
    #[error("lab '{name}' is in use by another tightlink ({holder}): wait for it to end, or give this one another --name")]
    InUse { name: String, holder: String },
}

/// A lab name held by this process for as long as the value lives: a
/// second `lab run` (or `up`, `down`, `check`, ...) of the same name
/// would tear down the namespaces the first is measuring through (`up`
/// removes a lab of its name first), and the first would then lose
/// estimates with no reason given. An advisory `flock` on
/// `<dir>/<name>.lock`, released by the kernel however the holder ends.
#[derive(Debug)]
pub struct LabHold {
    _file: std::fs::File,
}

impl LabHold {
    /// Takes `name` in [`DELAY_STATUS_DIR`]; `what` names the command for
    /// another's refusal.
    pub fn take(name: &str, what: &str) -> Result<LabHold, LabError> {
        Self::take_in(Path::new(DELAY_STATUS_DIR), name, what)
    }

    /// Takes `name` in `dir` without waiting; [`LabError::InUse`] naming
    /// the holder's pid and command when another process has it.
    pub fn take_in(dir: &Path, name: &str, what: &str) -> Result<LabHold, LabError> {
        use std::io::{Seek, Write};
        std::fs::create_dir_all(dir)
            .map_err(|e| LabError::Command(format!("{}: {e}", dir.display())))?;
        let path = dir.join(format!("{name}.lock"));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| LabError::Command(format!("{}: {e}", path.display())))?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(LabError::Command(format!("{}: {e}", path.display())));
            }
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(LabError::InUse {
                name: name.to_string(),
                holder: if holder.is_empty() {
                    "a process that has not said which".to_string()
                } else {
                    holder.to_string()
                },
            });
        }
        // Who holds it, for the next one's message; the lock, not this
        // text, is what guards.
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = write!(file, "pid {}, `lab {what}`", std::process::id());
        Ok(LabHold { _file: file })
    }
}

/// Runs a shell command line; its stderr becomes the error.
pub fn sh(cmd: &str) -> Result<String, LabError> {
    let o = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map_err(|e| LabError::Command(format!("{cmd}: {e}")))?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
        if err.contains("Operation not permitted") || err.contains("Permission denied") {
            return Err(LabError::NotPermitted(err));
        }
        Err(LabError::Command(format!("{cmd}: {err}")))
    }
}

/// A veth pair from `a` (namespace, device, address) to `b`, both up.
fn veth(c: &mut Vec<String>, a: (&str, &str, &str), b: (&str, &str, &str)) {
    let ((a_ns, a, a_ip), (b_ns, b, b_ip)) = (a, b);
    c.push(format!(
        "ip -n {a_ns} link add {a} type veth peer name {b} netns {b_ns}"
    ));
    c.push(format!("ip -n {a_ns} addr add {a_ip}/24 dev {a}"));
    c.push(format!("ip -n {b_ns} addr add {b_ip}/24 dev {b}"));
    c.push(format!("ip -n {a_ns} link set {a} up"));
    c.push(format!("ip -n {b_ns} link set {b} up"));
}

/// Router `r` to `next` through hop `k`'s delay line `d`. The delay
/// line's namespace bridges in user space: no addresses, and no IPv6 of
/// its own on the wire. Fixed addresses and permanent neighbours: ARP
/// across the delay takes a round trip, and the kernel holds only
/// ~200 KB for a neighbour being resolved (at 150 Mbit/s and 30 ms a few
/// hundred frames were lost at every re-resolution).
fn delayed_link(c: &mut Vec<String>, k: usize, from: (&str, &str), d: &str, to: (&str, &str)) {
    let ((r, a_ip), (next, b_ip)) = (from, to);
    c.push(format!(
        "ip netns exec {d} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"
    ));
    let (a_mac, b_mac) = (
        format!("02:77:00:00:{k:02x}:01"),
        format!("02:77:00:00:{k:02x}:02"),
    );
    c.push(format!(
        "ip -n {r} link add to_next address {a_mac} type veth peer name from_prev netns {d}"
    ));
    c.push(format!(
        "ip -n {d} link add to_next type veth peer name from_prev address {b_mac} netns {next}"
    ));
    c.push(format!("ip -n {r} addr add {a_ip}/24 dev to_next"));
    c.push(format!("ip -n {next} addr add {b_ip}/24 dev from_prev"));
    c.push(format!(
        "ip -n {r} neigh replace {b_ip} lladdr {b_mac} dev to_next nud permanent"
    ));
    c.push(format!(
        "ip -n {next} neigh replace {a_ip} lladdr {a_mac} dev from_prev nud permanent"
    ));
    c.push(format!("ip -n {r} link set to_next up"));
    c.push(format!("ip -n {d} link set from_prev up"));
    c.push(format!("ip -n {d} link set to_next up"));
    c.push(format!("ip -n {next} link set from_prev up"));
}

fn icmp_unlimited(ns: &str) -> String {
    format!(
        "ip netns exec {ns} sysctl -qw net.ipv4.icmp_ratelimit=0 net.ipv4.icmp_msgs_per_sec=1000000 net.ipv4.icmp_msgs_burst=100000"
    )
}

/// A lab's layout (names only; nothing is touched until [`Lab::up`]).
#[derive(Debug, Clone)]
pub struct Lab {
    pub name: String,
    pub scenario: Scenario,
}

/// An interface's merging offloads after `up` set them:
/// (namespace, interface, [(offload, on)]).
pub type OffloadState = (String, String, Vec<(&'static str, bool)>);

/// What `up` reports.
#[derive(Debug, Clone)]
pub struct UpReport {
    pub namespaces: Vec<String>,
    /// Per namespace/interface: offload -> state after setting.
    pub offloads: Vec<OffloadState>,
}

impl Lab {
    pub fn new(name: &str, scenario: Scenario) -> Result<Lab, LabError> {
        check_name(name)?;
        Ok(Lab {
            name: name.to_string(),
            scenario,
        })
    }

    pub fn ns(&self, role: &str) -> String {
        format!("{PREFIX}{}-{role}", self.name)
    }

    pub fn router(&self, k: usize) -> String {
        self.ns(&format!("r{}", k + 1))
    }

    /// The namespace of hop `k`'s delay line, when the hop has a delay:
    /// between the router and the next node, bridging its two veths.
    pub fn delay_line(&self, k: usize) -> Option<String> {
        (self.scenario.hops[k].delay_ns > 0).then(|| self.ns(&format!("d{}", k + 1)))
    }

    /// Where a delay line writes its counters (JSON, every second).
    /// Holds this lab's name ([`LabHold::take`]).
    pub fn hold(&self, what: &str) -> Result<LabHold, LabError> {
        LabHold::take(&self.name, what)
    }

    pub fn delay_status_path(ns: &str) -> std::path::PathBuf {
        std::path::Path::new(DELAY_STATUS_DIR).join(format!("{ns}.json"))
    }

    /// Where the capture tcpreplay sends is written for this lab's cross
    /// traffic; `down` removes it.
    pub fn replay_path(&self) -> std::path::PathBuf {
        replay_path_for(&self.name)
    }

    fn has_cross(&self) -> bool {
        self.scenario.cross.is_some()
    }

    pub fn namespaces(&self) -> Vec<String> {
        let mut v = vec![self.ns("snd")];
        for k in 0..self.scenario.hops.len() {
            v.push(self.router(k));
            v.extend(self.delay_line(k));
        }
        v.push(self.ns("far"));
        v.push(self.ns("rcv"));
        if self.has_cross() {
            v.push(self.ns("xs"));
            v.push(self.ns("xr"));
        }
        v
    }

    /// Sets hop `k`'s tbf bucket to `burst_bytes` (rate and queue as
    /// configured), on a lab that is up.
    pub fn set_tbf_bucket(&self, k: usize, burst_bytes: u64) -> Result<(), LabError> {
        sh(&self.tbf_command(k, "change", burst_bytes)).map(|_| ())
    }

    /// The `tc` line that adds (`verb` "add") or changes hop `k`'s tbf,
    /// at its configured rate and queue, with a bucket of `burst_bytes`.
    fn tbf_command(&self, k: usize, verb: &str, burst_bytes: u64) -> String {
        let (ns, dev) = self.hop_device(k);
        let h = &self.scenario.hops[k];
        format!(
            "tc -n {ns} qdisc {verb} dev {dev} root tbf rate {}bit burst {burst_bytes} limit {}",
            h.rate_bps.round() as u64,
            h.buffer_bytes
        )
    }

    /// (namespace, interface) of shaped hop `k`.
    pub fn hop_device(&self, k: usize) -> (String, &'static str) {
        (self.router(k), "to_next")
    }

    /// Every veth end: (namespace, interface, is a router's ingress).
    fn interfaces(&self) -> Vec<(String, &'static str, bool)> {
        let n = self.scenario.hops.len();
        let mut v = vec![
            (self.ns("snd"), "eth0", false),
            (self.router(0), "from_snd", true),
        ];
        for k in 0..n {
            v.push((self.router(k), "to_next", false));
            if let Some(d) = self.delay_line(k) {
                v.push((d.clone(), "from_prev", true));
                v.push((d, "to_next", true));
            }
            let next = if k + 1 < n {
                self.router(k + 1)
            } else {
                self.ns("far")
            };
            v.push((next, "from_prev", true));
        }
        v.push((self.ns("far"), "to_rcv", false));
        v.push((self.ns("rcv"), "eth0", false));
        if let Some(c) = &self.scenario.cross {
            v.push((self.ns("xs"), "eth0", false));
            v.push((self.router(c.entry_hop), "from_xs", true));
            v.push((self.ns("far"), "to_xr", false));
            v.push((self.ns("xr"), "eth0", false));
        }
        v
    }

    /// The commands that build the lab, one per line.
    pub fn up_script(&self) -> String {
        let mut c = Vec::new();
        for ns in self.namespaces() {
            c.push(format!("ip netns add {ns}"));
            c.push(format!("ip -n {ns} link set lo up"));
        }
        self.links(&mut c);
        self.routes(&mut c);
        self.tuning(&mut c);
        self.shapers(&mut c);
        self.loss_filter(&mut c);
        c.join("\n")
    }

    /// Each veth pair: sender to the first router, router to router (a
    /// delay line between where the hop delays), the last to the far
    /// router, then to the receiver, and the cross sender and sink.
    fn links(&self, c: &mut Vec<String>) {
        let n = self.scenario.hops.len();
        let (snd, far, rcv) = (self.ns("snd"), self.ns("far"), self.ns("rcv"));
        let r0 = self.router(0);
        veth(c, (&snd, "eth0", SND_IP), (&r0, "from_snd", "10.77.1.2"));
        for k in 0..n {
            let next = if k + 1 < n {
                self.router(k + 1)
            } else {
                far.clone()
            };
            let net = 10 + k;
            let (a_ip, b_ip) = (format!("10.77.{net}.1"), format!("10.77.{net}.2"));
            let r = self.router(k);
            match self.delay_line(k) {
                None => veth(c, (&r, "to_next", &a_ip), (&next, "from_prev", &b_ip)),
                Some(d) => delayed_link(c, k, (&r, &a_ip), &d, (&next, &b_ip)),
            }
        }
        veth(c, (&far, "to_rcv", "10.77.2.1"), (&rcv, "eth0", RCV_IP));
        c.push(format!("ip -n {snd} route add default via 10.77.1.2"));
        c.push(format!("ip -n {rcv} route add default via 10.77.2.1"));
        if let Some(x) = &self.scenario.cross {
            let (xs, xr) = (self.ns("xs"), self.ns("xr"));
            let entry = self.router(x.entry_hop);
            veth(c, (&xs, "eth0", XS_IP), (&entry, "from_xs", "10.77.3.2"));
            veth(c, (&far, "to_xr", "10.77.4.1"), (&xr, "eth0", XR_IP));
            c.push(format!("ip -n {xs} route add default via 10.77.3.2"));
            c.push(format!("ip -n {xr} route add default via 10.77.4.1"));
        }
    }

    /// Forwarding and the routers' routes toward the receiver's and the
    /// cross sink's networks and back.
    fn routes(&self, c: &mut Vec<String>) {
        let n = self.scenario.hops.len();
        let entry = self.scenario.cross.as_ref().map(|x| x.entry_hop);
        for k in 0..n {
            let r = self.router(k);
            c.push(format!(
                "ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1"
            ));
            let next = format!("10.77.{}.2", 10 + k);
            c.push(format!("ip -n {r} route add 10.77.2.0/24 via {next}"));
            if entry.is_some() {
                c.push(format!("ip -n {r} route add 10.77.4.0/24 via {next}"));
            }
            if k > 0 {
                let prev = format!("10.77.{}.1", 10 + k - 1);
                c.push(format!("ip -n {r} route add 10.77.1.0/24 via {prev}"));
                if entry.is_some_and(|e| k > e) {
                    c.push(format!("ip -n {r} route add 10.77.3.0/24 via {prev}"));
                }
            }
            if entry.is_some_and(|e| k < e) {
                c.push(format!("ip -n {r} route add 10.77.3.0/24 via {next}"));
            }
        }
        let far = self.ns("far");
        c.push(format!(
            "ip netns exec {far} sysctl -qw net.ipv4.ip_forward=1"
        ));
        // Every reply to `tightlink hops`: Linux sends one ICMP error per
        // second per destination after a burst of 6 (icmp_ratelimit), and
        // 1000 a second in all (icmp_msgs_per_sec). Per namespace.
        for k in 0..n {
            c.push(icmp_unlimited(&self.router(k)));
        }
        c.push(icmp_unlimited(&far));
        c.push(icmp_unlimited(&self.ns("rcv")));
        let last = format!("10.77.{}.1", 10 + n - 1);
        c.push(format!("ip -n {far} route add 10.77.1.0/24 via {last}"));
        if entry.is_some() {
            c.push(format!("ip -n {far} route add 10.77.3.0/24 via {last}"));
        }
    }

    /// Receive packet steering: routers' ingress on the second CPU, the
    /// rest on the first.
    fn tuning(&self, c: &mut Vec<String>) {
        for (ns, dev, router_ingress) in self.interfaces() {
            let mask = if router_ingress { 2 } else { 1 };
            c.push(format!(
                "ip netns exec {ns} sh -c 'echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus'"
            ));
        }
    }

    /// Each hop's qdisc: a tbf, or an htb class over a bfifo.
    fn shapers(&self, c: &mut Vec<String>) {
        for (k, h) in self.scenario.hops.iter().enumerate() {
            let (ns, dev) = self.hop_device(k);
            let rate = format!("{}bit", h.rate_bps.round() as u64);
            match h.qdisc {
                Qdisc::Tbf => c.push(self.tbf_command(k, "add", h.burst_bytes)),
                Qdisc::Htb => {
                    c.push(format!(
                        "tc -n {ns} qdisc add dev {dev} root handle 1: htb default 1"
                    ));
                    c.push(format!(
                        "tc -n {ns} class add dev {dev} parent 1: classid 1:1 htb rate {rate} ceil {rate} burst {} cburst {}",
                        h.burst_bytes, h.burst_bytes
                    ));
                    c.push(format!(
                        "tc -n {ns} qdisc add dev {dev} parent 1:1 bfifo limit {}",
                        h.buffer_bytes
                    ));
                }
            }
        }
    }

    /// Random loss on the first router's ingress. Classic BPF in
    /// direct-action mode (the `gact` drop action is not in these
    /// kernels): A = random u32 (SKF_AD_OFF + SKF_AD_RANDOM = -4096 + 56);
    /// A > threshold -> 0 (TC_ACT_OK, pass), else 2 (TC_ACT_SHOT, drop).
    /// linux/filter.h, pkt_cls.h.
    fn loss_filter(&self, c: &mut Vec<String>) {
        let loss = self.scenario.loss;
        if loss <= 0.0 {
            return;
        }
        let threshold = (loss * u32::MAX as f64) as u32;
        let r1 = self.router(0);
        c.push(format!("tc -n {r1} qdisc add dev from_snd ingress"));
        c.push(format!(
            "tc -n {r1} filter add dev from_snd parent ffff: protocol all prio 1 bpf bytecode '4,32 0 0 4294963256,37 0 1 {threshold},6 0 0 0,6 0 0 2' da"
        ));
    }

    /// Builds the lab (removing a previous one of the same name first).
    /// `exe` is tightlink itself: a hop with a delay runs `exe lab
    /// delay-line` in the background, in the hop's delay namespace, until
    /// `down` kills it.
    pub fn up(&self, exe: &Path) -> Result<UpReport, LabError> {
        self.down()?;
        for line in self.up_script().lines() {
            if let Err(e) = sh(line) {
                let _ = self.down();
                return Err(e);
            }
        }
        let offloads = match self.set_offloads() {
            Ok(o) => o,
            Err(e) => {
                let _ = self.down();
                return Err(e);
            }
        };
        for k in 0..self.scenario.hops.len() {
            if let Err(e) = self.start_delay_line(k, exe) {
                let _ = self.down();
                return Err(e);
            }
        }
        Ok(UpReport {
            namespaces: self.namespaces(),
            offloads,
        })
    }

    /// Stops every delay line of this lab and starts it again (a line
    /// that fell over: its counters start again from zero); what each
    /// had logged last, for the reason.
    pub fn restart_delay_lines(&self, exe: &Path) -> Result<Vec<String>, LabError> {
        let mut said = Vec::new();
        for k in 0..self.scenario.hops.len() {
            let Some(ns) = self.delay_line(k) else {
                continue;
            };
            let log = Self::delay_status_path(&ns).with_extension("log");
            let last = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .last()
                .unwrap_or("")
                .to_string();
            said.push(format!(
                "{ns}: {}",
                if last.is_empty() {
                    "(nothing logged)"
                } else {
                    &last
                }
            ));
            let pids = Command::new("ip")
                .args(["netns", "pids", &ns])
                .output()
                .map_err(|e| LabError::Command(format!("ip netns pids {ns}: {e}")))?;
            for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    // SAFETY: a signal to a process of this lab's namespace.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            // Its sockets close as it dies; the new line binds its own.
            let gone_by = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while std::time::Instant::now() < gone_by {
                let left = Command::new("ip").args(["netns", "pids", &ns]).output();
                if left.is_ok_and(|o| o.stdout.iter().all(u8::is_ascii_whitespace)) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            self.start_delay_line(k, exe)?;
        }
        Ok(said)
    }

    /// Starts hop `k`'s delay line (if it has one) as a daemon and waits
    /// for its "ready" line: after that no frame is lost to a socket not
    /// yet bound.
    fn start_delay_line(&self, k: usize, exe: &Path) -> Result<(), LabError> {
        let Some(ns) = self.delay_line(k) else {
            return Ok(());
        };
        let hop = &self.scenario.hops[k];
        std::fs::create_dir_all(DELAY_STATUS_DIR)
            .map_err(|e| LabError::Command(format!("{DELAY_STATUS_DIR}: {e}")))?;
        let status = Self::delay_status_path(&ns);
        let log = status.with_extension("log");
        let log_file = std::fs::File::create(&log)
            .map_err(|e| LabError::Command(format!("{}: {e}", log.display())))?;
        // `sh -c '... &'`: the line outlives this process and is reaped by
        // init, not left a zombie of ours; its stdout stays our pipe until
        // it says it is ready.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("\"$0\" \"$@\" &")
            .args(["ip", "netns", "exec", &ns])
            .arg(exe)
            .args(["lab", "delay-line", "from_prev", "to_next"])
            .arg(format!("--delay={}ns", hop.delay_ns))
            .arg(format!("--jitter={}ns", hop.jitter_ns))
            .arg("--status")
            .arg(&status)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .map_err(|e| LabError::Command(format!("starting the delay line in {ns}: {e}")))?;
        let mut out = child.stdout.take().expect("piped");
        let _ = child.wait();
        let ready = sockopt::wait_fd(out.as_raw_fd(), libc::POLLIN, 5_000).unwrap_or(false);
        let mut line = [0u8; 6];
        let got = if ready {
            out.read(&mut line).unwrap_or(0)
        } else {
            0
        };
        if &line[..got] != b"ready\n" {
            let why = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(LabError::Command(format!(
                "the delay line in {ns} did not start{}: {}",
                if ready { "" } else { " within 5 s" },
                why.trim()
            )));
        }
        Ok(())
    }

    fn set_offloads(&self) -> Result<Vec<OffloadState>, LabError> {
        let on = self.scenario.offloads_on;
        let mut out = Vec::new();
        for (ns, dev, _) in self.interfaces() {
            let states = kernel::in_netns(&ns, || {
                Offload::ALL
                    .iter()
                    .map(|&o| kernel::set_offload(dev, o, on).map(|s| (o.name(), s)))
                    .collect::<std::io::Result<Vec<_>>>()
            })
            .map_err(|e| LabError::Command(format!("offloads on {ns}/{dev}: {e}")))?;
            if let Some((o, s)) = states.iter().find(|(_, s)| *s != on) {
                return Err(LabError::Command(format!(
                    "{ns}/{dev}: {o} stayed {} after setting it {}",
                    if *s { "on" } else { "off" },
                    if on { "on" } else { "off" }
                )));
            }
            out.push((ns, dev.to_string(), states));
        }
        Ok(out)
    }

    /// This lab's namespaces that exist now.
    pub fn existing(&self) -> Result<Vec<String>, LabError> {
        existing_with_prefix(&format!("{PREFIX}{}-", self.name))
    }

    /// Kills what runs in the lab's namespaces and deletes them; a no-op
    /// when there is no such lab.
    pub fn down(&self) -> Result<Vec<String>, LabError> {
        down_named(&self.name)
    }

    /// A readable state: namespaces, processes in them, shaped hops.
    pub fn status(&self) -> Result<String, LabError> {
        let found = self.existing()?;
        if found.is_empty() {
            return Ok(format!("lab {}: down", self.name));
        }
        let mut out = format!("lab {}: {} namespaces\n", self.name, found.len());
        for ns in &found {
            let pids = sh(&format!("ip netns pids {ns}"))?;
            let pids: Vec<&str> = pids.split_whitespace().collect();
            out.push_str(&format!("  {ns}: {} processes\n", pids.len()));
        }
        for k in 0..self.scenario.hops.len() {
            let (ns, dev) = self.hop_device(k);
            if found.contains(&ns) {
                let q = sh(&format!("tc -n {ns} -s qdisc show dev {dev}"))?;
                out.push_str(&format!("  hop {} ({ns} {dev}):\n", k + 1));
                for l in q.lines() {
                    out.push_str(&format!("    {l}\n"));
                }
            }
            if let Some(d) = self.delay_line(k) {
                let h = &self.scenario.hops[k];
                let counters = std::fs::read_to_string(Self::delay_status_path(&d))
                    .unwrap_or_else(|e| format!("no counters yet ({e})"));
                out.push_str(&format!(
                    "  hop {} delay line ({d}, {} us +- {} us each way): {}\n",
                    k + 1,
                    h.delay_ns / 1000,
                    h.jitter_ns / 1000,
                    counters.trim()
                ));
            }
        }
        Ok(out)
    }
}

/// Namespaces whose name starts with `prefix`.
/// A lab name: 1-20 of a-z, 0-9 and '-' (it becomes part of namespace
/// and interface names).
fn check_name(name: &str) -> Result<(), LabError> {
    let ok = !name.is_empty()
        && name.len() <= 20
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if ok {
        Ok(())
    } else {
        Err(LabError::BadName(name.to_string()))
    }
}

/// [`Lab::down`] by the lab's name alone (its scenario is not needed to
/// find what it made).
pub fn down_named(name: &str) -> Result<Vec<String>, LabError> {
    check_name(name)?;
    remove_labs(existing_with_prefix(&format!("{PREFIX}{name}-"))?)
}

/// Every lab on this host (namespaces `tllab-*`), as [`Lab::down`] does
/// one: after crashed runs whose names are not known.
/// A lab name a process holds, with who holds it ([`LabHold`]).
pub type HeldName = (String, String);

/// Removes every lab on the host but those a process holds
/// ([`LabHold`]): (namespaces removed, labs left up with their holders).
pub fn down_all() -> Result<(Vec<String>, Vec<HeldName>), LabError> {
    let in_use = held_names(Path::new(DELAY_STATUS_DIR));
    let found: Vec<String> = existing_with_prefix(PREFIX)?
        .into_iter()
        .filter(|ns| {
            !in_use
                .iter()
                .any(|(name, _)| ns.starts_with(&format!("{PREFIX}{name}-")))
        })
        .collect();
    Ok((remove_labs(found)?, in_use))
}

/// The names in `dir` that another process holds now, with its holder:
/// each `NAME.lock` there is tried and, if free, let go at once.
fn held_names(dir: &Path) -> Vec<HeldName> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut held = Vec::new();
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(name) = file_name.to_str().and_then(|n| n.strip_suffix(".lock")) else {
            continue;
        };
        if let Err(LabError::InUse { holder, .. }) = LabHold::take_in(dir, name, "down --all") {
            held.push((name.to_string(), holder));
        }
    }
    held.sort();
    held
}

/// Removes lab namespaces, their delay lines' status files and the
/// labs' replay captures (tens of MB each).
fn remove_labs(found: Vec<String>) -> Result<Vec<String>, LabError> {
    remove_namespaces(&found)?;
    for ns in &found {
        let status = Lab::delay_status_path(ns);
        let _ = std::fs::remove_file(status.with_extension("log"));
        let _ = std::fs::remove_file(status);
        if let Some(name) = lab_name_of(ns) {
            let _ = std::fs::remove_file(replay_path_for(name));
        }
    }
    Ok(found)
}

fn replay_path_for(name: &str) -> std::path::PathBuf {
    Path::new(DELAY_STATUS_DIR).join(format!("{PREFIX}{name}-xs-replay.pcap"))
}

/// The lab a namespace `tllab-NAME-NODE` belongs to.
fn lab_name_of(ns: &str) -> Option<&str> {
    Some(ns.strip_prefix(PREFIX)?.rsplit_once('-')?.0)
}

pub fn existing_with_prefix(prefix: &str) -> Result<Vec<String>, LabError> {
    let list = sh("ip netns list")?;
    Ok(list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect())
}

/// Kills every process in each namespace (TERM, then KILL) and deletes it.
pub fn remove_namespaces(names: &[String]) -> Result<(), LabError> {
    for ns in names {
        let _ = sh(&format!("ip netns pids {ns} | xargs -r kill -TERM"));
    }
    for _ in 0..20 {
        let alive = names
            .iter()
            .any(|ns| sh(&format!("ip netns pids {ns}")).is_ok_and(|p| !p.trim().is_empty()));
        if !alive {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for ns in names {
        let _ = sh(&format!("ip netns pids {ns} | xargs -r kill -KILL"));
        sh(&format!("ip netns del {ns}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One holder per name: a second take (here in the same process, on
    /// its own open file, as another process's would be) is refused with
    /// the first's pid and command; another name is free; the name is
    /// free again once the first is dropped.
    #[test]
    fn a_held_name_is_refused_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let first = LabHold::take_in(dir.path(), "cbr30", "run").unwrap();
        match LabHold::take_in(dir.path(), "cbr30", "up") {
            Err(LabError::InUse { name, holder }) => {
                assert_eq!(name, "cbr30");
                assert_eq!(holder, format!("pid {}, `lab run`", std::process::id()));
            }
            other => panic!("expected InUse, got {other:?}"),
        }
        let other = LabHold::take_in(dir.path(), "cbr60", "run");
        assert!(other.is_ok(), "{other:?}");
        // What `down --all` leaves up: both held names, with holders.
        let held = held_names(dir.path());
        let pid = std::process::id();
        assert_eq!(
            held,
            [
                ("cbr30".to_string(), format!("pid {pid}, `lab run`")),
                ("cbr60".to_string(), format!("pid {pid}, `lab run`")),
            ]
        );
        drop(other);
        assert_eq!(held_names(dir.path()).len(), 1);
        drop(first);
        let again = LabHold::take_in(dir.path(), "cbr30", "up");
        assert!(again.is_ok(), "{again:?}");
    }

    #[test]
    fn names_are_checked_and_prefixed() {
        let s = Scenario::load("cbr30").unwrap();
        assert!(Lab::new("Bad name", s.clone()).is_err());
        assert!(Lab::new("x".repeat(21).as_str(), s.clone()).is_err());
        let lab = Lab::new("t1", s).unwrap();
        assert_eq!(lab.ns("snd"), "tllab-t1-snd");
        assert_eq!(lab.namespaces().len(), 6);
    }

    /// Two hops with cross traffic entering at hop 2: the second router
    /// holds the cross sender's link and routes its subnet back upstream
    /// nowhere (it is directly connected); the first router sends the
    /// cross subnet downstream.
    #[test]
    fn two_hop_script_shapes_both_hops_and_routes_cross_at_hop_2() {
        let lab = Lab::new("t2", Scenario::load("two-hop").unwrap()).unwrap();
        let s = lab.up_script();
        assert!(s.contains("tc -n tllab-t2-r1 qdisc add dev to_next root tbf rate 150000000bit burst 3000 limit 100000"));
        assert!(s.contains("tc -n tllab-t2-r2 qdisc add dev to_next root tbf rate 250000000bit"));
        assert!(s.contains(
            "ip -n tllab-t2-xs link add eth0 type veth peer name from_xs netns tllab-t2-r2"
        ));
        assert!(s.contains("ip -n tllab-t2-r1 route add 10.77.3.0/24 via 10.77.10.2"));
        assert!(s.contains("ip -n tllab-t2-far route add 10.77.3.0/24 via 10.77.11.1"));
        assert!(!s.contains("ingress"), "no loss filter");
    }

    /// `down` finds a lab's replay capture from any of its namespaces,
    /// names with dashes included; the run writes it there.
    #[test]
    fn the_replay_capture_is_found_from_a_namespace() {
        assert_eq!(lab_name_of("tllab-my-lab-snd"), Some("my-lab"));
        assert_eq!(lab_name_of("tllab-mix-d1"), Some("mix"));
        assert_eq!(lab_name_of("other-snd"), None);
        let lab = Lab::new("my-lab", Scenario::load("tcpreplay-mix").unwrap()).unwrap();
        assert_eq!(
            lab.replay_path(),
            Path::new("/run/tightlink-lab/tllab-my-lab-xs-replay.pcap")
        );
    }

    /// 1 % loss: threshold 0.01 * (2^32 - 1).
    #[test]
    fn lossy_script_has_the_random_drop_filter() {
        let lab = Lab::new("t3", Scenario::load("lossy").unwrap()).unwrap();
        let s = lab.up_script();
        assert!(s.contains("37 0 1 42949672,"), "{s}");
        assert!(s.contains("6 0 0 0,6 0 0 2' da"));
    }
}
