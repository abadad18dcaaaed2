#!/usr/bin/env python3
"""A mesh of six sites in network namespaces, measured by their agents
with and without the mesh's schedule: the self-interference coordination
removes.

Sites s1-s3 sit behind router L, s4-s6 behind router R; L and R are
joined by one link shaped to 200 Mbit/s each way (tbf), which iperf3 UDP
cross traffic loads at 60 Mbit/s each way. Every site runs a tightlink
server and an agent that measures every other site. 18 of the 30 ordered
pairs cross the shaped link.

- uncoordinated: each agent watches the other five sites on its own
  timer (the same interval everywhere, agents started together, as a
  site-by-site deployment of one config does);
- coordinated: every agent reads one mesh file that declares the shared
  link, and takes its turns of the schedule.

Truth for a crossing measurement: the link's rate minus what the cross
traffic offered over the measurement's window, from the router's
interface counters (sampled every 100 ms). Prints, per mode, the median
and p90 |error| of the crossing measurements and how many overlapped
another one on the shaped link in the same direction, then the same per
path.

    sudo scripts/lab-mesh.py [--minutes 4] [--modes uncoordinated,coordinated]

Root only; the namespaces (prefix tlm-) are removed at exit.
"""

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

RATE_BPS = 200e6
CROSS = "60M"
LEFT, RIGHT = ["s1", "s2", "s3"], ["s4", "s5", "s6"]
SITES = LEFT + RIGHT
PERIOD_S, SLOT_S = 60, 3


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def ns(name, *args, **kw):
    return sh("ip", "netns", "exec", f"tlm-{name}", *args, **kw)


def ip_of(site):
    return f"10.88.{SITES.index(site) + 1}.2"


def down():
    for n in sh("ip", "netns", "list", check=False).stdout.split("\n"):
        n = n.split(" ")[0]
        if n.startswith("tlm-"):
            for pid in sh("ip", "netns", "pids", n, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            sh("ip", "netns", "del", n, check=False)


def veth(a, a_if, a_ip, b, b_if, b_ip):
    sh("ip", "link", "add", a_if, "netns", f"tlm-{a}", "type", "veth",
       "peer", "name", b_if, "netns", f"tlm-{b}")
    for n, i, addr in [(a, a_if, a_ip), (b, b_if, b_ip)]:
        ns(n, "ip", "addr", "add", addr, "dev", i)
        ns(n, "ip", "link", "set", i, "up")


def up():
    for n in ["l", "r", "x1", "x2"] + SITES:
        sh("ip", "netns", "add", f"tlm-{n}")
        ns(n, "ip", "link", "set", "lo", "up")
    for r in ["l", "r"]:
        ns(r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    veth("l", "core", "10.88.100.1/30", "r", "core", "10.88.100.2/30")
    hosts = [(s, "l" if s in LEFT else "r", SITES.index(s) + 1) for s in SITES]
    hosts += [("x1", "l", 11), ("x2", "r", 12)]
    for h, router, k in hosts:
        veth(h, "eth0", f"10.88.{k}.2/24", router, f"to{h}", f"10.88.{k}.1/24")
        ns(h, "ip", "route", "add", "default", "via", f"10.88.{k}.1")
        other = "r" if router == "l" else "l"
        via = "10.88.100.1" if router == "l" else "10.88.100.2"
        ns(other, "ip", "route", "add", f"10.88.{k}.0/24", "via", via)
    for r in ["l", "r"]:
        ns(r, "tc", "qdisc", "add", "dev", "core", "root", "tbf", "rate", "200mbit",
           "burst", "3000", "limit", "150000")


class Counters:
    """Cross traffic offered into each router (its x interface's receive
    bytes), sampled every 100 ms: (unix s, bytes x1 -> L, bytes x2 -> R)."""

    def __init__(self):
        self.samples = []
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    @staticmethod
    def rx(router, dev):
        out = ns(router, "ip", "-s", "-j", "link", "show", dev).stdout
        return json.loads(out)[0]["stats64"]["rx"]["bytes"]

    def run(self):
        while not self.stop:
            t = time.time()
            self.samples.append((t, self.rx("l", "tox1"), self.rx("r", "tox2")))
            time.sleep(max(0.0, 0.1 - (time.time() - t)))

    def cross_bps(self, start, end, k):
        inside = [s for s in self.samples if start - 0.1 <= s[0] <= end + 0.1]
        if len(inside) < 2:
            return None
        a, b = inside[0], inside[-1]
        return (b[k] - a[k]) * 8 / (b[0] - a[0])


def start_everything(work, mode, bin_):
    procs = []
    for s in SITES:
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", f"tlm-{s}", bin_, "server", "--bind", ip_of(s)],
            stdout=subprocess.DEVNULL, stderr=open(f"{work}/server-{s}.log", "w")))
    mesh = f"period = \"{PERIOD_S}s\"\nslot = \"{SLOT_S}s\"\n"
    for s in SITES:
        mesh += f"\n[[site]]\nname = \"{s}\"\naddress = \"{ip_of(s)}\"\n"
    mesh += "\n[[bottleneck]]\nname = \"core\"\nsites = [\"s1\", \"s2\", \"s3\"]\n"
    with open(f"{work}/mesh.toml", "w") as f:
        f.write(mesh)
    time.sleep(0.5)
    for s in SITES:
        cfg = f"listen = \"off\"\ndatabase = \"{work}/{mode}-{s}.db\"\n"
        if mode == "coordinated":
            cfg += f"mesh = \"mesh.toml\"\nsite = \"{s}\"\n"
        else:
            cfg += f"interval = \"{PERIOD_S}s\"\ntimeout = \"{SLOT_S}s\"\n"
            for t in SITES:
                if t != s:
                    cfg += f"\n[[target]]\nname = \"{t}\"\ntarget = \"{ip_of(t)}\"\n"
        with open(f"{work}/{mode}-{s}.toml", "w") as f:
            f.write(cfg)
    for s in SITES:
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", f"tlm-{s}", bin_, "agent", "--config",
             f"{work}/{mode}-{s}.toml"],
            stdout=subprocess.DEVNULL, stderr=open(f"{work}/agent-{mode}-{s}.log", "w")))
    return procs


