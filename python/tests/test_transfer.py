"""transfer() with the command line's JSON, on the simulated path and to a
real server on loopback, both ways."""

import json
import socket
import subprocess
import time

import pytest

import tightlink


def test_a_simulated_transfer_is_the_command_line_s_json(cli):
    got = tightlink.transfer("sim:", time_s=1.0, seed=5)
    want = json.loads(cli("transfer", "sim:", "--time", "1s", "--seed", "5", "--json").stdout)
    assert got == want
    assert got["cc"] == "rapid" and not got["reverse"]
    # Rapid takes most of what the simulator leaves it, never more than
    # the path carries.
    assert 0.3 < got["goodput_bps"] / got["available_bps"] < 1.05


def test_window_controllers_run_on_the_simulated_path(cli):
    path = "sim:hops=10G+1G,cross=none,loss=0.1%"
    bbe = tightlink.transfer(path, cc="bbe", time_s=5.0)
    want = json.loads(cli("transfer", path, "--cc", "bbe", "--time", "5s", "--json").stdout)
    assert bbe == want
    reno = tightlink.transfer(path, cc="newreno", time_s=5.0)
    assert bbe["cc"] == "bbe" and reno["cc"] == "newreno"
    # Random losses on an empty pipe: BBE keeps its window, NewReno halves.
    assert bbe["goodput_bps"] > 2 * reno["goodput_bps"]
    with pytest.raises(tightlink.TightlinkError, match="the simulator's model"):
        tightlink.transfer("127.0.0.1:9", cc="newreno", time_s=1.0)


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(tightlink.TightlinkError, match="cc=guess: expected rapid, rapid-raw, bbe or newreno"):
        tightlink.transfer(cc="guess")
    with pytest.raises(tightlink.TightlinkError, match="bytes= and time_s="):
        tightlink.transfer(bytes=1000, time_s=1.0)
    with pytest.raises(tightlink.TightlinkError, match="-R"):
        tightlink.transfer("sim:", reverse=True, time_s=0.1)


@pytest.fixture()
def server(cli):
    """A `tightlink server` on a free loopback port."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    path = cli("--version").args[0]
    p = subprocess.Popen([path, "server", "--bind", "127.0.0.1", "--port", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        p.kill()
        p.wait()


def test_a_real_transfer_arrives_whole_both_ways(server):
    up = tightlink.transfer(server, bytes=5_000_000, max_rate_bps=300e6, seed=9)
    down = tightlink.transfer(server, bytes=5_000_000, max_rate_bps=300e6, seed=9, reverse=True)
    for r in (up, down):
        assert r["bytes"] == 5_000_000
        assert r["sent_packets"] >= r["bytes"] / 9000
        assert len(r["sha256"]) == 64
    assert down["reverse"] and not up["reverse"]
    # The same seeded bytes, whoever sent them.
    assert up["sha256"] == down["sha256"]


def test_bbe_sends_to_a_real_server(server):
    r = tightlink.transfer(server, cc="bbe", bytes=5_000_000, max_rate_bps=300e6, seed=9)
    assert r["cc"] == "bbe" and r["bytes"] == 5_000_000 and len(r["sha256"]) == 64
    # The server's limit and the rate asked for hold the window's pacing.
    assert r["goodput_bps"] <= 300e6
    with pytest.raises(tightlink.TightlinkError, match="a server sends with Rapid only"):
        tightlink.transfer(server, cc="bbe", bytes=1_000_000, reverse=True)


def test_intervals_come_as_the_transfer_goes(server):
    rows = []
    r = tightlink.transfer(server, time_s=1.0, max_rate_bps=100e6, interval_s=0.2, on_interval=rows.append)
    assert rows == r["intervals"]
    assert len(rows) >= 4
    assert all(x["end_s"] > x["start_s"] for x in rows)
