"""tightlink: available bandwidth of network paths at 1-100 Gbit/s.

The estimators of the Rust library on numpy arrays, probe trace files as
numpy structured arrays, the simulated path with its ground truth, and
measurements of real targets, all through the library the command line
uses (the same answers, the same error messages).

    import numpy as np, tightlink
    send = np.arange(100) * 12_000                  # 9000 B every 12 us: 6 Gbit/s
    recv = 50_000 + np.arange(100) * 14_400         # arriving at 5 Gbit/s
    r = tightlink.analyze(send, recv, 9000, method="prcmt+bass")
    r["decision"]                                   # ['above']
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._native import (
    LOST,
    BadInputError,
    HostError,
    ProtocolError,
    RefusedError,
    TightlinkError,
    TimedOutError,
    UnreachableError,
)

__all__ = [
    "LOST",
    "PACKET_DTYPE",
    "BadInputError",
    "HostError",
    "ProtocolError",
    "RefusedError",
    "TightlinkError",
    "TimedOutError",
    "UnreachableError",
    "analyze",
    "analyze_trace",
    "estimate",
    "read_trace",
    "rows",
    "simulate",
    "transfer",
    "write_trace",
]

__version__ = _native.__version__

#: One probe packet, as `read_trace` and `simulate` return them and
#: `write_trace` and `analyze_packets` take them; `recv_ns` is `LOST` for a
#: lost packet.
PACKET_DTYPE = np.dtype(
    [
        ("stream_id", np.uint64),
        ("seq", np.uint32),
        ("size_bytes", np.uint32),
        ("send_ns", np.int64),
        ("recv_ns", np.int64),
    ]
)

#: Ground truth per simulated stream.
TRUTH_DTYPE = np.dtype(
    [
        ("stream_id", np.uint64),
        ("available_bps", np.float64),
        ("min_bps", np.float64),
        ("max_bps", np.float64),
    ]
)

ArrayLike = Union[np.ndarray, Sequence[int]]


def _whole(name: str, value: Any, least: int = 0) -> Any:
    """`value` if it is a whole number of at least `least` (or None);
    otherwise `BadInputError` naming the parameter (the native layer would
    raise an `OverflowError` that names nothing)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise BadInputError(f"{name}={value!r}: expected a whole number")
    if value < least or value >= 2**64:
        raise BadInputError(f"{name}={value}: expected a whole number from {least} up")
    return int(value)


def _column(x: Any, dtype: Any, name: str, n: Optional[int] = None) -> np.ndarray:
    """A contiguous 1-D array of `dtype`: no copy when `x` already is one."""
    if n is not None and np.ndim(x) == 0:
        return np.full(n, x, dtype=dtype)
    a = np.asarray(x)
    if a.ndim != 1:
        raise BadInputError(f"{name}: expected a 1-D array, got {a.ndim} dimensions")
    if a.dtype != dtype:
        if a.dtype.kind == "f" and np.dtype(dtype).kind in "iu":
            if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
                raise BadInputError(f"{name}: times and sizes are whole numbers (use LOST for a lost packet)")
        a = a.astype(dtype)
    return np.ascontiguousarray(a)


