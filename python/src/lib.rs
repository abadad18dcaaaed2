//! `tightlink._native`: the Python face of tightlink, over the library
//! API (tightlink-measure) like every other face. Arrays come in as numpy
//! views (read in place, never converted to Python objects), results go
//! back as numpy arrays and plain lists; errors are `TightlinkError` (a subclass for each kind) with
//! the messages the command line prints. The `tightlink` package wraps
//! these functions with keyword arguments, structured arrays and stubs.

use std::path::PathBuf;

use anyhow::Context;
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tightlink_core::{Analysis, AnalysisParams, ProbePacket, ProbeStream, StreamKind};
use tightlink_measure::analyze::{parse_kind, AnalysisSettings, Methods, StreamAnalyzer};
use tightlink_measure::simulate::{simulate as sim_run, Schedule, SimulateOptions};
use tightlink_measure::{estimate as est_run, EstimateOptions, Method, RealOptions, Target};

create_exception!(
    _native,
    TightlinkError,
    PyException,
    "An error of tightlink, with the message the command line gives; its subclass says the kind."
);
create_exception!(
    _native,
    BadInputError,
    TightlinkError,
    "A parameter, target, array or file's content that cannot be used as given."
);
create_exception!(
    _native,
    UnreachableError,
    TightlinkError,
    "The far end could not be reached (no address, no route, nothing listening)."
);
create_exception!(
    _native,
    RefusedError,
    TightlinkError,
    "The far end answered and refused (a version, a key, a size, its limits)."
);
create_exception!(
    _native,
    TimedOutError,
    TightlinkError,
    "The far end or the path stayed silent past the timeout."
);
create_exception!(
    _native,
    ProtocolError,
    TightlinkError,
    "The far end spoke, but not the protocol expected of it."
);
create_exception!(
    _native,
    HostError,
    TightlinkError,
    "This host's sockets, timestamps or files failed."
);

/// glibc before 2.25 has no getrandom(3), which Rust's standard library
/// calls, while manylinux2014 wheels promise glibc 2.17; the system call
/// is older (Linux 3.17). Defined here, the module loads on those
/// systems too (Python opens extension modules RTLD_LOCAL: nothing else
/// in the process binds to it).
///
/// # Safety
///
/// As getrandom(2): `buf` is valid for `len` bytes of writes.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[no_mangle]
pub unsafe extern "C" fn getrandom(
    buf: *mut std::ffi::c_void,
    len: usize,
    flags: std::ffi::c_uint,
) -> isize {
    // SAFETY: the caller's buffer, as getrandom(2) takes it.
    unsafe { libc::syscall(libc::SYS_getrandom, buf, len, flags) as isize }
}

/// `recv_ns` of a lost packet.
pub const LOST: i64 = i64::MIN;

/// The library's error as the exception of its kind, with the message
/// the command line prints.
fn err(e: anyhow::Error) -> PyErr {
    use tightlink_measure::ErrorKind as K;
    let text = format!("{e:#}");
    match tightlink_measure::kind_of(&e) {
        K::BadInput => BadInputError::new_err(text),
        K::Unreachable => UnreachableError::new_err(text),
        K::Refused => RefusedError::new_err(text),
        K::TimedOut => TimedOutError::new_err(text),
        K::Protocol => ProtocolError::new_err(text),
        K::Io => HostError::new_err(text),
    }
}

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, name: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| BadInputError::new_err(format!("{name}: the array must be contiguous")))
}

