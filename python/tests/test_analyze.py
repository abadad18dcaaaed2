"""analyze() on hand-made arrays: answers worked out by hand, the errors
the command line gives, and the same rows as `tightlink analyze` on both
sample traces."""

import json
import math

import numpy as np
import pytest

import tightlink


def test_a_rate_above_the_available_bandwidth():
    # 100 packets of 9000 B sent 12 us apart (6 Gbit/s) arrive 14.4 us
    # apart (5 Gbit/s): the rate is above the available bandwidth, and the
    # receive rate is 8 * 9000 / 14.4 us = 5 Gbit/s.
    send = np.arange(100, dtype=np.int64) * 12_000
    recv = 50_000 + np.arange(100, dtype=np.int64) * 14_400
    r = tightlink.analyze(send, recv, 9000, method="prcmt+bass")
    assert r["decision"] == ["above"]
    assert r["method"] == ["prcmt+bass"]
    assert r["kind"] == ["single"]
    assert r["packets"][0] == 100 and r["received"][0] == 100
    assert r["recv_rate_bps"][0] == pytest.approx(5e9, rel=1e-9)
    assert r["avg_rate_bps"][0] == pytest.approx(6e9, rel=1e-9)


def test_a_rate_below_it_and_lost_packets():
    # Sent at 4 Gbit/s (18 us), received at the same spacing: below, by
    # Pathload's trend test (no trend in the one-way delays). Two packets
    # lost: marked LOST, counted as lost.
    send = np.arange(100, dtype=np.int64) * 18_000
    recv = 10_000 + send.copy()
    r = tightlink.analyze(send, recv, np.full(100, 9000), method="prcmt+bass")
    assert r["decision"] == ["below"]
    recv[[10, 50]] = tightlink.LOST
    r = tightlink.analyze(send, recv, np.full(100, 9000), method="pathload")
    assert r["decision"] == ["below"]
    assert r["received"][0] == 98


def test_streams_are_split_by_id_and_kept_in_order():
    send = np.tile(np.arange(50, dtype=np.int64) * 12_000, 3)
    recv = send + 1_000
    ids = np.repeat(np.array([7, 3, 9], dtype=np.uint64), 50)
    r = tightlink.analyze(send, recv, 9000, stream_id=ids, method="all")
    methods = len(set(r["method"]))
    assert methods >= 5
    assert list(r["stream_id"][::methods]) == [7, 3, 9]
    rows = tightlink.rows(r)
    assert len(rows) == 3 * methods
    assert all(isinstance(x["stream_id"], int) for x in rows)
    assert all(x["abw_bps"] is None or math.isfinite(x["abw_bps"]) for x in rows)


def test_bad_input_says_what_and_where():
    send = np.arange(10, dtype=np.int64)
    with pytest.raises(tightlink.TightlinkError, match="recv_ns has 9 elements, send_ns has 10"):
        tightlink.analyze(send, send[:9], 9000)
    with pytest.raises(tightlink.TightlinkError, match=r"stream_id\[4\] = 1 appears again"):
        tightlink.analyze(send, send, 9000, stream_id=[1, 1, 2, 2, 1, 1, 3, 3, 3, 3])
    with pytest.raises(tightlink.TightlinkError, match="colour: unknown parameter"):
        tightlink.analyze(send, send, 9000, colour="blue")
    # The library's checker, with Python's spelling of the setting.
    with pytest.raises(tightlink.TightlinkError, match="spike_up= -1: must be a number from 0 to 1000"):
        tightlink.analyze(send, send, 9000, spike_up=-1)
    with pytest.raises(tightlink.TightlinkError, match="guess: unknown; choose default, all"):
        tightlink.analyze(send, send, 9000, method="guess")
    with pytest.raises(tightlink.TightlinkError, match=r"size_bytes\[0\] is 0"):
        tightlink.analyze(send, send, 0)
    with pytest.raises(tightlink.TightlinkError, match="whole numbers"):
        tightlink.analyze(send.astype(float), np.full(10, np.nan), 9000)


@pytest.mark.parametrize("name", ["single-rate-10g.csv.gz", "multi-rate-10g.csv.gz"])
@pytest.mark.parametrize("method", ["default", "all"])
def test_the_same_answers_as_the_command_line(cli, samples, name, method):
    path = samples / name
    expected = json.loads(cli("analyze", str(path), "--format", "json", "--method", method).stdout)["results"]
    got = tightlink.rows(tightlink.analyze_trace(path, method=method))
    assert len(got) == len(expected) > 0
    for g, e in zip(got, expected):
        # JSON leaves out an empty per-rate list.
        if not g["per_rate"]:
            del g["per_rate"]
        assert g == e
