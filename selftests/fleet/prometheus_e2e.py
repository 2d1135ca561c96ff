#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""The fleet's path end to end, with the real programs (KTAP on stdout).

A TCG guest (guest.sh), its clock kept by chronyd, loads the module, and there systemd starts the
packaged unit, which writes tsc.prom into a directory shared with this
host; here Debian's node_exporter serves that directory with its textfile
collector, and Debian's Prometheus scrapes it every second and evaluates
the packaged alert rules, both on loopback ports only.  For each of the guest's states
(clocksource tsc, switched away, back on tsc with perf_event_paranoid 2,
the module unloaded) this checks:
  - the unit's sandbox hides no source of the frequency that root's
    tsc-report sees, but perf where perf_event_paranoid is 3 (Debian's);
and through Prometheus's query API:
  - Prometheus holds exactly the samples of the unit's tsc.prom;
  - every tsc_* series has the value tsc-report --json gave beside the unit,
    in its sandbox (what either run measured anew: within both runs'
    bounds), and the time's bound is the sum of its terms, or +Inf with
    the flag that says why;
  - exactly the alerts the state calls for are pending (a rule with a
    "for") or firing, and those of the state before that no longer hold
    are gone (TSCClockDisrupted from the switch away from tsc on);
  - every query of the packaged Grafana dashboard parses, and it and each
    series it selects return series (in the first two states: the
    timekeeper's rate exists only on tsc, a firing alert only off it).
Prometheus itself runs here, not in the guest: under TCG it took 320 s to
start and had not scraped 280 s later.

Usage: prometheus_e2e.py --debs DIR --ko MODULE.ko --kernel RELEASE --out DIR --chronyd CHRONYD
"""
import argparse
import json
import math
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

SKEW_DEFAULT = 1e-6
BOUND_DEFAULT = 0.01
ALL_RULES = {"TSCUnstable", "TSCNotTrustworthy", "TSCClocksourceNotTSC", "TSCSkewHigh",
             "TSCFrequencySourcesDisagree", "TSCSysclockFallback", "TSCReportStale",
             "TSCTimeBoundWide", "TSCClockDisrupted", "TSCVMClockDisrupted"}
# The module's counts, as tsc-report's JSON names them and its metric labels them.
CAUSES = {"clock_steps": "step", "clock_resumes": "resume", "clocksource_changes": "clocksource"}
STATES = (1, 2, 3, 4)
# node_exporter's mtime of tsc.prom, as the rules and the dashboard match it.
MTIME = 'node_textfile_mtime_seconds{file=~"(.*/)?tsc\\\\.prom"}'
# Series in the dashboard's queries: the tool's, node_exporter's, ALERTS.
SELECTOR = re.compile(r'\b(ALERTS|tsc_[a-z_]+|node_[a-z_]+)(\{[^}]*\})?')

n = 0
failed = 0


def ok(good, name, why=""):
    global n, failed
    n += 1
    if not good:
        failed += 1
    print(f"{'ok' if good else 'not ok'} {n} {name}", flush=True)
    if why and not good:
        for line in str(why).splitlines():
            print(f"# {line}", flush=True)
    return good


def diag(text):
    for line in str(text).splitlines():
        print(f"# {line}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path, **params):
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)

    def query(self, expr):
        """The instant vector of expr (raises on a query error)."""
        j = self.get("/api/v1/query", query=expr)
        if j.get("status") != "success":
            raise RuntimeError(f"{expr}: {j}")
        return j["data"]["result"]

    def alerts(self):
        """{(alertname, state): [labels, ...]} of the TSC rules."""
        got = {}
        for a in self.get("/api/v1/alerts")["data"]["alerts"]:
            if a["labels"]["alertname"] in ALL_RULES:
                got.setdefault((a["labels"]["alertname"], a["state"]), []).append(a["labels"])
        return got


def wait_for(what, fn, seconds, guest=None):
    """fn() until it returns something true, for at most seconds."""
    end = time.monotonic() + seconds
    last = None
    while time.monotonic() < end:
        if guest is not None and guest.poll() is not None:
            raise RuntimeError(f"the guest ended (exit {guest.returncode}) while waiting for {what}")
        try:
            last = fn()
            if last:
                return last
        except (OSError, ValueError, RuntimeError) as e:
            last = e
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not within {seconds} s (last: {last})")


def eventually(fn, seconds, guest):
    """fn() until it returns (True, ...), for at most seconds; its last result."""
    end = time.monotonic() + seconds
    while True:
        r = fn()
        if r[0] or time.monotonic() >= end:
            return r
        if guest.poll() is not None:
            raise RuntimeError(f"the guest ended (exit {guest.returncode})")
        time.sleep(0.2)


def own_labels(metric):
    """A series' labels but __name__ and those the scrape adds (instance, job)."""
    return frozenset((k, v) for k, v in metric.items() if k not in ("__name__", "instance", "job"))


def series(prom, name):
    """{own_labels: value} of name."""
    return {own_labels(s["metric"]): float(s["value"][1]) for s in prom.query(name)}


def close(a, b, rel=1e-9, abs_=0.0):
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def expected_series(j, unit_cal_ppm):
    """What the textfile must say, from tsc-report --json's view: name ->
    {labels: (value, relative tolerance, absolute tolerance)}.  %.6g
    (seconds, ratios) keeps six digits; a calibration is measured anew by
    each run, each within its precision (two standard errors: 95%) of the
    rate, so the two within twice the sum of both runs' precisions (the
    unit's, unit_cal_ppm, from its own series)."""
    f = j["frequency"]
    hz = f["hz"]
    e = {}

    def measured(source, ppm):
        if source == "calibration":
            return 2 * (ppm + unit_cal_ppm) * 1e-6 + 1e-9
        return 1e-9

    e["tsc_frequency_hertz"] = {frozenset({("source", f["source"])}):
                                (hz, measured(f["source"], f["precision_ppm"]), 0)}
    e["tsc_frequency_source_hertz"] = {
        frozenset({("source", s["source"])}): (s["hz"], measured(s["source"], s["precision_ppm"]), 0)
        for s in j["frequency_sources"]["sources"]}
    e["tsc_invariant"] = {frozenset(): (int(j["cpu"]["invariant_tsc"]), 0, 0)}
    if j["kernel"]["unstable"] is not None:
        e["tsc_kernel_unstable"] = {frozenset(): (int(j["kernel"]["unstable"]), 0, 0)}
    e["tsc_kernel_clocksource_info"] = {frozenset({("clocksource", j["kernel"]["clocksource"])}): (1, 0, 0)}
    e["tsc_sysclock_info"] = {frozenset({("path", j["sysclock"]["path"])}): (1, 0, 0)}
    if j["sysclock"]["rate_millihz"] is not None:
        # chronyd changes the kernel's rate between the two runs: its
        # frequency within 500 ppm (the kernel's limit) and chronyd's
        # slew within 500 ppm (guest.sh's maxslewrate), so each run's
        # within 1000 ppm of nominal, the two within 2000 ppm.
        e["tsc_timekeeper_frequency_hertz"] = {frozenset(): (j["sysclock"]["rate_millihz"] / 1000, 2e-3, 0)}
    o = j["offsets"]
    # The module's offsets are the same to every reader; this tool's own
    # are measured anew by each run: compare_series checks those.
    if o["source"] == "module":
        by = o["source"]
        for name, key in (("tsc_offset_seconds", "offset_ticks"), ("tsc_offset_min_seconds", "min_ticks"),
                          ("tsc_offset_max_seconds", "max_ticks")):
            e[name] = {frozenset({("cpu", str(c["cpu"])), ("measured_by", by)}): (c[key] / hz, 1e-5, 1e-15)
                       for c in o["cpus"] if c["status"] != "unmeasured"}
        e["tsc_offset_consistent"] = {frozenset({("cpu", str(c["cpu"]))}): (int(c["consistent"]), 0, 0)
                                      for c in o["cpus"] if c["status"] != "unmeasured"}
        e["tsc_max_skew_seconds"] = {frozenset(): (o["max_skew_ticks"] / hz, 1e-5, 1e-15)}
        e["tsc_monotonic"] = {frozenset(): (int(o["monotonic"]), 0, 0)}
    if o["source"] != "userspace":
        e["tsc_trustworthy"] = {frozenset(): (int(j["verdict"]["trustworthy"]), 0, 0)}
    # The time: the kernel's NTP state as both runs read it, seconds
    # apart.  The flags, the reading's and the skew's terms and a leap
    # second are the same to both; the bound, the daemon's maxerror and
    # esterror, the growth since it spoke and what is left to slew move
    # in between (unbounded where a daemon speaks): compare_time checks
    # that they add up, within the one report.
    b = j["time_bound"]
    anew = (0, 0, math.inf)
    e["tsc_time_bound_flag"] = {frozenset({("flag", f)}): (int(f in b["flags"]), 0, 0)
                                for f in ("unsynced", "disrupted", "leap", "skew_unknown", "stale")}
    e["tsc_time_bound_term_seconds"] = {
        frozenset({("term", t)}): (v / 1e9, 0, 0) if t in ("reading", "skew", "leap") else anew
        for t, v in b["terms_ns"].items()}
    e["tsc_time_bound_seconds"] = {frozenset(): (math.inf, 0, 0) if b["bound_ns"] is None else anew}
    e["tsc_time_esterror_seconds"] = {frozenset(): anew}
    d = j["disruptions"]
    if d is not None:
        boot = {("boot_id", d["boot_id"])} if d["boot_id"] else set()
        e["tsc_clock_disruptions_total"] = {frozenset({("cause", c)} | boot): (d[k], 0, 0)
                                            for k, c in CAUSES.items()}
    return e


def compare_time(prom):
    """[] if the scraped bound is the sum of its scraped terms, or +Inf with
    the flag that says why, else what differs."""
    bound = series(prom, "tsc_time_bound_seconds").get(frozenset())
    terms = series(prom, "tsc_time_bound_term_seconds")
    flags = {dict(k)["flag"] for k, v in series(prom, "tsc_time_bound_flag").items() if v}
    if bound is None or len(terms) != 6:
        return [f"tsc_time_bound_seconds {bound}, {len(terms)} terms"]
    if math.isinf(bound) != bool(flags & {"unsynced", "disrupted"}):
        return [f"tsc_time_bound_seconds {bound} with flags {sorted(flags)}"]
    # Each printed to the ns: the sum, to the ns it was made of.
    total = sum(terms.values())
    if not math.isinf(bound) and not close(bound, total, 0, 6e-9):
        return [f"tsc_time_bound_seconds {bound}, its terms add up to {total}"]
    return []


def hidden(state, unit, root, paranoid):
    """The unit's sandbox hides no source of the frequency from its report
    but perf, and that only where Debian's perf_event_paranoid (3 and up)
    refuses it to all but CAP_SYS_ADMIN, which the unit does not get."""
    sources = lambda j: {s["source"] for s in j["frequency_sources"]["sources"]}
    ours, roots = sources(unit), sources(root)
    allowed = {"perf"} if paranoid >= 3 else set()
    ok(ours <= roots and roots - ours <= allowed,
       f"state {state}: the unit's sandbox hides no source of the frequency"
       f"{' but perf' if allowed else ''} (perf_event_paranoid {paranoid})",
       f"the unit's {sorted(ours)}, root's {sorted(roots)}")
    diag(f"state {state}: sources, the unit's {sorted(ours)}, root's {sorted(roots)}, "
         f"perf_event_paranoid {paranoid}")


def compare_series(prom, j):
    """[] if every tsc_* series has tsc-report --json's value, else what differs."""
    bad = []
    unit_cal = [v for k, v in series(prom, "tsc_frequency_source_precision_ratio").items()
                if dict(k).get("source") == "calibration"]
    want = expected_series(j, max(unit_cal, default=0) * 1e6)
    names = {s["metric"]["__name__"] for s in prom.query('{__name__=~"tsc_.+"}')}
    # tsc_frequency_precision_ratio and _source_precision_ratio: the
    # tool's unit tests check them; the sources agreeing is the alert's.
    extra = names - set(want) - {"tsc_frequency_precision_ratio", "tsc_frequency_source_precision_ratio",
                                 "tsc_frequency_sources_agree"}
    if j["offsets"]["source"] == "userspace":
        bad += compare_measured(prom, j)
        # Whether each run's probes agreed, and so its verdict, is its own.
        extra -= {"tsc_offset_seconds", "tsc_offset_min_seconds", "tsc_offset_max_seconds",
                  "tsc_max_skew_seconds", "tsc_offset_consistent", "tsc_monotonic", "tsc_trustworthy"}
    if extra:
        bad.append(f"series tsc-report --json has no value for: {sorted(extra)}")
    bad += compare_time(prom)
    for name, labels in want.items():
        got = series(prom, name)
        if set(got) != set(labels):
            bad.append(f"{name}: labels {sorted(map(sorted, got))}, want {sorted(map(sorted, labels))}")
            continue
        for lab, (v, rel, abs_) in labels.items():
            if not close(got[lab], v, rel, abs_):
                bad.append(f"{name}{dict(lab)}: {got[lab]!r}, tsc-report --json gave {v!r}")
    return bad


LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def textfile(path):
    """{(name, labels): value} of a Prometheus text file's samples."""
    out = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        m = re.fullmatch(r'(\w+)(?:\{(.*)\})? (\S+)\n?', line)
        if not m:
            raise ValueError(f"{path}: not a sample: {line!r}")
        labels = frozenset((k, v.encode().decode("unicode_escape")) for k, v in LABEL.findall(m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def compare_textfile(prom, samples):
    """[] if Prometheus holds exactly the file's tsc_* samples, else what differs."""
    got = {}
    for s in prom.query('{__name__=~"tsc_.+"}'):
        got[(s["metric"]["__name__"], own_labels(s["metric"]))] = float(s["value"][1])
    bad = [f"{n}{dict(lab)}: {got.get((n, lab))!r} in Prometheus, {v!r} in tsc.prom"
           for (n, lab), v in samples.items() if got.get((n, lab)) != v]
    bad += [f"{n}{dict(lab)}: in Prometheus, not in tsc.prom" for (n, lab) in set(got) - set(samples)]
    return bad


def compare_measured(prom, j):
    """Offsets this tool measured, once for the unit and once for the JSON:
    each run's bounds hold the true offset, so the two must overlap, and the
    skew is the widest of the bounds (the reference CPU's 0 included)."""
    bad = []
    hz = j["frequency"]["hz"]
    lo = {dict(k)["cpu"]: v for k, v in series(prom, "tsc_offset_min_seconds").items()}
    hi = {dict(k)["cpu"]: v for k, v in series(prom, "tsc_offset_max_seconds").items()}
    mid = {dict(k)["cpu"]: v for k, v in series(prom, "tsc_offset_seconds").items()}
    cpus = {str(c["cpu"]): c for c in j["offsets"]["cpus"] if c["status"] != "unmeasured"}
    if not set(lo) == set(hi) == set(mid):
        return [f"offsets of CPUs {sorted(mid)}, bounds of {sorted(lo)} and {sorted(hi)}"]
    # A CPU one run could not measure (its probes never met in time, as
    # on a loaded host) is that run's finding: compared where both did.
    if set(mid) != set(cpus):
        diag(f"the unit's run measured CPUs {sorted(mid)}, the JSON's {sorted(cpus)}")
    slack = 1e-5 * max(map(abs, list(lo.values()) + list(hi.values()) + [1e-9]))
    for cpu, c in cpus.items():
        if cpu not in mid:
            continue
        if not lo[cpu] - slack <= mid[cpu] <= hi[cpu] + slack:
            bad.append(f"cpu{cpu}: offset {mid[cpu]} outside its bounds [{lo[cpu]}, {hi[cpu]}]")
        if lo[cpu] > c["max_ticks"] / hz + slack or hi[cpu] < c["min_ticks"] / hz - slack:
            bad.append(f"cpu{cpu}: bounds [{lo[cpu]}, {hi[cpu]}] and tsc-report --json's "
                       f"[{c['min_ticks'] / hz}, {c['max_ticks'] / hz}] do not overlap")
    skew = series(prom, "tsc_max_skew_seconds").get(frozenset())
    widest = max(list(hi.values()) + [0]) - min(list(lo.values()) + [0])
    if skew is None or not close(skew, widest, 1e-5, slack):
        bad.append(f"tsc_max_skew_seconds {skew}, the offsets' bounds span {widest}")
    return bad


def expected_alerts(j, prom, history):
    """{alertname: [extra labels, ...]} that the state must raise: what the
    rules say, applied to what the tools saw.  The kernel's state comes
    from tsc-report --json; what each run measures anew (a calibration,
    without the module the offsets, so the skew and the verdict; the
    time's bound) from the unit's own report, as scraped, which
    compare_series checked against the JSON's within the runs' bounds.
    history: the module's counts in each state so far, this one last (the
    whole run is well within TSCClockDisrupted's half hour)."""
    def scraped(name):
        return series(prom, name).get(frozenset())

    want = {}
    cs = j["kernel"]["clocksource"]
    if j["kernel"]["unstable"]:
        want["TSCUnstable"] = [{}]
    if scraped("tsc_trustworthy") == 0:
        want["TSCNotTrustworthy"] = [{}]
    if cs != "tsc":
        want["TSCClocksourceNotTSC"] = [{"clocksource": cs}]
    skew = scraped("tsc_max_skew_seconds")
    if skew is not None and skew > SKEW_DEFAULT:
        want["TSCSkewHigh"] = [{}]
    if scraped("tsc_frequency_sources_agree") == 0:
        want["TSCFrequencySourcesDisagree"] = [{}]
    if j["sysclock"]["path"] != "kernel" and cs == "tsc":
        want["TSCSysclockFallback"] = [{"path": j["sysclock"]["path"]}]
    bound = scraped("tsc_time_bound_seconds")
    if bound is None or bound > BOUND_DEFAULT:
        want["TSCTimeBoundWide"] = [{}]
    # A count that went up, or down (a reload), from one state to a later
    # (one boot: the guest's).
    counts = [h for h in history if h is not None]
    moved = sorted({c for i, a in enumerate(counts) for b in counts[i + 1:] for k, c in CAUSES.items()
                    if b[k] != a[k]})
    if moved:
        want["TSCClockDisrupted"] = [{"cause": c} for c in moved]
    return want


def alerts_as_expected(prom, want, waits):
    """(True, states) if exactly want is pending (rules with a "for",
    waits[name] > 0) or firing, with its labels."""
    got = prom.alerts()
    states = {name: state for (name, state) in got}
    expect = {name: ("pending" if waits[name] > 0 else "firing") for name in want}
    if states != expect:
        return False, f"alerts {states}, want {expect}"
    for (name, _), alerts in got.items():
        keys = set().union(*want[name])
        labels = sorted(sorted((k, a.get(k)) for k in keys) for a in alerts)
        wanted = sorted(sorted(w.items()) for w in want[name])
        if labels != wanted:
            return False, f"{name}: labels {labels}, want {wanted}"
    return True, states


def dashboard_checks(queries):
    """(title, what) for every query, $instance matching any host, and for
    each series it selects."""
    for title, expr in queries:
        q = expr.replace("$instance", ".+")
        for what in [q] + [m.group(0) for m in SELECTOR.finditer(q)]:
            yield title, what


def dashboard_check(prom, queries, found):
    """Run every check of dashboard_checks(); found collects those that
    returned series, errors those that failed."""
    errors = []
    for title, what in dashboard_checks(queries):
        try:
            if prom.query(what):
                found.add((title, what))
        except (OSError, RuntimeError) as e:
            errors.append(f"{title}: {what}: {e}")
    return errors


def dashboard_missing(queries, found):
    """What never returned series in any state checked."""
    return [f"{title}: {what}: no series" for title, what in dashboard_checks(queries)
            if (title, what) not in found]


def dashboard_queries(path):
    """The panels' queries, as (title, expr); and the label_values() of the
    $instance variable, as (metric, label)."""
    d = json.load(open(path))
    out = []
    for p in d["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    var = next(v for v in d["templating"]["list"] if v["name"] == "instance")
    m = re.fullmatch(r"label_values\((\w+), *(\w+)\)", var["query"])
    return out, (m.group(1), m.group(2)) if m else None


def start(cmd, log):
    return subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)


def stop(procs):
    """Terminate, then kill, each process (the guest with its session)."""
    for p in procs:
        if p.poll() is None:
            signal_group(p, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            signal_group(p, signal.SIGKILL)
            p.wait()


def signal_group(p, sig):
    try:
        if os.getpgid(p.pid) == p.pid:
            os.killpg(p.pid, sig)
        else:
            p.send_signal(sig)
    except ProcessLookupError:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--debs", required=True)
    ap.add_argument("--ko", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chronyd", required=True)
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = os.path.abspath(a.out)
    shutil.rmtree(out, ignore_errors=True)
    root, shared, db = f"{out}/root", f"{out}/shared", f"{out}/db"
    os.makedirs(f"{shared}/textfile")
    os.makedirs(db)

    print("TAP version 13\n1..20", flush=True)
    for pkg in ("tsc-tools", "libtsc1"):
        deb = [f for f in os.listdir(a.debs) if f.startswith(pkg + "_") and f.endswith(".deb")]
        if len(deb) != 1:
            print(f"# no single {pkg}_*.deb in {a.debs}: {deb}")
            return 1
        subprocess.run(["dpkg-deb", "-x", f"{a.debs}/{deb[0]}", root], check=True)
    rules = f"{root}/usr/share/tsc/prometheus/tsc-alerts.yml"
    queries, variable = dashboard_queries(f"{root}/usr/share/tsc/prometheus/tsc-dashboard.json")

    ne_port, prom_port = free_port(), free_port()
    with open(f"{out}/prometheus.yml", "w") as c:
        c.write(f"""global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: ['{rules}']
scrape_configs:
  - job_name: node
    static_configs: [{{targets: ['127.0.0.1:{ne_port}'], labels: {{instance: guest}}}}]
""")
    procs = []
    t0 = time.monotonic()
    try:
        procs.append(start(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{ne_port}",
                            "--collector.disable-defaults", "--collector.textfile",
                            f"--collector.textfile.directory={shared}/textfile"], f"{out}/node-exporter.log"))
        procs.append(start(["prometheus", f"--config.file={out}/prometheus.yml", f"--storage.tsdb.path={db}",
                            f"--web.listen-address=127.0.0.1:{prom_port}"], f"{out}/prometheus.log"))
        prom = Prometheus(prom_port)
        wait_for("Prometheus ready", lambda: urllib.request.urlopen(prom.base + "/-/ready", timeout=5).status == 200,
                 60)
        groups = prom.get("/api/v1/rules")["data"]["groups"]
        loaded = {r["name"]: r for g in groups for r in g["rules"]}
        # How long each must hold before it fires: its "for", as loaded.
        waits = {name: r.get("duration", 0) for name, r in loaded.items()}
        ok(set(loaded) == ALL_RULES and all(r["health"] in ("ok", "unknown") for r in loaded.values()),
           f"Prometheus loaded the packaged rules, all {len(ALL_RULES)}", loaded.keys())
        diag(f"node_exporter on 127.0.0.1:{ne_port}, Prometheus on 127.0.0.1:{prom_port}, "
             f"ready after {time.monotonic() - t0:.1f} s; rules' for (s): {waits}")

        # A session of its own: the guest's QEMU is killed with it.
        guest = subprocess.Popen(
            [f"{repo}/scripts/vm/run-in-vm.sh", "--kernel", a.kernel, "--smp", "2", "--timeout", "900",
             "--log", f"{out}/guest.log", "--quiet", "--",
             "selftests/fleet/guest.sh", os.path.abspath(a.ko), root, shared, os.path.abspath(a.chronyd)],
            stdout=open(f"{out}/guest.out", "w"), stderr=subprocess.STDOUT, cwd=repo,
            start_new_session=True)
        procs.append(guest)
        before, found, dash_errors, history = set(), set(), [], []
        for state in STATES:
            t = time.monotonic()
            wait_for(f"state {state} from the guest", lambda: os.path.exists(f"{shared}/ready-{state}"),
                     600 if state == 1 else 120, guest)
            j = json.load(open(f"{shared}/state-{state}.json"))
            hidden(state, j, json.load(open(f"{shared}/state-{state}.root.json")),
                   int(open(f"{shared}/state-{state}.paranoid").read()))
            mtime = os.stat(f"{shared}/textfile/tsc.prom").st_mtime
            what = open(f"{shared}/state-{state}").read().strip()
            diag(f"state {state}: {what}, its report {time.monotonic() - t:.1f} s after the last state; "
                 f"sources {[(s['source'], s['hz']) for s in j['frequency_sources']['sources']]}")
            # node_exporter's mtime of the new file, scraped: the report is in.
            wait_for("the new tsc.prom scraped", lambda: any(
                abs(float(s["value"][1]) - mtime) < 1
                for s in prom.query(MTIME)), 30, guest)
            samples = textfile(f"{shared}/textfile/tsc.prom")
            _, bad = eventually(lambda: (lambda b: (not b, b))(compare_textfile(prom, samples)), 15, guest)
            ok(not bad, f"state {state} ({what}): Prometheus has every sample of the unit's tsc.prom, "
                        f"{len(samples)}, with its value, and no other", "\n".join(bad))
            _, bad = eventually(lambda: (lambda b: (not b, b))(compare_series(prom, j)), 15, guest)
            ok(not bad, f"state {state} ({what}): every tsc_* series has the value tsc-report --json gave",
               "\n".join(bad))
            history.append(j["disruptions"])
            diag(f"state {state}: the time's bound {j['time_bound']}; disruptions {j['disruptions']}")
            want = expected_alerts(j, prom, history)
            t = time.monotonic()
            good, why = eventually(lambda: alerts_as_expected(prom, want, waits), 20, guest)
            diag(f"state {state}: alerts {why if good else prom.alerts()} after {time.monotonic() - t:.1f} s")
            ok(good, f"state {state} ({what}): exactly the alerts it calls for, {sorted(want) or 'none'}; "
                     f"cleared: {sorted(before - set(want)) or 'none'}", why)
            before = set(want)
            if state in (1, 2):
                dash_errors += dashboard_check(prom, queries, found)
            if state == 2:
                missing = dash_errors + dashboard_missing(queries, found)
                # Grafana's label_values(metric, label): the series API.
                if variable:
                    hosts = prom.get(f"/api/v1/label/{variable[1]}/values",
                                     **{"match[]": variable[0]})["data"]
                    if hosts != ["guest"]:
                        missing.append(f"$instance: label_values{variable}: {hosts}, not the guest")
                else:
                    missing.append("$instance: not a label_values(metric, label) query")
                ok(not missing, f"the dashboard's {len(queries)} queries parse, and each and every series "
                                f"they select return series, and its $instance lists the guest",
                   "\n".join(missing))
                age = prom.query(f"time() - max_over_time({MTIME}[1d])")
                ok(len(age) == 1 and 0 <= float(age[0]["value"][1]) < 1800,
                   "TSCReportStale's expression is the report's age, under its threshold", age)
            open(f"{shared}/ack-{state}", "w").close()
        guest.wait(timeout=120)
        ok(guest.returncode == 0, f"the guest went through its {len(STATES)} states (exit {guest.returncode})",
           open(f"{out}/guest.out").read())
    except (TimeoutError, RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        open(f"{shared}/abort", "w").close()
        ok(False, f"the run went on: {e!r}")
        for log in ("guest.out", "prometheus.log"):
            if os.path.exists(f"{out}/{log}"):
                diag(f"{log}:\n" + "".join(open(f"{out}/{log}").readlines()[-20:]))
    finally:
        stop(procs)
    diag(f"the whole run: {time.monotonic() - t0:.1f} s")
    print(f"# Totals: pass:{n - failed} fail:{failed} xfail:0 xpass:0 skip:0 error:0")
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
