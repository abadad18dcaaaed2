#!/usr/bin/env python3
"""The adversity campaign's table (scripts/adversity.sh): one row per
condition (CPU hogs, bucket, far end and direction), then the totals.

    python3 scripts/adversity-summary.py adversity.jsonl [MORE.jsonl ...]

An *exact miss* is an answer more than 10 % off its truth that says
`exact` with a range that leaves the truth out; a *silent miss* is one
with no warning either. An
answer *holds* when its range holds the truth (`exact`), or its bound is
on the right side with 10 % slack (`at_least`, `at_most`). *Lost exact*
counts the answers within 5 % of the truth that are not `exact`."""

import json
import statistics
import sys
from collections import OrderedDict


def judge(v):
    truth = v["cell"]["truth_bps"]
    if "available_bandwidth_bps" not in v:
        return {"answered": False, "error": None, "silent": False, "missed": False,
                "holds": False, "bound": "error", "within5": False}
    est, bound = v["available_bandwidth_bps"], v["bound"]
    lo, hi = v.get("low_bps", est), v.get("high_bps", est)
    err = est / truth - 1.0
    if bound == "exact":
        holds = lo <= truth <= hi
    elif bound == "at_least":
        holds = est <= truth * 1.1
    elif bound == "at_most":
        holds = est >= truth * 0.9
    else:
        holds = False
    warned = bool(v.get("warnings"))
    missed = abs(err) > 0.10 and bound == "exact" and not (lo <= truth <= hi)
    return {"answered": bound != "none", "error": err, "silent": missed and not warned,
            "missed": missed, "holds": holds, "bound": bound, "within5": abs(err) <= 0.05}


def row(name, items):
    judged = [judge(v) for v in items]
    errs = [abs(j["error"]) for j in judged if j["error"] is not None]
    within5 = [j for j in judged if j["within5"]]
    lost = sum(1 for j in within5 if j["bound"] != "exact")
    bounds = {}
    for j in judged:
        bounds[j["bound"]] = bounds.get(j["bound"], 0) + 1
    return "| {} | {} | {} | {} | {} | {}/{} | {} | {} |".format(
        name,
        len(items),
        "{:.1f} %".format(100 * statistics.median(errs)) if errs else "-",
        sum(j["silent"] for j in judged),
        sum(j["missed"] for j in judged),
        lost,
        len(within5),
        sum(j["holds"] for j in judged),
        ", ".join("{} {}".format(k, n) for k, n in sorted(bounds.items())),
    )


def main():
    runs = []
    for path in sys.argv[1:]:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    runs.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit("{}:{}: not a JSON line: {}".format(path, n, e))
    if not runs:
        sys.exit("no runs in " + ", ".join(sys.argv[1:]))
    cells = OrderedDict()
    for v in runs:
        c = v["cell"]
        key = "{} hogs, {} KB, {}".format(c["hogs"], c["bucket"] // 1000, c["far_end"])
        cells.setdefault(key, []).append(v)
    print("| condition | runs | median abs. error | silent misses | exact misses | lost exact (of runs within 5 %) | holds truth | bounds |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for key, items in cells.items():
        print(row(key, items))
    for hogs in sorted({v["cell"]["hogs"] for v in runs}):
        print(row("**all, {} hogs**".format(hogs), [v for v in runs if v["cell"]["hogs"] == hogs]))
    print(row("**all**", runs))


if __name__ == "__main__":
    main()