/// Visits the streams of packet columns (consecutive runs of one stream
/// id) in order, one at a time in a reused buffer: no allocation per
/// packet, and the stream is hot in cache when it is analysed.
fn for_each_stream(
    stream_id: &[u64],
    size: &[u32],
    send: &[i64],
    recv: &[i64],
    mut visit: impl FnMut(&ProbeStream),
) -> PyResult<()> {
    let n = send.len();
    for (name, len) in [
        ("recv_ns", recv.len()),
        ("size_bytes", size.len()),
        ("stream_id", stream_id.len()),
    ] {
        if len != n {
            return Err(BadInputError::new_err(format!(
                "{name} has {len} elements, send_ns has {n}: one per packet"
            )));
        }
    }
    if let Some(i) = size.iter().position(|&b| b == 0) {
        return Err(BadInputError::new_err(format!(
            "size_bytes[{i}] is 0: packets have a size"
        )));
    }
    let mut seen = std::collections::HashSet::new();
    let mut stream = ProbeStream::default();
    let mut start = 0;
    while start < n {
        let id = stream_id[start];
        let end = start
            + stream_id[start..]
                .iter()
                .position(|&x| x != id)
                .unwrap_or(n - start);
        if !seen.insert(id) {
            return Err(BadInputError::new_err(format!(
                "stream_id[{start}] = {id} appears again after another stream: a stream's packets must be contiguous"
            )));
        }
        stream.id = id;
        stream.packets.clear();
        stream.packets.extend(
            size[start..end]
                .iter()
                .zip(&send[start..end])
                .zip(&recv[start..end])
                .map(|((&size_bytes, &send_ns), &r)| ProbePacket {
                    size_bytes,
                    send_ns,
                    recv_ns: (r != LOST).then_some(r),
                }),
        );
        visit(&stream);
        start = end;
    }
    Ok(())
}

/// Packets in columns -> streams.
fn streams_from(
    stream_id: &[u64],
    size: &[u32],
    send: &[i64],
    recv: &[i64],
) -> PyResult<Vec<ProbeStream>> {
    let mut streams = Vec::new();
    for_each_stream(stream_id, size, send, recv, |s| streams.push(s.clone()))?;
    Ok(streams)
}

/// One column per field of `analyze --format json`'s rows.
fn columns<'py>(py: Python<'py>, rows: &[Analysis]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    // Finite values or NaN, as the JSON has them (null there).
    let f = |g: &dyn Fn(&Analysis) -> Option<f64>| -> Vec<f64> {
        rows.iter()
            .map(|r| g(r).filter(|v| v.is_finite()).unwrap_or(f64::NAN))
            .collect()
    };
    d.set_item(
        "stream_id",
        rows.iter()
            .map(|r| r.stream_id)
            .collect::<Vec<_>>()
            .into_pyarray(py),
    )?;
    d.set_item(
        "method",
        PyList::new(py, rows.iter().map(|r| r.method.name()))?,
    )?;
    d.set_item(
        "kind",
        PyList::new(py, rows.iter().map(|r| r.kind.as_str()))?,
    )?;
    d.set_item(
        "packets",
        rows.iter()
            .map(|r| r.packets as i64)
            .collect::<Vec<_>>()
            .into_pyarray(py),
    )?;
    d.set_item(
        "received",
        rows.iter()
            .map(|r| r.received as i64)
            .collect::<Vec<_>>()
            .into_pyarray(py),
    )?;
    d.set_item("avg_rate_bps", f(&|r| r.avg_rate_bps).into_pyarray(py))?;
    d.set_item(
        "decision",
        PyList::new(py, rows.iter().map(|r| r.decision.map(|d| d.as_str())))?,
    )?;
    d.set_item("abw_bps", f(&|r| r.abw_bps).into_pyarray(py))?;
    d.set_item(
        "bound",
        PyList::new(py, rows.iter().map(|r| r.bound.as_str()))?,
    )?;
    d.set_item(
        "reason",
        PyList::new(py, rows.iter().map(|r| r.reason.clone()))?,
    )?;
    d.set_item(
        "send_rate_bps",
        f(&|r| r.detail.send_rate_bps).into_pyarray(py),
    )?;
    d.set_item(
        "recv_rate_bps",
        f(&|r| r.detail.recv_rate_bps).into_pyarray(py),
    )?;
    d.set_item("pct", f(&|r| r.detail.pct).into_pyarray(py))?;
    d.set_item("pdt", f(&|r| r.detail.pdt).into_pyarray(py))?;
    d.set_item(
        "kept_gaps",
        PyList::new(py, rows.iter().map(|r| r.detail.kept_gaps))?,
    )?;
    d.set_item(
        "gaps_total",
        PyList::new(py, rows.iter().map(|r| r.detail.gaps_total))?,
    )?;
    d.set_item(
        "passes",
        PyList::new(py, rows.iter().map(|r| r.detail.passes))?,
    )?;
    d.set_item(
        "capacity_bps",
        f(&|r| r.detail.capacity_bps).into_pyarray(py),
    )?;
    let per_rate = PyList::empty(py);
    for r in rows {
        let l = PyList::empty(py);
        for &(rate_bps, decision) in r.detail.per_rate.iter().filter(|p| p.0.is_finite()) {
            l.append((rate_bps, decision.map(|d| d.as_str())))?;
        }
        per_rate.append(l)?;
    }
    d.set_item("per_rate", per_rate)?;
    Ok(d)
}

