//! Samples the lab's counters about every millisecond on a thread of its
//! own: one rtnetlink socket opened inside each router's namespace (the
//! shaped hops' qdiscs), one inside the last router's (its links to the
//! receiver and the cross sink) and one inside the cross traffic's entry
//! router (what the cross sender offered), and the host's CPU times
//! (`/proc/stat`: the share a hypervisor steals stalls the shapers). The
//! truth is computed afterwards from the samples ([`crate::truth`]).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::kernel::{enter_netns, Rtnl};
use crate::topology::Lab;
use crate::truth::Sample;
use tightlink_sys::clock::realtime_ns;
use tightlink_sys::cpu_time::{self, CpuTimes};

/// `/proc/stat` counts in 10 ms ticks and costs about 11 us to read: read
/// it at that pace, not every sample.
const CPU_READ_PERIOD_NS: i64 = 10_000_000;

/// At most this many samples (about 30 minutes at 1 ms): memory stays
/// bounded (under 100 MB) whatever the run length.
const MAX_SAMPLES: usize = 2_000_000;

pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Sample>>>,
    handle: Option<JoinHandle<io::Result<()>>>,
}

struct Sources {
    hops: Vec<(Rtnl, i32)>,
    far: Rtnl,
    rcv_if: i32,
    xr_if: Option<i32>,
    /// The cross sender's link into its entry router.
    entry: Option<(Rtnl, i32)>,
    /// The last CPU times read, and when.
    cpu: (CpuTimes, i64),
}

impl Sources {
    fn open(lab: &Lab) -> io::Result<Sources> {
        let mut hops = Vec::new();
        for k in 0..lab.scenario.hops.len() {
            let (ns, dev) = lab.hop_device(k);
            enter_netns(&ns)?;
            let mut r = Rtnl::open()?;
            let i = r.ifindex(dev)?;
            r.root_qdisc(i)?;
            hops.push((r, i));
        }
        enter_netns(&lab.ns("far"))?;
        let mut far = Rtnl::open()?;
        let rcv_if = far.ifindex("to_rcv")?;
        let xr_if = if lab.scenario.cross.is_some() {
            Some(far.ifindex("to_xr")?)
        } else {
            None
        };
        let entry = match &lab.scenario.cross {
            Some(c) => {
                enter_netns(&lab.router(c.entry_hop))?;
                let mut r = Rtnl::open()?;
                let i = r.ifindex("from_xs")?;
                Some((r, i))
            }
            None => None,
        };
        Ok(Sources {
            hops,
            far,
            rcv_if,
            xr_if,
            entry,
            cpu: (cpu_time::read()?, realtime_ns()),
        })
    }

    fn read(&mut self) -> io::Result<Sample> {
        let t_ns = realtime_ns();
        let mut hop_bytes = Vec::with_capacity(self.hops.len());
        let mut hop_drops = Vec::with_capacity(self.hops.len());
        for (r, i) in &mut self.hops {
            let q = r.root_qdisc(*i)?;
            hop_bytes.push(q.bytes);
            hop_drops.push(q.drops as u64);
        }
        let links = self.far.links()?;
        let tx = |i: Option<i32>| {
            i.and_then(|i| links.iter().find(|l| l.ifindex == i))
                .map_or(0, |l| l.tx_bytes)
        };
        let offered_cross_bytes = match &mut self.entry {
            Some((r, i)) => r
                .links()?
                .iter()
                .find(|l| l.ifindex == *i)
                .map_or(0, |l| l.rx_bytes),
            None => 0,
        };
        if t_ns - self.cpu.1 >= CPU_READ_PERIOD_NS {
            self.cpu = (cpu_time::read()?, t_ns);
        }
        // The instant is the middle of the reads.
        let t_ns = (t_ns + realtime_ns()) / 2;
        Ok(Sample {
            t_ns,
            hop_bytes,
            hop_drops,
            rcv_bytes: tx(Some(self.rcv_if)),
            cross_bytes: tx(self.xr_if),
            offered_cross_bytes,
            cpu: self.cpu.0,
        })
    }
}

impl Sampler {
    /// Starts sampling every `period`; fails at once if the counters
    /// cannot be read.
    pub fn start(lab: &Lab, period: Duration) -> io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let lab = lab.clone();
        let (stop2, samples2) = (stop.clone(), samples.clone());
        let handle = std::thread::spawn(move || -> io::Result<()> {
            let mut src = match Sources::open(&lab) {
                Ok(s) => {
                    let _ = ready_tx.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            };
            let mut next = realtime_ns();
            while !stop2.load(Ordering::Relaxed) {
                let s = src.read()?;
                {
                    let mut v = samples2.lock().expect("sampler lock");
                    if v.len() >= MAX_SAMPLES {
                        return Err(io::Error::other(
                            "sampler: run too long (2 million samples)",
                        ));
                    }
                    v.push(s);
                }
                next += period.as_nanos() as i64;
                let wait = next - realtime_ns();
                if wait > 0 {
                    std::thread::sleep(Duration::from_nanos(wait as u64));
                } else {
                    next = realtime_ns();
                }
            }
            // One last sample so every window that ended is covered.
            let s = src.read()?;
            samples2.lock().expect("sampler lock").push(s);
            Ok(())
        });
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Sampler {
                stop,
                samples,
                handle: Some(handle),
            }),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => Err(io::Error::other("sampler thread ended")),
        }
    }

    /// The newest sample.
    pub fn last(&self) -> Option<Sample> {
        self.samples.lock().expect("sampler lock").last().cloned()
    }

    /// How many samples there are so far (an index into [`Sampler::finish`]'s).
    pub fn sample_count(&self) -> usize {
        self.samples.lock().expect("sampler lock").len()
    }

    /// A copy of the samples so far.
    pub fn snapshot(&self) -> Vec<Sample> {
        self.samples.lock().expect("sampler lock").clone()
    }

    /// Stops and returns every sample (or the error that ended sampling).
    pub fn finish(mut self) -> io::Result<Vec<Sample>> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.join()
                .map_err(|_| io::Error::other("sampler panicked"))??;
        }
        Ok(std::mem::take(
            &mut *self.samples.lock().expect("sampler lock"),
        ))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
