"""simulate() with its truth and estimate() with the command line's JSON."""

import json

import numpy as np
import pytest

import tightlink


def test_simulated_streams_come_with_their_truth():
    packets, truth = tightlink.simulate("sim:cross=cbr:3G,seed=4", streams=8)
    assert len(truth) == 8
    assert len(packets) == 8 * 5 * 64
    # 10 Gbit/s with 3 Gbit/s of constant cross traffic: 7 Gbit/s.
    assert np.allclose(truth["available_bps"], 7e9, rtol=0.01)
    r = tightlink.analyze_packets(packets, kind="multi", method="multirate")
    err = np.abs(r["abw_bps"] / truth["available_bps"] - 1)
    assert np.median(err) < 0.05, err
    again, _ = tightlink.simulate("sim:cross=cbr:3G,seed=4", streams=8)
    assert np.array_equal(again, packets), "one seed, one run"


def test_single_rate_streams():
    packets, truth = tightlink.simulate("sim:cross=cbr:3G", kind="single", rates_bps=[5e9, 9e9], packets=100, streams=2)
    r = tightlink.analyze_packets(packets, kind="single", method="prcmt+bass")
    assert r["decision"] == ["below", "above"]


def test_a_setting_of_another_kind_is_refused():
    # Multi-rate streams by default: a single-rate setting would shape nothing.
    with pytest.raises(tightlink.TightlinkError, match="packets shapes kind='single'"):
        tightlink.simulate("sim:", streams=1, packets=100)
    with pytest.raises(tightlink.TightlinkError, match="per_rate shapes kind='multi' streams, not kind='chirp'"):
        tightlink.simulate("sim:", streams=1, kind="chirp", per_rate=32)


def test_chirps_are_read_by_pathchirp():
    packets, truth = tightlink.simulate("sim:cross=cbr:3G,coalescence=off,seed=4", kind="chirp", streams=22)
    # 1 to 10 Gbit/s in steps of 1.2: 15 packets per chirp.
    assert len(packets) == 22 * 15
    r = tightlink.analyze_packets(packets)
    assert set(r["kind"]) == {"chirp"} and set(r["method"]) == {"pathchirp"}
    # pathChirp's answer is the mean over chirps. It reads this path 5-13 %
    # low (`tightlink estimate ... --method pathchirp`, seeds 1-6): its last
    # excursion often opens at a small rise the cross packets cause a step
    # or two before the chirp overtakes the path.
    mean = np.nanmean(r["abw_bps"])
    assert abs(mean / np.mean(truth["available_bps"]) - 1) < 0.15, mean


def test_jumbo_chirps_are_read_through_receive_batches():
    # 125 us coalescence: plain chirps give pathChirp nothing to read;
    # elements of 19 packets (each spans a batch at the top rate) do.
    spec = "sim:cross=cbr:2.4G,seed=4"
    plain, _ = tightlink.simulate(spec, kind="chirp", streams=12)
    assert np.all(np.isnan(tightlink.analyze_packets(plain)["abw_bps"]))
    packets, truth = tightlink.simulate(spec, kind="chirp", streams=12, jumbo=19)
    r = tightlink.analyze_packets(packets)
    assert set(r["kind"]) == {"chirp"}
    mean = np.nanmean(r["abw_bps"])
    assert abs(mean / np.mean(truth["available_bps"]) - 1) < 0.2, mean


def test_max_bytes_caps_the_probe_cost():
    capped = tightlink.estimate("sim:seed=1", max_bytes=6_000_000)
    assert capped["probe_bytes"] <= 6_000_000 and capped["stop"] == "budget"
    assert tightlink.estimate("sim:seed=1")["probe_bytes"] > 6_000_000


def test_estimate_is_the_command_line_s_json(cli):
    # Both defaults (the method too: `auto`, which runs scan-pba here).
    got = tightlink.estimate("sim:seed=3")
    want = json.loads(cli("estimate", "sim:seed=3", "--json").stdout)
    assert got["method"] == want["method"] == "scan-pba"
    for d in (got, want):
        del d["wall_s"]
    assert got == want