/// Settings from the keyword dict (`spike_up=`, ...); unknown keys refused.
fn settings(params: Option<&Bound<'_, PyDict>>) -> PyResult<AnalysisSettings> {
    let mut s = AnalysisSettings::default();
    let Some(params) = params else {
        return Ok(s);
    };
    for (k, v) in params.iter() {
        let key: String = k.extract()?;
        let bad = |e: PyErr| BadInputError::new_err(format!("{key}=: {e}"));
        match key.as_str() {
            "spike_up" => s.spike_up = v.extract().map_err(bad)?,
            "spike_down" => s.spike_down = v.extract().map_err(bad)?,
            "tolerance" => s.tolerance = v.extract().map_err(bad)?,
            "imr_window" => s.imr_window = v.str()?.to_string(),
            "window" => s.window = v.extract().map_err(bad)?,
            "max_passes" => s.max_passes = v.extract().map_err(bad)?,
            "consistency" => s.consistency = v.extract().map_err(bad)?,
            "capacity_bps" => s.capacity_bps = Some(v.extract().map_err(bad)?),
            _ => {
                return Err(BadInputError::new_err(format!(
                    "{key}: unknown parameter (known: spike_up, spike_down, tolerance, imr_window, window, max_passes, consistency, capacity_bps)"
                )))
            }
        }
    }
    Ok(s)
}

/// `analyze`'s and `analyze_trace`'s kind, methods and settings, checked
/// as the command line checks them (a capacity only for a method that
/// reads one), the errors in Python's spelling.
fn analysis_args(
    kind: &str,
    method: &str,
    params: Option<&Bound<'_, PyDict>>,
) -> PyResult<(Option<StreamKind>, Methods, AnalysisParams)> {
    let given = params
        .and_then(|d| d.get_item("capacity_bps").ok().flatten())
        .map(|v| format!("capacity_bps={v}"));
    let params = settings(params)?
        .params(&|n| format!("{}=", n.replace('-', "_")))
        .map_err(err)?;
    let methods: Methods = method
        .parse()
        .map_err(|e: anyhow::Error| err(e.context("method=")))?;
    methods.check_capacity(given.as_deref()).map_err(err)?;
    let kind = parse_kind(kind).map_err(|e| err(e.context("kind=")))?;
    Ok((kind, methods, params))
}

/// Every stream through the chosen methods; one row per (stream, method).
/// (Python calls it with keywords: the arguments are the API.)
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (send_ns, recv_ns, size_bytes, stream_id, kind, method, params=None))]
fn analyze<'py>(
    py: Python<'py>,
    send_ns: PyReadonlyArray1<'py, i64>,
    recv_ns: PyReadonlyArray1<'py, i64>,
    size_bytes: PyReadonlyArray1<'py, u32>,
    stream_id: PyReadonlyArray1<'py, u64>,
    kind: &str,
    method: &str,
    params: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (kind, methods, params) = analysis_args(kind, method, params)?;
    let (send, recv) = (slice(&send_ns, "send_ns")?, slice(&recv_ns, "recv_ns")?);
    let (size, ids) = (
        slice(&size_bytes, "size_bytes")?,
        slice(&stream_id, "stream_id")?,
    );
    let rows: PyResult<Vec<Analysis>> = py.detach(|| {
        let mut rows = Vec::new();
        let mut analyzer = StreamAnalyzer::new(kind, methods, params);
        for_each_stream(ids, size, send, recv, |s| {
            rows.extend(analyzer.push(s));
        })?;
        Ok(rows)
    });
    columns(py, &rows?)
}