def rows(work, mode):
    out = []
    for s in SITES:
        db = sqlite3.connect(f"{work}/{mode}-{s}.db")
        for name, start_ns, wall, ok, abw, bound in db.execute(
                "select name, started_unix_ns, wall_s, ok, available_bps, bound from results"):
            out.append(dict(frm=s, to=name, start=start_ns / 1e9, end=start_ns / 1e9 + wall,
                            ok=ok, abw=abw, bound=bound))
    return out


def crosses(r):
    return (r["frm"] in LEFT) != (r["to"] in LEFT)


def analyse(mode, rs, counters):
    crossing = [r for r in rs if crosses(r)]
    for r in crossing:
        k = 1 if r["frm"] in LEFT else 2
        cross = counters.cross_bps(r["start"], r["end"], k)
        r["truth"] = None if cross is None else RATE_BPS - cross
        same_way = [o for o in crossing if o is not r and (o["frm"] in LEFT) == (r["frm"] in LEFT)]
        r["overlapped"] = any(o["start"] < r["end"] and r["start"] < o["end"] for o in same_way)
        r["err"] = (abs(r["abw"] - r["truth"]) / r["truth"]
                    if r["ok"] and r["abw"] and r["truth"] else None)
    return crossing


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=4)
    ap.add_argument("--modes", default="uncoordinated,coordinated")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("lab-mesh: root only (namespaces, tc)")
    bin_ = os.path.realpath(os.environ.get("TIGHTLINK", "target/release/tightlink"))
    work = tempfile.mkdtemp(prefix="tightlink-mesh.")
    down()
    results = {}
    try:
        up()
        cross = [subprocess.Popen(["ip", "netns", "exec", f"tlm-{x}", "iperf3", "-s", "-B", f"10.88.{k}.2"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for x, k in [("x1", 11), ("x2", 12)]]
        time.sleep(0.5)
        total_s = int(a.minutes * 60 * len(a.modes.split(","))) + 120
        for x, to in [("x1", "10.88.12.2"), ("x2", "10.88.11.2")]:
            cross.append(subprocess.Popen(
                ["ip", "netns", "exec", f"tlm-{x}", "iperf3", "-c", to, "-u", "-b", CROSS,
                 "-l", "1400", "-t", str(total_s)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        counters = Counters()
        time.sleep(2)
        for mode in a.modes.split(","):
            print(f"{mode}: {a.minutes} min", file=sys.stderr)
            procs = start_everything(work, mode, bin_)
            time.sleep(a.minutes * 60)
            for p in procs:
                p.send_signal(signal.SIGINT)
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
            results[mode] = analyse(mode, rows(work, mode), counters)
        counters.stop = True
        for p in cross:
            p.kill()
    finally:
        down()
    print(f"six sites, 18 of 30 ordered pairs across a 200 Mbit/s link loaded with "
          f"{CROSS}bit/s of iperf3 UDP each way; period {PERIOD_S} s; work files in {work}\n")
    print("| mode | crossing measurements | failed | overlapped on the link | median abs. error | p90 | median, overlapped | median, alone |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode, cr in results.items():
        errs = [r["err"] for r in cr if r["err"] is not None]
        ov = [r["err"] for r in cr if r["err"] is not None and r["overlapped"]]
        alone = [r["err"] for r in cr if r["err"] is not None and not r["overlapped"]]
        fmt = lambda v: f"{100 * statistics.median(v):.1f} %" if v else "-"
        print(f"| {mode} | {len(cr)} | {sum(1 for r in cr if not r['ok'])} | "
              f"{sum(1 for r in cr if r['overlapped'])} | {fmt(errs)} | "
              f"{100 * pct(errs, 0.9):.1f} % | {fmt(ov)} | {fmt(alone)} |")
    print("\nper path, median abs. error (measurements):\n")
    modes = list(results)
    print("| path | " + " | ".join(modes) + " |")
    print("|---|" + "---:|" * len(modes))
    paths = sorted({(r["frm"], r["to"]) for cr in results.values() for r in cr})
    for p in paths:
        cells = []
        for m in modes:
            e = [r["err"] for r in results[m] if (r["frm"], r["to"]) == p and r["err"] is not None]
            cells.append(f"{100 * statistics.median(e):.1f} % ({len(e)})" if e else "-")
        print(f"| {p[0]} -> {p[1]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
