"""Probe traces as numpy structured arrays: read, written, read again; the
reader's errors name file and line."""

import numpy as np
import pytest

import tightlink


def test_a_sample_trace_round_trips(samples, tmp_path):
    packets, meta = tightlink.read_trace(samples / "multi-rate-10g.csv.gz")
    assert packets.dtype == tightlink.PACKET_DTYPE
    assert len(packets) > 1000
    assert meta.get("stream_kinds") == "multi"
    lost = packets["recv_ns"] == tightlink.LOST
    for name in ["copy.csv", "copy.csv.gz"]:
        out = tmp_path / name
        tightlink.write_trace(out, packets, meta)
        again, meta2 = tightlink.read_trace(out)
        assert meta2 == meta
        assert np.array_equal(again, packets)
        assert np.array_equal(again["recv_ns"] == tightlink.LOST, lost)
    assert (tmp_path / "copy.csv.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_reader_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("stream_id,seq,size_bytes,send_ns,recv_ns\n0,0,9000,0,10\n0,1,9000,x,20\n")
    with pytest.raises(tightlink.TightlinkError, match=r"bad\.csv:3"):
        tightlink.read_trace(bad)
    with pytest.raises(tightlink.TightlinkError, match="no-such-file"):
        tightlink.read_trace(tmp_path / "no-such-file.csv")
    p = np.zeros(3, dtype=tightlink.PACKET_DTYPE)
    with pytest.raises(tightlink.TightlinkError, match="metadata"):
        tightlink.write_trace(tmp_path / "x.csv", p, {"a=b": "c"})


def test_writing_into_a_missing_folder_says_write(tmp_path):
    packets = np.zeros(2, dtype=tightlink.PACKET_DTYPE)
    packets["size_bytes"] = 1000
    packets["send_ns"] = [0, 1000]
    path = tmp_path / "no-such-folder" / "x.trace"
    with pytest.raises(tightlink.TightlinkError, match="cannot write .*x.trace"):
        tightlink.write_trace(path, packets)