/// A probe trace file analysed as `tightlink analyze` does it: the kind
/// and the tight link's capacity from its metadata unless given, notes on
/// the streams it lists as late or overflowed.
#[pyfunction]
#[pyo3(signature = (path, kind, method, params=None))]
fn analyze_trace<'py>(
    py: Python<'py>,
    path: PathBuf,
    kind: &str,
    method: &str,
    params: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (kind, methods, params) = analysis_args(kind, method, params)?;
    let rows: anyhow::Result<Vec<Analysis>> = py.detach(|| {
        let trace = tightlink_trace::read_path(&path)?;
        tightlink_measure::analyze::analyze_trace(&trace, kind, methods, &params)
            .with_context(|| path.display().to_string())
    });
    columns(py, &rows.map_err(err)?)
}

/// Packets of `streams` as columns (stream_id, seq, size_bytes, send_ns, recv_ns).
fn packet_columns<'py>(py: Python<'py>, streams: &[ProbeStream]) -> PyResult<Bound<'py, PyDict>> {
    let n: usize = streams.iter().map(|s| s.packets.len()).sum();
    let (mut id, mut seq, mut size, mut send, mut recv) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for s in streams {
        for (i, p) in s.packets.iter().enumerate() {
            id.push(s.id);
            seq.push(i as u32);
            size.push(p.size_bytes);
            send.push(p.send_ns);
            recv.push(p.recv_ns.unwrap_or(LOST));
        }
    }
    let d = PyDict::new(py);
    d.set_item("stream_id", id.into_pyarray(py))?;
    d.set_item("seq", seq.into_pyarray(py))?;
    d.set_item("size_bytes", size.into_pyarray(py))?;
    d.set_item("send_ns", send.into_pyarray(py))?;
    d.set_item("recv_ns", recv.into_pyarray(py))?;
    Ok(d)
}

/// Metadata pairs and packet columns.
type TraceColumns<'py> = (Vec<(String, String)>, Bound<'py, PyDict>);

/// A probe trace file (v1, plain or gzip): (metadata pairs, packet columns).
#[pyfunction]
fn read_trace<'py>(py: Python<'py>, path: PathBuf) -> PyResult<TraceColumns<'py>> {
    let trace = py
        .detach(|| tightlink_trace::read_path(&path))
        .map_err(|e| err(e.into()))?;
    Ok((trace.metadata.clone(), packet_columns(py, &trace.streams)?))
}

/// Writes packet columns as a probe trace (gzip when the name ends in .gz).
#[pyfunction]
fn write_trace(
    py: Python<'_>,
    path: PathBuf,
    stream_id: PyReadonlyArray1<'_, u64>,
    size_bytes: PyReadonlyArray1<'_, u32>,
    send_ns: PyReadonlyArray1<'_, i64>,
    recv_ns: PyReadonlyArray1<'_, i64>,
    metadata: Vec<(String, String)>,
) -> PyResult<()> {
    for (k, v) in &metadata {
        if k.is_empty() || k.contains(['=', '\n', '\r']) || v.contains(['\n', '\r']) {
            return Err(BadInputError::new_err(format!(
                "metadata {k:?}: keys are non-empty without '=' or line breaks, values without line breaks"
            )));
        }
    }
    let (ids, size) = (
        slice(&stream_id, "stream_id")?,
        slice(&size_bytes, "size_bytes")?,
    );
    let (send, recv) = (slice(&send_ns, "send_ns")?, slice(&recv_ns, "recv_ns")?);
    py.detach(|| {
        let streams = streams_from(ids, size, send, recv)?;
        tightlink_measure::write_trace(&path, metadata, &streams).map_err(err)
    })
}

