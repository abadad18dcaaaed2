from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

LOST: int
__version__: str

class TightlinkError(Exception): ...
class BadInputError(TightlinkError): ...
class UnreachableError(TightlinkError): ...
class RefusedError(TightlinkError): ...
class TimedOutError(TightlinkError): ...
class ProtocolError(TightlinkError): ...
class HostError(TightlinkError): ...

def analyze(
    send_ns: np.ndarray,
    recv_ns: np.ndarray,
    size_bytes: np.ndarray,
    stream_id: np.ndarray,
    kind: str,
    method: str,
    params: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]: ...
def read_trace(path: str) -> Tuple[List[Tuple[str, str]], Dict[str, np.ndarray]]: ...
def write_trace(
    path: str,
    stream_id: np.ndarray,
    size_bytes: np.ndarray,
    send_ns: np.ndarray,
    recv_ns: np.ndarray,
    metadata: List[Tuple[str, str]],
) -> None: ...
def simulate(
    spec: str,
    streams: int,
    size_bytes: int,
    kind: str,
    rates_bps: List[float],
    packets: int,
    centre_bps: Optional[float],
    range: float,
    rates: int,
    per_rate: int,
    low_bps: Optional[float],
    high_bps: Optional[float],
    spread: float,
    jumbo: int,
    pairs: int,
    capacity_bps: Optional[float],
    mean_gap_s: float,
) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]: ...
def estimate(
    target: str,
    method: str,
    max_streams: int,
    max_bytes: Optional[int],
    reverse: bool,
    key_file: Optional[str],
    max_rate_bps: Optional[float],
    follow: bool,
    interval_s: float,
    on_update: Optional[Callable[[Dict[str, Any]], Any]],
    capacity_bps: Optional[float],
) -> str: ...
def transfer(
    target: str,
    cc: str,
    bytes: Optional[int],
    time_s: Optional[float],
    reverse: bool,
    key_file: Optional[str],
    max_rate_bps: Optional[float],
    rtt_s: float,
    interval_s: float,
    seed: int,
    on_interval: Optional[Callable[[Dict[str, Any]], Any]],
) -> str: ...
