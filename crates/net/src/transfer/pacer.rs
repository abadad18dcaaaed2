//! What sets the sending end's pace: Rapid's rate (\[BASS\] section VII:
//! streams at rates around the estimate) or TCP Westwood BBE's window
//! (\[TCPW\] section 4, on the receiver's per-stream reports). The loop in
//! `send` asks it when the next packet may go and tells it what came back.

use tightlink_core::rapid::{PacketTag, RapidController, RapidEstimator, RapidParams, RapidUpdate};
use tightlink_core::tcp::bbe_cc::{BbeCcParams, BbeController};
use tightlink_core::tcp::stream_window::StreamWindow;

/// The controller a sending end runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendCc {
    Rapid(RapidEstimator),
    /// TCP Westwood BBE's window.
    Bbe,
}

impl SendCc {
    pub fn name(self) -> &'static str {
        match self {
            SendCc::Rapid(e) => e.name(),
            SendCc::Bbe => "bbe",
        }
    }
}

pub(crate) enum Pacer {
    Rapid {
        ctl: RapidController,
        /// Packets in each of its streams.
        per_stream: u32,
    },
    Window {
        w: StreamWindow,
        /// A packet's time at the plan's rate (the server's limit among
        /// them): never faster, over each pair, whatever the window's
        /// pacing allows.
        min_gap_ns: i64,
        last_send_ns: Option<i64>,
    },
}

/// When the next packet may go.
pub(crate) enum Due {
    At(i64),
    /// The window is full: only a report frees it.
    WindowFull,
}

impl Pacer {
    pub fn new(cc: SendCc, max_bps: f64, frame_bytes: u32) -> Pacer {
        match cc {
            SendCc::Rapid(estimator) => {
                let params = RapidParams::paper(max_bps, frame_bytes, estimator);
                Pacer::Rapid {
                    per_stream: (params.sub_streams * params.per_rate) as u32,
                    ctl: RapidController::new(params),
                }
            }
            SendCc::Bbe => Pacer::Window {
                w: StreamWindow::new(
                    BbeController::new(BbeCcParams {
                        mss_bytes: frame_bytes,
                        min_spread: 2.0,
                        ..BbeCcParams::default()
                    }),
                    frame_bytes,
                ),
                min_gap_ns: if max_bps.is_finite() && max_bps > 0.0 {
                    (frame_bytes as f64 * 8e9 / max_bps) as i64
                } else {
                    0
                },
                last_send_ns: None,
            },
        }
    }

    pub fn next_send(&mut self, now_ns: i64) -> Due {
        match self {
            Pacer::Rapid { ctl, .. } => Due::At(ctl.next_send_ns(now_ns)),
            Pacer::Window {
                w,
                min_gap_ns,
                last_send_ns,
            } if w.may_send() => {
                let gap = w.send_gap_ns(*min_gap_ns);
                Due::At(last_send_ns.map_or(now_ns, |l| (l + gap).max(now_ns)))
            }
            Pacer::Window { .. } => Due::WindowFull,
        }
    }

    /// A packet of `frame_bytes` left at `at_ns`: its tag and its
    /// stream's length.
    pub fn sent(&mut self, at_ns: i64, frame_bytes: u32) -> (PacketTag, u32) {
        match self {
            Pacer::Rapid { ctl, per_stream } => (ctl.sent(at_ns), *per_stream),
            Pacer::Window {
                w, last_send_ns, ..
            } => {
                *last_send_ns = Some(at_ns);
                w.sent(at_ns, frame_bytes)
            }
        }
    }

    pub fn mid_stream(&self) -> bool {
        match self {
            Pacer::Rapid { ctl, .. } => ctl.mid_stream(),
            Pacer::Window { w, .. } => w.mid_stream(),
        }
    }

    pub fn end_stream(&mut self) {
        match self {
            Pacer::Rapid { ctl, .. } => ctl.end_stream(),
            Pacer::Window { w, .. } => w.end_stream(),
        }
    }

    /// The window is full of the stream being sent: it must end for its
    /// report to come.
    pub fn waiting_on_open_stream(&self) -> bool {
        match self {
            Pacer::Rapid { .. } => false,
            Pacer::Window { w, .. } => w.waiting_on_open_stream(),
        }
    }

    pub fn streams_awaiting_feedback(&self) -> u64 {
        match self {
            Pacer::Rapid { ctl, .. } => ctl.streams_awaiting_feedback(),
            Pacer::Window { w, .. } => w.streams_awaiting_feedback(),
        }
    }

    /// Rapid's rate, or the window over RTTmin.
    pub fn rate_bps(&self) -> f64 {
        match self {
            Pacer::Rapid { ctl, .. } => ctl.rate_bps(),
            Pacer::Window { w, .. } => w.rate_bps(),
        }
    }

    /// The window's own estimate (BE), where it keeps one between
    /// updates; Rapid's come in its updates.
    pub fn estimate_bps(&self) -> Option<f64> {
        match self {
            Pacer::Rapid { .. } => None,
            Pacer::Window { w, .. } => Some(w.controller().be_bps()).filter(|b| *b > 0.0),
        }
    }

    /// A stream's report at `now_ns`: the stamps that came and the
    /// positions sent that did not; Rapid's update, where it read one.
    pub fn report(
        &mut self,
        stream: u64,
        stamps: &[(u32, i64)],
        missing: &[u32],
        now_ns: i64,
    ) -> Option<RapidUpdate> {
        match self {
            Pacer::Rapid { ctl, .. } => {
                let mut out = None;
                let tag = |index| PacketTag { stream, index };
                for &(i, t) in stamps {
                    out = out.or(ctl.feedback(tag(i), Some(t), now_ns));
                }
                for &i in missing {
                    out = out.or(ctl.feedback(tag(i), None, now_ns));
                }
                out
            }
            Pacer::Window { w, .. } => {
                w.report(stream, stamps, now_ns);
                None
            }
        }
    }
}