/// Streams through the simulated path: (packet columns, truth columns, kind).
#[pyfunction]
#[pyo3(signature = (spec, streams, size_bytes, kind, rates_bps, packets, centre_bps, range, rates, per_rate, low_bps, high_bps, spread, jumbo, pairs, capacity_bps, mean_gap_s))]
#[allow(clippy::too_many_arguments)]
fn simulate<'py>(
    py: Python<'py>,
    spec: &str,
    streams: usize,
    size_bytes: u32,
    kind: &str,
    rates_bps: Vec<f64>,
    packets: usize,
    centre_bps: Option<f64>,
    range: f64,
    rates: usize,
    per_rate: usize,
    low_bps: Option<f64>,
    high_bps: Option<f64>,
    spread: f64,
    jumbo: usize,
    pairs: usize,
    capacity_bps: Option<f64>,
    mean_gap_s: f64,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
    let target = Target::parse(spec).map_err(err)?;
    let schedule = match kind {
        "single" => Schedule::Single { rates_bps, packets },
        "multi" => Schedule::Multi {
            centre_bps,
            range,
            rates,
            per_rate,
        },
        "chirp" => Schedule::Chirp {
            low_bps,
            high_bps,
            spread,
            jumbo,
        },
        "pairs" => Schedule::Pairs {
            pairs,
            capacity_bps,
            mean_gap_ns: mean_gap_s * 1e9,
        },
        k => {
            return Err(BadInputError::new_err(format!(
                "kind={k}: choose single, multi, chirp or pairs"
            )))
        }
    };
    let options = SimulateOptions {
        streams,
        size_bytes,
        schedule,
    };
    let sim = py.detach(|| sim_run(&target, &options)).map_err(err)?;
    let truth = PyDict::new(py);
    let t = |g: &dyn Fn(&tightlink_core::channel::GroundTruth) -> f64| -> Vec<f64> {
        sim.truths
            .iter()
            .map(|x| x.as_ref().map_or(f64::NAN, g))
            .collect()
    };
    truth.set_item(
        "stream_id",
        sim.streams
            .iter()
            .map(|s| s.id)
            .collect::<Vec<_>>()
            .into_pyarray(py),
    )?;
    truth.set_item("available_bps", t(&|g| g.available_bps).into_pyarray(py))?;
    truth.set_item("min_bps", t(&|g| g.min_bps).into_pyarray(py))?;
    truth.set_item("max_bps", t(&|g| g.max_bps).into_pyarray(py))?;
    Ok((packet_columns(py, &sim.streams)?, truth))
}

/// One `--follow` update as the dict `estimate --json-stream` prints in
/// its `update` events: the library's JSON of it, read by Python's own
/// `json`, so the two cannot drift apart.
fn update_dict<'py>(
    py: Python<'py>,
    u: &tightlink_measure::BartUpdate,
) -> PyResult<Bound<'py, PyAny>> {
    let text = tightlink_measure::text::update_event_json(u).to_string();
    py.import("json")?.call_method1("loads", (text,))
}

/// One closed-loop measurement of a target; the `--json` object as text.
/// With `follow`, `on_update` is called with each update's dict as the
/// tracker goes (its first exception ends the calls and is raised at
/// the end).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (target, method, max_streams, max_bytes, reverse, key_file, max_rate_bps, follow, interval_s, on_update, capacity_bps))]
fn estimate(
    py: Python<'_>,
    target: &str,
    method: &str,
    max_streams: usize,
    max_bytes: Option<u64>,
    reverse: bool,
    key_file: Option<PathBuf>,
    max_rate_bps: Option<f64>,
    follow: bool,
    interval_s: f64,
    on_update: Option<Py<PyAny>>,
    capacity_bps: Option<f64>,
) -> PyResult<String> {
    let method: Method = method
        .parse()
        .map_err(|e| BadInputError::new_err(format!("method={e}")))?;
    if !(interval_s.is_finite() && interval_s >= 0.0) {
        return Err(BadInputError::new_err(format!(
            "interval_s={interval_s}: expected seconds, at least 0"
        )));
    }
    let target = Target::parse(target).map_err(err)?;
    let options = EstimateOptions {
        method,
        max_streams,
        max_bytes,
        real: RealOptions {
            reverse,
            key_file,
            max_rate_bps,
            ..RealOptions::default()
        },
        follow,
        follow_interval_ns: (interval_s * 1e9) as i64,
        analysis: AnalysisParams {
            capacity_bps,
            ..Default::default()
        },
        ..EstimateOptions::default()
    };
    let mut failed: Option<PyErr> = None;
    let report = py
        .detach(|| {
            est_run(&target, &options, &mut |e| {
                let (tightlink_measure::Event::Update(u), Some(cb)) = (e, on_update.as_ref())
                else {
                    return;
                };
                if failed.is_some() {
                    return;
                }
                Python::attach(|py| {
                    if let Err(e) = update_dict(py, &u).and_then(|d| cb.call1(py, (d,))) {
                        failed = Some(e);
                    }
                });
            })
        })
        .map_err(err)?;
    if let Some(e) = failed {
        return Err(e);
    }
    serde_json::to_string(&report).map_err(|e| err(e.into()))
}

