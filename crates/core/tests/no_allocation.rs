//! An [`Analyzer`] reads multi-rate streams (and single-rate ones by
//! PRC-MT+BASS) without allocating once its memory has grown: a counting
//! allocator watches every allocation this test's thread makes while the
//! second round of streams is analysed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use tightlink_core::synth::varied_stream;
use tightlink_core::{AnalysisParams, Analyzer, Bound, Decision, Method, ProbeStream, StreamKind};

/// The system allocator, counting the calls each thread makes.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// The multi-rate streams of the varied set: 16-300 packets a rate,
/// stamped one by one or in batches, bursts or ON/OFF load, some lossy.
fn streams() -> Vec<ProbeStream> {
    (0..120u64).map(|i| varied_stream(i, true)).collect()
}

#[test]
fn multi_rate_streams_are_read_without_allocating() {
    let set = streams();
    let params = AnalysisParams::default();
    for method in [Method::Multirate, Method::MultirateSinglePass] {
        let mut analyzer = Analyzer::new();
        // The first round grows the memory to the longest stream's needs.
        let first: Vec<_> = set
            .iter()
            .map(|s| analyzer.analyze(s, StreamKind::MultiRate, method, &params))
            .collect();
        let mut checked = [0usize; 3];
        for (s, want) in set.iter().zip(&first) {
            let before = allocations();
            let a = analyzer.analyze(s, StreamKind::MultiRate, method, &params);
            let made = allocations() - before;
            assert_eq!(&a, want, "stream {}: the second reading differs", s.id);
            // An answer's reason is text: it is allocated.
            if a.reason.is_none() {
                assert_eq!(
                    made,
                    0,
                    "{}: stream {} allocated {made} times",
                    method.name(),
                    s.id
                );
                let k = match a.bound {
                    Bound::Exact => 0,
                    Bound::AtLeast | Bound::AtMost => 1,
                    Bound::None => 2,
                };
                checked[k] += 1;
            }
        }
        // The check covered most streams, and exact answers and bounds both.
        let total: usize = checked.iter().sum();
        assert!(total >= set.len() * 3 / 4, "{}: {checked:?}", method.name());
        assert!(
            checked[0] >= 30 && checked[1] >= 1,
            "{}: {checked:?}",
            method.name()
        );
    }
}

#[test]
fn single_rate_streams_are_read_by_prcmt_bass_without_allocating() {
    // 32-600 packets, stamped one by one or in batches, some lossy.
    let set: Vec<ProbeStream> = (0..200u64).map(|i| varied_stream(i, false)).collect();
    let params = AnalysisParams::default();
    let (kind, method) = (StreamKind::SingleRate, Method::PrcmtBass);
    let mut analyzer = Analyzer::new();
    let first: Vec<_> = set
        .iter()
        .map(|s| analyzer.analyze(s, kind, method, &params))
        .collect();
    let (mut above, mut below) = (0, 0);
    for (s, want) in set.iter().zip(&first) {
        let before = allocations();
        let a = analyzer.analyze(s, kind, method, &params);
        let made = allocations() - before;
        assert_eq!(&a, want, "stream {}: the second reading differs", s.id);
        if a.reason.is_none() {
            assert_eq!(made, 0, "stream {} allocated {made} times", s.id);
            above += usize::from(a.decision == Some(Decision::Above));
            below += usize::from(a.decision == Some(Decision::Below));
        }
    }
    assert!(
        above + below >= set.len() * 3 / 4 && above >= 20 && below >= 20,
        "{above} {below}"
    );
}
