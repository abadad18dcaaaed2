//! Receiver timestamping (\[BASS\], section IV-A; \[IMR\],
//! section 3): ideal, or interrupt coalescence (the NIC raises an interrupt
//! at most every `interval`; the driver then stamps every waiting packet,
//! one after another at a small per-packet cost), timestamp quantisation,
//! and the receiver clock's offset and drift against the sender's.

#[derive(Debug, Clone, PartialEq)]
pub struct ReceiverSpec {
    /// Interrupt moderation interval; `None` stamps on arrival.
    pub coalescence_ns: Option<f64>,
    /// Cost of stamping one packet of a batch.
    pub per_packet_ns: f64,
    /// Timestamp resolution (e.g. 1000 for a microsecond clock).
    pub quantum_ns: Option<f64>,
    pub clock_offset_ns: i64,
    pub drift_ppm: f64,
}

impl Default for ReceiverSpec {
    fn default() -> Self {
        ReceiverSpec {
            coalescence_ns: Some(125_000.0),
            per_packet_ns: 300.0,
            quantum_ns: None,
            clock_offset_ns: 0,
            drift_ppm: 0.0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Receiver {
    spec: ReceiverSpec,
    last_irq_ns: f64,
    /// Interrupt the current batch waits for, and packets stamped in it.
    batch: Option<(f64, u32)>,
}

impl Receiver {
    pub fn new(spec: ReceiverSpec) -> Self {
        Receiver {
            spec,
            last_irq_ns: f64::NEG_INFINITY,
            batch: None,
        }
    }

    /// When software sees a packet that reached the NIC at `arrival_ns`
    /// (sim clock). Arrivals must come in time order.
    pub fn stamp(&mut self, arrival_ns: f64) -> f64 {
        let t = match self.spec.coalescence_ns {
            None => arrival_ns,
            Some(interval) => match self.batch {
                Some((irq, n)) if arrival_ns <= irq => {
                    self.batch = Some((irq, n + 1));
                    irq + n as f64 * self.spec.per_packet_ns
                }
                _ => {
                    // Idle long enough: interrupt at once; else wait out
                    // the moderation interval.
                    let irq = arrival_ns.max(self.last_irq_ns + interval);
                    self.last_irq_ns = irq;
                    self.batch = Some((irq, 1));
                    irq
                }
            },
        };
        match self.spec.quantum_ns {
            Some(q) if q > 0.0 => (t / q).floor() * q,
            _ => t,
        }
    }

    /// A sim-clock time read on the receiver's clock, ns.
    pub fn clock(&self, t_ns: f64) -> i64 {
        (t_ns * (1.0 + self.spec.drift_ppm * 1e-6)).round() as i64 + self.spec.clock_offset_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescence_batches_by_hand() {
        let mut r = Receiver::new(ReceiverSpec {
            coalescence_ns: Some(100.0),
            per_packet_ns: 1.0,
            ..Default::default()
        });
        // First packet: no interrupt for ages, stamped at once.
        assert_eq!(r.stamp(10.0), 10.0);
        // Within 100 ns of that interrupt: wait for 110, stamped in turn.
        assert_eq!(r.stamp(20.0), 110.0);
        assert_eq!(r.stamp(60.0), 111.0);
        assert_eq!(r.stamp(110.0), 112.0);
        // After 110: next interrupt at 210.
        assert_eq!(r.stamp(150.0), 210.0);
        // Long idle: at once.
        assert_eq!(r.stamp(1000.0), 1000.0);
    }

    #[test]
    fn quantum_and_clock() {
        let mut r = Receiver::new(ReceiverSpec {
            coalescence_ns: None,
            quantum_ns: Some(1000.0),
            clock_offset_ns: 5,
            drift_ppm: 100.0,
            ..Default::default()
        });
        assert_eq!(r.stamp(2999.0), 2000.0);
        assert_eq!(r.clock(1_000_000.0), 1_000_100 + 5);
    }
}