def test_the_queue_fit_strategy_takes_the_capacity(cli):
    # As `estimate --method queue-fit --capacity 10G`; without the
    # capacity it refuses to run.
    got = tightlink.estimate("sim:seed=4", method="queue-fit", capacity_bps=10e9)
    want = json.loads(cli("estimate", "sim:seed=4", "--method", "queue-fit",
                          "--capacity", "10G", "--json").stdout)
    for d in (got, want):
        del d["wall_s"]
    assert got == want
    assert got["bound"] == "exact"
    assert abs(got["available_bandwidth_bps"] / got["truth_bps"] - 1) < 0.1
    with pytest.raises(tightlink.TightlinkError, match="capacity"):
        tightlink.estimate("sim:seed=4", method="queue-fit")


@pytest.mark.parametrize("method", ["prcmt-pba", "scan-pba"])
def test_every_method_name_reaches_the_library(cli, method):
    # The bisections, added after the others: the name the command line
    # takes is the one Python takes, and the range holds the answer.
    got = tightlink.estimate("sim:seed=2", method=method)
    want = json.loads(cli("estimate", "sim:seed=2", "--method", method, "--json").stdout)
    for d in (got, want):
        del d["wall_s"]
    assert got == want
    assert got["method"] == method and got["bound"] == "exact"
    assert got["low_bps"] <= got["available_bandwidth_bps"] <= got["high_bps"]


def test_errors_carry_the_command_line_s_message(cli):
    with pytest.raises(tightlink.TightlinkError) as e:
        tightlink.estimate("sim:colour=blue")
    stderr = cli("estimate", "sim:colour=blue", check=False).stderr
    assert str(e.value) in stderr
    with pytest.raises(tightlink.TightlinkError, match="method="):
        tightlink.estimate(method="guess")


def test_errors_are_raised_by_kind(cli):
    # The subclass says whose move it is, as the command line's exit
    # status does (2 for bad input, 1 for a failed measurement).
    with pytest.raises(tightlink.BadInputError, match="unknown key 'colour'"):
        tightlink.estimate("sim:colour=blue")
    assert cli("estimate", "sim:colour=blue", check=False).returncode == 2
    with pytest.raises(tightlink.BadInputError, match="capacity"):
        tightlink.estimate("sim:seed=4", method="queue-fit")
    with pytest.raises(tightlink.BadInputError, match="method="):
        tightlink.estimate(method="guess")
    # Nothing listens on the discard port of this host.
    with pytest.raises(tightlink.UnreachableError, match="Connection refused") as e:
        tightlink.estimate("127.0.0.1:9")
    assert isinstance(e.value, tightlink.TightlinkError)
    assert cli("estimate", "127.0.0.1:9", check=False).returncode == 1


def test_numbers_that_are_no_setting_are_refused_by_name(cli):
    # A capacity of nothing or less would spend the whole probe budget
    # for no answer; a negative count would overflow without a name.
    for c in (0, -5e9, float("nan")):
        with pytest.raises(tightlink.BadInputError, match="capacity.*positive rate"):
            tightlink.estimate("sim:seed=4", method="queue-fit", capacity_bps=c)
    assert cli("estimate", "--method", "queue-fit", "--capacity", "0", check=False).returncode == 2
    with pytest.raises(tightlink.BadInputError, match="max_streams=-1"):
        tightlink.estimate(max_streams=-1)
    with pytest.raises(tightlink.BadInputError, match="max_bytes=2.5"):
        tightlink.estimate(max_bytes=2.5)
    with pytest.raises(tightlink.BadInputError, match="streams=-3"):
        tightlink.simulate(streams=-3)


def test_following_calls_back_once_per_stream(cli):
    seen = []
    r = tightlink.estimate("sim:cross=cbr:3G,seed=2", method="bart", follow=True,
                           max_streams=12, on_update=seen.append)
    assert [u["streams"] for u in seen] == list(range(1, 13))
    # The same updates `estimate --follow --json-stream` prints.
    lines = cli("estimate", "sim:cross=cbr:3G,seed=2", "--follow", "--max-streams", "12",
                "--json-stream").stdout.splitlines()
    want = [json.loads(l)["data"] for l in lines if json.loads(l)["event"] == "update"]
    assert seen == want
    # 10 Gbit/s less 3 Gbit/s of constant cross traffic.
    assert abs(seen[-1]["available_bandwidth_bps"] / 7e9 - 1) < 0.1, seen[-1]
    assert r["method"] == "bart"