def analyze(
    send_ns: ArrayLike,
    recv_ns: ArrayLike,
    size_bytes: Union[int, ArrayLike],
    *,
    stream_id: Optional[ArrayLike] = None,
    kind: str = "auto",
    method: str = "default",
    **params: Any,
) -> Dict[str, Any]:
    """Analyses probe streams given as arrays, one element per packet.

    send_ns, recv_ns: int64 nanoseconds (sender's and receiver's clock);
    ``recv_ns`` is ``LOST`` for a lost packet. size_bytes: one size for
    every packet or one per packet. stream_id: the stream of each packet
    (a stream's packets contiguous); all one stream when left out.
    kind: ``auto`` (from the send gaps), ``single``, ``multi``, ``chirp`` or
    ``pairs``.
    method: ``default`` (the best for each stream's kind), ``all``, or a
    method name (``prcmt``, ``prcmt+bass``, ``pathload``, ``imr-avg``,
    ``imr-wavelet``, ``multirate``, ``multirate-single-pass``,
    ``multirate-prcmt-dp1``, ``multirate-prcmt-dp2``, ``topp``,
    ``pathchirp``, ``bart``: a Kalman filter carried across the streams in
    their order, each row its answer after that stream; ``igi``: IGI's
    estimate, with PTR as ``recv_rate_bps``; ``spruce`` for streams of
    packet pairs; ``queue-fit``: the fluid queue fitted to a multi-rate
    stream's delays, given ``capacity_bps``).
    params: ``spike_up``, ``spike_down``, ``tolerance``, ``imr_window``,
    ``window``, ``max_passes``, ``consistency``, ``capacity_bps`` (the
    tight link's capacity: ``queue-fit`` needs it, ``igi`` and ``spruce``
    take it over their own reading, ``multirate`` meets the queue fit
    halfway with it), as `tightlink analyze`'s flags.

    Returns one row per (stream, method) in columns: numpy arrays for
    numbers (NaN where a method gives none), lists for text; the fields of
    ``tightlink analyze --format json``'s results. ``rows()`` turns them
    into that list of dicts.
    """
    send = _column(send_ns, np.int64, "send_ns")
    n = len(send)
    recv = _column(recv_ns, np.int64, "recv_ns")
    size = _column(size_bytes, np.uint32, "size_bytes", n)
    ids = np.zeros(n, dtype=np.uint64) if stream_id is None else _column(stream_id, np.uint64, "stream_id")
    return _native.analyze(send, recv, size, ids, kind, method, params)


def analyze_packets(packets: np.ndarray, *, kind: str = "auto", method: str = "default", **params: Any) -> Dict[str, Any]:
    """`analyze` on a structured array of `PACKET_DTYPE` (as `read_trace` returns)."""
    return analyze(
        packets["send_ns"],
        packets["recv_ns"],
        packets["size_bytes"],
        stream_id=packets["stream_id"],
        kind=kind,
        method=method,
        **params,
    )


def analyze_trace(path: Union[str, os.PathLike], *, kind: str = "auto", method: str = "default", **params: Any) -> Dict[str, Any]:
    """Analyses a probe trace file as `tightlink analyze` does: ``kind="auto"``
    takes the trace's ``# stream_kinds=`` metadata, else each stream's send
    gaps; the tight link's capacity is ``capacity_bps`` if given, else the
    trace's ``# capacity_bps=``; streams the trace lists as late or
    overflowed carry a note. Columns as `analyze` returns them."""
    return _native.analyze_trace(os.fspath(path), kind, method, params)