/// One transfer, as `tightlink transfer TARGET --json`: the report as
/// JSON text. `on_interval` is called with each interval's dict (the
/// `interval` event of `--json-stream`) as the transfer goes; its first
/// exception ends the calls and is raised at the end.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (target, cc, bytes, time_s, reverse, key_file, max_rate_bps, rtt_s, interval_s, seed, on_interval))]
fn transfer(
    py: Python<'_>,
    target: &str,
    cc: &str,
    bytes: Option<u64>,
    time_s: Option<f64>,
    reverse: bool,
    key_file: Option<PathBuf>,
    max_rate_bps: Option<f64>,
    rtt_s: f64,
    interval_s: f64,
    seed: u64,
    on_interval: Option<Py<PyAny>>,
) -> PyResult<String> {
    use tightlink_measure::transfer::TransferEvent;
    use tightlink_measure::transfer::{transfer as tr_run, Controller, TransferOptions};
    let controller: Controller = cc
        .parse()
        .map_err(|e| BadInputError::new_err(format!("cc={e}")))?;
    if bytes.is_some() && time_s.is_some() {
        return Err(BadInputError::new_err(
            "bytes= and time_s= together: give one (a size or a time)",
        ));
    }
    let seconds = |name: &str, v: f64, least: f64| -> PyResult<i64> {
        if v.is_finite() && v >= least {
            Ok((v * 1e9) as i64)
        } else {
            Err(BadInputError::new_err(format!(
                "{name}={v}: expected seconds, at least {least}"
            )))
        }
    };
    let duration_ns = match (bytes, time_s) {
        (None, None) => Some(10_000_000_000),
        (_, Some(t)) => Some(seconds("time_s", t, 0.001)?),
        (Some(_), None) => None,
    };
    let target = Target::parse(target).map_err(err)?;
    let options = TransferOptions {
        cc: controller,
        bytes,
        duration_ns,
        interval_ns: seconds("interval_s", interval_s, 0.01)?,
        real: RealOptions {
            reverse,
            key_file,
            max_rate_bps,
            ..RealOptions::default()
        },
        sim_rtt_ns: seconds("rtt_s", rtt_s, 0.0)?,
        sim_packet_bytes: tightlink_measure::transfer::SIM_PACKET_BYTES,
        seed,
    };
    let mut failed: Option<PyErr> = None;
    let report = py
        .detach(|| {
            tr_run(&target, &options, &mut |e| {
                let (TransferEvent::Interval(iv), Some(cb)) = (e, on_interval.as_ref()) else {
                    return;
                };
                if failed.is_some() {
                    return;
                }
                let Ok(text) = serde_json::to_string(iv) else {
                    return;
                };
                Python::attach(|py| {
                    let called = py
                        .import("json")
                        .and_then(|j| j.call_method1("loads", (text,)))
                        .and_then(|d| cb.call1(py, (d,)));
                    if let Err(e) = called {
                        failed = Some(e);
                    }
                });
            })
        })
        .map_err(err)?;
    if let Some(e) = failed {
        return Err(e);
    }
    serde_json::to_string(&report).map_err(|e| err(e.into()))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TightlinkError", m.py().get_type::<TightlinkError>())?;
    m.add("BadInputError", m.py().get_type::<BadInputError>())?;
    m.add("UnreachableError", m.py().get_type::<UnreachableError>())?;
    m.add("RefusedError", m.py().get_type::<RefusedError>())?;
    m.add("TimedOutError", m.py().get_type::<TimedOutError>())?;
    m.add("ProtocolError", m.py().get_type::<ProtocolError>())?;
    m.add("HostError", m.py().get_type::<HostError>())?;
    m.add("LOST", LOST)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_trace, m)?)?;
    m.add_function(wrap_pyfunction!(read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(write_trace, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(estimate, m)?)?;
    m.add_function(wrap_pyfunction!(transfer, m)?)?;
    Ok(())
}