def test_an_exception_in_the_callback_is_raised():
    def boom(u):
        raise ValueError("stop here")

    with pytest.raises(ValueError, match="stop here"):
        tightlink.estimate("sim:seed=2", method="bart", follow=True, max_streams=5, on_update=boom)


def test_pairs_are_read_by_spruce():
    packets, truth = tightlink.simulate("sim:cross=cbr:3G,coalescence=off,seed=4", kind="pairs", streams=10, pairs=10)
    assert len(packets) == 10 * 10 * 2
    # The pair's two packets a 10 Gbit/s gap apart: 9000 B in 7.2 us.
    gaps = packets["send_ns"][1::2] - packets["send_ns"][0::2]
    assert np.all(gaps == 7200)
    r = tightlink.analyze_packets(packets, kind="pairs", method="spruce", capacity_bps=10e9)
    assert set(r["method"]) == {"spruce"}
    mean = np.nanmean(r["abw_bps"])
    assert abs(mean / 7e9 - 1) < 0.15, mean


def test_multi_rate_streams_are_read_by_the_queue_fit_given_the_capacity():
    packets, truth = tightlink.simulate("sim:cross=smoothed:2.5G,seed=5", streams=10, centre_bps=7.5e9)
    r = r_fit = tightlink.analyze_packets(packets, kind="multi", method="queue-fit", capacity_bps=10e9)
    assert set(r["method"]) == {"queue-fit"}
    exact = np.array(r["bound"]) == "exact"
    err = np.abs(r["abw_bps"][exact] / truth["available_bps"][exact] - 1)
    assert exact.sum() >= 9 and np.all(err < 0.1), (r, truth)
    # Without the capacity it answers nothing.
    r = tightlink.analyze_packets(packets, kind="multi", method="queue-fit")
    assert set(r["bound"]) == {"none"}
    # multirate meets the queue fit halfway where both answer a number.
    alone = tightlink.analyze_packets(packets, kind="multi", method="multirate")
    met = tightlink.analyze_packets(packets, kind="multi", method="multirate", capacity_bps=10e9)
    both = exact & (np.array(alone["bound"]) == "exact")
    assert both.sum() >= 9
    halfway = (alone["abw_bps"][both] + r_fit["abw_bps"][both]) / 2
    assert np.allclose(met["abw_bps"][both], halfway, rtol=1e-12)
    # A method that never reads the capacity refuses it, as the CLI does.
    with pytest.raises(tightlink.TightlinkError, match="capacity_bps=10000000000.0: topp does not read"):
        tightlink.analyze_packets(packets, kind="multi", method="topp", capacity_bps=10e9)


def test_a_trace_s_capacity_is_read_from_its_metadata(tmp_path):
    packets, _ = tightlink.simulate("sim:cross=smoothed:2.5G,seed=5", streams=3, centre_bps=7.5e9)
    path = tmp_path / "t.csv"
    tightlink.write_trace(path, packets, metadata={"capacity_bps": "10000000000"})
    r = tightlink.analyze_trace(path, method="queue-fit")
    assert set(r["bound"]) == {"exact"} and np.all(r["capacity_bps"] == 10e9)
    # A capacity given wins over the trace's.
    r = tightlink.analyze_trace(path, method="queue-fit", capacity_bps=12e9)
    assert np.all(r["capacity_bps"] == 12e9)
    tightlink.write_trace(path, packets, metadata={"capacity_bps": "fast"})
    with pytest.raises(tightlink.TightlinkError, match="metadata capacity_bps=fast: must be a positive rate"):
        tightlink.analyze_trace(path, method="queue-fit")


def test_follow_tracks_with_bart_unless_told_otherwise():
    """As ``estimate --follow``: no method given means ``bart``."""
    updates = []
    r = tightlink.estimate("sim:", follow=True, max_streams=5, on_update=updates.append)
    assert r["method"] == "bart"
    assert len(updates) == 5
    with pytest.raises(tightlink.TightlinkError, match="bart"):
        tightlink.estimate("sim:", follow=True, method="auto", max_streams=5)