def rows(columns: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Columns from `analyze` as a list of dicts, NaN as None: the rows of
    ``tightlink analyze --format json``."""
    n = len(columns["stream_id"])
    out = []
    for i in range(n):
        row: Dict[str, Any] = {}
        for k, v in columns.items():
            x = v[i]
            if isinstance(x, np.generic):
                x = x.item()
            if isinstance(x, float) and x != x:
                x = None
            if k == "per_rate":
                x = [{"rate_bps": r, "decision": d} for r, d in x]
            row[k] = x
        out.append(row)
    return out


def _packets(cols: Mapping[str, np.ndarray]) -> np.ndarray:
    a = np.empty(len(cols["stream_id"]), dtype=PACKET_DTYPE)
    for name in PACKET_DTYPE.names:
        a[name] = cols[name]
    return a


def read_trace(path: Union[str, os.PathLike]) -> Tuple[np.ndarray, Dict[str, str]]:
    """A probe trace file (format v1, plain or gzip): its packets as a
    structured array of `PACKET_DTYPE` and its ``# key=value`` metadata."""
    meta, cols = _native.read_trace(os.fspath(path))
    return _packets(cols), dict(meta)


def write_trace(path: Union[str, os.PathLike], packets: np.ndarray, metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes packets (a structured array with PACKET_DTYPE's fields; ``seq``
    is ignored and rewritten as each packet's place in its stream) as a probe
    trace, gzip when the name ends in ``.gz``."""
    names = set(packets.dtype.names or ())
    missing = {"stream_id", "size_bytes", "send_ns", "recv_ns"} - names
    if missing:
        raise BadInputError(f"packets: missing fields {sorted(missing)}")
    _native.write_trace(
        os.fspath(path),
        _column(packets["stream_id"], np.uint64, "stream_id"),
        _column(packets["size_bytes"], np.uint32, "size_bytes"),
        _column(packets["send_ns"], np.int64, "send_ns"),
        _column(packets["recv_ns"], np.int64, "recv_ns"),
        [(str(k), str(v)) for k, v in (metadata or {}).items()],
    )


def simulate(
    spec: str = "sim:",
    *,
    streams: int = 20,
    size_bytes: int = 9000,
    kind: str = "multi",
    rates_bps: Optional[Sequence[float]] = None,
    packets: Optional[int] = None,
    centre_bps: Optional[float] = None,
    range: Optional[float] = None,
    rates: Optional[int] = None,
    per_rate: Optional[int] = None,
    low_bps: Optional[float] = None,
    high_bps: Optional[float] = None,
    spread: Optional[float] = None,
    jumbo: Optional[int] = None,
    pairs: Optional[int] = None,
    capacity_bps: Optional[float] = None,
    mean_gap_s: Optional[float] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """Streams through the simulated path `spec` (the grammar of
    ``tightlink estimate sim:...``): multi-rate streams (``rates`` rates over
    ``centre_bps * (1 +- range)``, the path's nominal available bandwidth by
    default, ``per_rate`` packets each) or single-rate ones (``packets`` at
    each of ``rates_bps`` in turn) or chirps (``kind="chirp"``: gaps from
    ``low_bps`` shrinking by ``spread`` up to ``high_bps``; by default a
    tenth of the sender's link rate to all of it; ``jumbo`` packets per
    chirp element, back to back, as pathChirp's ``-J``) or Spruce's packet pairs
    (``kind="pairs"``: ``pairs`` per stream, each a ``capacity_bps`` gap
    apart, the path's narrow link by default, pair starts exponentially
    spread with mean ``mean_gap_s``). Returns the packets (`PACKET_DTYPE`) and
    the ground truth per stream (`TRUTH_DTYPE`; NaN where fewer than two
    packets arrived). Defaults: ``packets=64``, ``range=0.3``, ``rates=5``,
    ``per_rate=64``, ``spread=1.2``, ``jumbo=1``, ``pairs=10``,
    ``mean_gap_s=0.01``. A setting of another kind than ``kind`` raises
    `BadInputError` (it would shape nothing)."""
    given = {
        "single": {"rates_bps": rates_bps, "packets": packets},
        "multi": {"centre_bps": centre_bps, "range": range, "rates": rates, "per_rate": per_rate},
        "chirp": {"low_bps": low_bps, "high_bps": high_bps, "spread": spread, "jumbo": jumbo},
        "pairs": {"pairs": pairs, "capacity_bps": capacity_bps, "mean_gap_s": mean_gap_s},
    }
    for k, settings in given.items():
        stray = [name for name, v in settings.items() if v is not None]
        if k != kind and kind in given and stray:
            raise BadInputError(f"{stray[0]} shapes kind={k!r} streams, not kind={kind!r}")
    def default(v, d):
        return d if v is None else v
    for name, v in [("streams", streams), ("size_bytes", size_bytes), ("packets", packets),
                    ("rates", rates), ("per_rate", per_rate), ("jumbo", jumbo), ("pairs", pairs)]:
        _whole(name, v)
    cols, truth = _native.simulate(
        spec,
        streams,
        size_bytes,
        kind,
        [float(r) for r in default(rates_bps, ())],
        default(packets, 64),
        centre_bps,
        default(range, 0.3),
        default(rates, 5),
        default(per_rate, 64),
        low_bps,
        high_bps,
        default(spread, 1.2),
        default(jumbo, 1),
        default(pairs, 10),
        capacity_bps,
        default(mean_gap_s, 0.01),
    )
    t = np.empty(len(truth["stream_id"]), dtype=TRUTH_DTYPE)
    for name in TRUTH_DTYPE.names:
        t[name] = truth[name]
    return _packets(cols), t


def estimate(
    target: str = "sim:",
    *,
    method: Optional[str] = None,
    max_streams: int = 60,
    max_bytes: Optional[int] = None,
    reverse: bool = False,
    key_file: Optional[Union[str, os.PathLike]] = None,
    max_rate_bps: Optional[float] = None,
    follow: bool = False,
    interval_s: float = 0.0,
    on_update: Optional[Callable[[Dict[str, Any]], Any]] = None,
    capacity_bps: Optional[float] = None,
) -> Dict[str, Any]:
    """One closed-loop measurement, as ``tightlink estimate TARGET --json``:
    the same dict. TARGET: ``sim:...`` (the simulated path), ``HOST[:PORT]``
    (a tightlink server), ``twamp:HOST`` (a TWAMP-light or STAMP reflector),
    ``trace:FILE`` (a saved run replayed).

    ``max_bytes`` caps the probe bytes (``--max-bytes``; the default
    budget is 100 MB).

    ``method``: ``"auto"`` by default, ``"bart"`` with ``follow=True``.

    ``follow=True`` tracks the available bandwidth with ``bart`` for
    ``max_streams`` streams, one every ``interval_s`` (0: back to back), as
    ``estimate --follow``; ``on_update`` is called with each update (the
    dict of ``--json-stream``'s ``update`` events) as it comes.

    ``capacity_bps``: the tight link's capacity when known
    (``--capacity``); ``method="queue-fit"`` needs it, ``igi``, ``ptr``
    and ``spruce`` use it, the other methods refuse it."""
    if method is None:
        method = "bart" if follow else "auto"
    _whole("max_streams", max_streams)
    _whole("max_bytes", max_bytes)
    text = _native.estimate(
        target,
        method,
        max_streams,
        max_bytes,
        reverse,
        None if key_file is None else os.fspath(key_file),
        max_rate_bps,
        follow,
        interval_s,
        on_update,
        capacity_bps,
    )
    return json.loads(text)


def transfer(
    target: str = "sim:",
    *,
    cc: str = "rapid",
    bytes: Optional[int] = None,
    time_s: Optional[float] = None,
    reverse: bool = False,
    key_file: Optional[Union[str, os.PathLike]] = None,
    max_rate_bps: Optional[float] = None,
    rtt_s: float = 0.03,
    interval_s: float = 0.5,
    seed: int = 1,
    on_interval: Optional[Callable[[Dict[str, Any]], Any]] = None,
) -> Dict[str, Any]:
    """One rate-controlled bulk transfer, as ``tightlink transfer TARGET
    --json``: the same dict (goodput, losses, the controller's estimates,
    RTT, per-interval rows, the SHA-256 both ends checked). ``cc``:
    ``rapid`` (BASS smoothing), ``rapid-raw``, ``bbe`` (TCP Westwood BBE's
    window; not with ``reverse``), and on ``sim:`` also ``newreno``; ``bytes`` or ``time_s``
    (10 s when neither); ``reverse``: the server sends. On ``sim:`` the
    flow runs through the simulated path with ``rtt_s``. ``on_interval`` is
    called with each ``interval_s`` row (the ``interval`` event of
    ``--json-stream``) as the transfer goes."""
    _whole("bytes", bytes)
    _whole("seed", seed)
    text = _native.transfer(
        target,
        cc,
        bytes,
        time_s,
        reverse,
        None if key_file is None else os.fspath(key_file),
        max_rate_bps,
        rtt_s,
        interval_s,
        seed,
        on_interval,
    )
    return json.loads(text)
