"""The report of scripts/gpu-check.sh: reads what its sections wrote in DIR (meta.json,
probe.txt from bench/gpu_probe, attrib.txt from bench/gpu_attrib, stream.json from
gpu_check_stream.py) and writes DIR/report.json and DIR/report.md. A section that failed or is
missing leaves its figures null and says so; the report is written all the same.

usage: gpu_check_report.py DIR"""

import json
import math
import os
import re
import sys

NUM = r"([-+]?[0-9.]+|nan)"


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def sections(text):
    """gpu_probe's output split at its unindented headings: {first words: lines}."""
    out, cur = {}, None
    for line in (text or "").splitlines():
        if line and not line.startswith(" "):
            cur = line
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    return out


def section(secs, start):
    for head, lines in secs.items():
        if head.startswith(start):
            return head, lines
    return None, []


def num(s):
    v = float(s)
    return None if math.isnan(v) else v


def spread(lines, what):
    """The figures of a print_spread line: {median, p10, p90, min, max, n}."""
    pat = (rf"^\s+{re.escape(what)}\s+median\s+{NUM} \S+\s+p10\s+{NUM}\s+p90\s+{NUM}\s+min\s+"
           rf"{NUM}\s+max\s+{NUM}\s+\((\d+)\)")
    for line in lines:
        m = re.match(pat, line)
        if m:
            return {"median": num(m[1]), "p10": num(m[2]), "p90": num(m[3]), "min": num(m[4]),
                    "max": num(m[5]), "n": int(m[6])}
    return None


def grab(lines, pat, conv=float):
    for line in lines:
        m = re.search(pat, line)
        if m:
            return conv(m[1])
    return None


def probe(text):
    secs = sections(text)
    _, ident = section(secs, "identity")
    _, energy = section(secs, "energy counter")
    _, power = section(secs, "power reading")
    samp_head, samp = section(secs, "sampler")
    _, beside = section(secs, "SM clock and power reads")
    _, stream = section(secs, "stream")
    return {
        "gpu": ident[0].strip() if ident else None,
        "sm_clocks": grab(ident, r"SM clocks: (.*)$", str),
        "sm_clock_now_mhz": grab(ident, r"SM clock now (\d+) MHz", int),
        "power_now_w": grab(ident, r"power now ([0-9.]+) W"),
        "sm_clock_read_us": spread(ident, "cost of an SM clock read"),
        "energy_refresh_ms": spread(energy, "interval between changes"),
        "energy_read_us": spread(energy, "cost of one read"),
        "energy_read_cpu_pct": grab(energy, r"CPU busy (\d+) %"),
        "power_interval_ms": spread(power, "interval between changes"),
        "power_changes": grab(power, r"value changes (\d+)", int),
        "power_steps": grab(power, r"steps of it\): (\d+)", int),
        "power_read_us": spread(power, "cost of one read"),
        "sampler_cpu_pct": grab(samp, r"CPU busy (\d+) %"),
        "sampler_reads_per_s": grab(samp, r"\(([0-9.]+) a second\)"),
        "sampler_bracket_ms": spread(samp, "poll bracket"),
        "sampler_fit_period_ms": grab(samp, r"refresh fit: period ([0-9.]+) ms"),
        "sampler_fit_locked": grab(samp, r"phase (locked|not locked)", str),
        "sampler_seconds": grab([samp_head or ""], r"for ([0-9.]+) s"),
        "sm_clock_read_beside_us": spread(beside, "SM clock read, beside"),
        "two_host_fn_handoffs_us": spread(stream, "two hand-offs"),
        "event_record_host_us": spread(stream, "event record (host)"),
        "host_fn_enqueue_host_us": spread(stream, "host fn enqueue (host)"),
        "event_to_event_device_us": spread(stream, "event to event (device)"),
        "device_timer_ppm": grab(stream, r"CLOCK_MONOTONIC over [0-9.]+ s: ([-+0-9.]+) ppm"),
        "backlog": backlog(section(secs, "backlog")[1]),
    }


def backlog(lines):
    """bench/gpu_probe's backlog passes: {events_only, with_host_fns}."""
    out = {}
    for key, head, what in (("events_only", "memset, event:", "held back, events only"),
                            ("with_host_fns", "memset, host fn, event:",
                             "held back, with host fns")):
        line = next((x for x in lines if x.strip().startswith(head)), None)
        if line is None:
            continue
        m = re.search(r"first held back at round (\d+), about (\d+) rounds queued", line)
        out[key] = {"device_ms_a_round": grab([line], r"device ([0-9.]+) ms a round"),
                    "first_held_round": int(m[1]) if m else None,
                    "queued_rounds": int(m[2]) if m else None,
                    "held_us": spread(lines, what) if m else None}
    return out


def attrib(text):
    lines = (text or "").splitlines()
    out = {"fit": grab(lines, r"^  fit: .*, (usable|not usable.*)$", str),
           "refresh_period_ms": grab(lines, r"refresh fit period ([0-9.]+) ms"),
           "mixed": grab(lines, r"^mixed: (\d+ computations over .*)$", str), "kinds": {}}
    in_first = False
    for line in lines:
        if line.startswith("  fit:"):
            in_first = True
            continue
        if line.startswith("  fit with"):
            break
        m = re.match(rf"^  (fma|memset|blocked)\s+{NUM} W\s+{NUM} W\s+{NUM} W\s+{NUM} %$", line)
        if in_first and m:
            out["kinds"][m[1]] = {"steady_w": num(m[2]), "fitted_w": num(m[3]),
                                  "se_w": num(m[4]), "error_pct": num(m[5])}
    return out


def fmt(v, digits=1, unit=""):
    if v is None:
        return "—"
    return f"{v:.{digits}f}{unit}"


def med(s, digits=1):
    if not s or s.get("median") is None:
        return "—"
    return f"{s['median']:.{digits}f} (p10 {s['p10']:.{digits}f}, p90 {s['p90']:.{digits}f}, max " \
           f"{s['max']:.{digits}f})"


def markdown(r):
    m, p, a, s = r["meta"], r["probe"], r["attrib"], r.get("stream") or {}
    out = [f"# GPU check: {p.get('gpu') or m.get('gpu') or '?'}", "",
           f"`scripts/gpu-check.sh` ({m.get('mode')}), {m.get('date')}; read-only: no clock, "
           "power limit or other setting changed.", "",
           "| | |", "|---|---|",
           f"| GPU | {m.get('gpu') or p.get('gpu')} |",
           f"| driver | {m.get('driver') or '—'} |",
           f"| CUDA (framework) | {json.dumps(s.get('framework')) if s else '—'} |",
           f"| SM clocks | {p.get('sm_clocks') or '—'}; now {fmt(p.get('sm_clock_now_mhz'), 0)} "
           f"MHz, {fmt(p.get('power_now_w'))} W |",
           f"| sections | {', '.join(f'{k} {v}' for k, v in m.get('status', {}).items())} |", "",
           "## Counters (bench/gpu_probe)", "", "| | median (p10, p90, max) |", "|---|---|",
           f"| energy counter: interval between changes, ms | {med(p.get('energy_refresh_ms'))} |",
           f"| energy counter: cost of one read, µs | {med(p.get('energy_read_us'))} |",
           f"| CPU while reading the counter back to back | "
           f"{fmt(p.get('energy_read_cpu_pct'), 0, ' %')} |",
           f"| power reading: interval between changes, ms | {med(p.get('power_interval_ms'))} |",
           f"| power reading: cost of one read, µs | {med(p.get('power_read_us'), 2)} |",
           f"| SM clock read, µs | {med(p.get('sm_clock_read_us'), 2)} |",
           f"| client's sampler: CPU; reads a second | {fmt(p.get('sampler_cpu_pct'), 0, ' %')}; "
           f"{fmt(p.get('sampler_reads_per_s'))} |",
           f"| client's sampler: bracket, ms; refresh fit | {med(p.get('sampler_bracket_ms'), 2)}"
           f"; {fmt(p.get('sampler_fit_period_ms'), 3)} ms, {p.get('sampler_fit_locked')} |", "",
           "## CUDA stream (bench/gpu_probe)", "", "| | median (p10, p90, max) |", "|---|---|",
           f"| event record, host, µs | {med(p.get('event_record_host_us'), 2)} |",
           f"| host function enqueue, host, µs | {med(p.get('host_fn_enqueue_host_us'), 2)} |",
           f"| two events back to back, device, µs | "
           f"{med(p.get('event_to_event_device_us'), 2)} |",
           f"| two host-function hand-offs, µs | {med(p.get('two_host_fn_handoffs_us'))} |",
           f"| device timer against CLOCK_MONOTONIC | {fmt(p.get('device_timer_ppm'), 1, ' ppm')}"
           " |", ""]
    out += backlog_md(p.get("backlog") or {}) + power_md(r.get("power") or {})
    h, mo = s.get("hooks") or {}, s.get("model") or {}
    pair = h.get("pair_us") or {}
    out += ["## The client's hooks on a real stream (measure-only)", "",
            f"- begin + end with nothing between (each records an event), host: median "
            f"{fmt(pair.get('median'), 2)} µs, p90 {fmt(pair.get('p90'), 2)} µs "
            f"(from Python, ctypes included)",
            f"- a model iteration ({mo.get('microbatches')} microbatches of forward + backward): "
            f"{fmt(1e3 * mo['iteration_plain_s'] if mo.get('iteration_plain_s') else None, 2)} "
            f"ms without the client, "
            f"{fmt(1e3 * mo['iteration_hooked_s'] if mo.get('iteration_hooked_s') else None, 2)}"
            f" ms with it: {fmt(mo.get('hook_overhead_pct'), 2, ' %')}",
            f"- what the client measured over {mo.get('iterations')} iterations (fit: "
            f"{mo.get('fit')}):", "", "| kind | windows | time | power (se) | SM clock |",
            "|---|---|---|---|---|"]
    for k, v in (mo.get("kinds") or {}).items():
        clk = (f"{v.get('clock_min_mhz')}–{v.get('clock_max_mhz')} MHz"
               if v.get("clock_min_mhz") is not None else "")
        out.append(f"| {k} | {v.get('windows', '')} | {fmt(v.get('time_s'), 2, ' s')} | "
                   f"{fmt(v.get('power_w'), 1, ' W')} ({fmt(v.get('power_se_w'), 1)}) | {clk} |")
    kn = s.get("known") or {}
    out += ["", "## Attribution against long windows", "",
            f"Known work through the client (measure-only, device stream) for "
            f"{fmt(kn.get('seconds'), 0, ' s')}: {kn.get('iterations')} iterations of 8 "
            f"computations of 20–100 ms of one kind each, half after a blocked gap of up to 50 ms"
            f"; fit {kn.get('fit')}. Reference: each kind alone for "
            f"{fmt(kn.get('ref_seconds'), 0, ' s')}, the counter's change between two of its "
            "refreshes (dated to a read) over the window.", "",
            "| kind | unit | reference | fitted (se) | error |", "|---|---|---|---|---|"]
    for k, v in (kn.get("kinds") or {}).items():
        unit = (kn.get("unit_ms") or {}).get(k)
        out.append(f"| {k} | {fmt(unit, 2, ' ms') if unit else ''} | "
                   f"{fmt(v.get('reference_w'), 1, ' W')} | {fmt(v.get('fitted_w'), 1, ' W')} "
                   f"({fmt(v.get('se_w'), 1)}) | {fmt(v.get('error_pct'), 2, ' %')} |")
    out += ["", f"bench/gpu_attrib (its own fit, {a.get('mixed')}; fit {a.get('fit')}; refresh "
            f"period {fmt(a.get('refresh_period_ms'), 3, ' ms')}):", "",
            "| kind | steady | fitted (se) | error |", "|---|---|---|---|"]
    for k, v in (a.get("kinds") or {}).items():
        out.append(f"| {k} | {fmt(v.get('steady_w'), 1, ' W')} | {fmt(v.get('fitted_w'), 1, ' W')}"
                   f" ({fmt(v.get('se_w'), 1)}) | {fmt(v.get('error_pct'), 2, ' %')} |")
    return "\n".join(out) + "\n"


def backlog_md(b):
    out = ["Enqueued ahead without waiting (bench/gpu_probe backlog):", "",
           "| rounds | device a round | first held back | queued then | held calls, µs |",
           "|---|---|---|---|---|"]
    for k, name in (("events_only", "memset, event"), ("with_host_fns", "memset, host fn, event")):
        v = b.get(k) or {}
        held = v.get("first_held_round")
        out.append(f"| {name} | {fmt(v.get('device_ms_a_round'), 3, ' ms')} | "
                   f"{'round ' + str(held) if held is not None else 'never'} | "
                   f"{fmt(v.get('queued_rounds'), 0)} | {med(v.get('held_us'))} |")
    return out + [""]


BEST = {"last_refresh": "the counter's last refresh interval",
        "refresh_before": "the interval before it", "last_1s": "the counter's last second"}


def span(v, unit):
    return f"{v[0]}–{v[1]}{unit}" if isinstance(v, list) and len(v) == 2 else "—"


def power_md(w):
    e = w.get("reading_vs_energy") or {}
    row = lambda k: fmt((e.get(k) or {}).get("median_abs_pct"), 1, " %")  # noqa: E731
    i = w.get("instant_field_vs_energy") or {}
    irow = lambda k: fmt((i.get(k) or {}).get("median_abs_pct"), 1, " %")  # noqa: E731
    return ["## Power reading and clock (gpu_check_power.py)", "",
            f"{'Matrix-product bursts' if w.get('load') else 'Idle (no load)'}, "
            f"{w.get('reads')} rounds of reads; power limit {fmt(w.get('power_limit_w'), 0, ' W')}.",
            "", "| | |", "|---|---|",
            f"| power reading: changes, median interval | {w.get('power_changes')}, "
            f"{fmt(w.get('power_interval_ms'), 1, ' ms')} |",
            f"| energy counter: median interval | {fmt(w.get('energy_interval_ms'), 1, ' ms')} |",
            f"| reading vs counter's last refresh interval | {row('last_refresh')} |",
            f"| reading vs the interval before it | {row('refresh_before')} |",
            f"| reading vs counter's last second | {row('last_1s')} |",
            f"| the reading is closest to | {BEST.get(w.get('best'), '—')} |",
            f"| instantaneous field (186) vs the counter's last 50 ms of reads, against its last "
            f"refresh interval; its last second | {irow('last_refresh')}; {irow('last_1s')} |",
            f"| SM clock, last second of a 2 s burst | {span(w.get('long_burst_clock_mhz'), ' MHz')} at "
            f"{fmt(w.get('long_burst_power_w'), 0, ' W')} |",
            f"| SM clock idle after | {fmt(w.get('idle_clock_mhz'), 0, ' MHz')} |",
            f"| SM clock seen | {span(w.get('clock_seen_mhz'), ' MHz')} |", ""]


def main():
    d = sys.argv[1]
    meta = json.loads(read(os.path.join(d, "meta.json")) or "{}")
    stream = read(os.path.join(d, "stream.json"))
    power = read(os.path.join(d, "power.json"))
    r = {"meta": meta, "probe": probe(read(os.path.join(d, "probe.txt"))),
         "attrib": attrib(read(os.path.join(d, "attrib.txt"))),
         "stream": json.loads(stream) if stream else None,
         "power": json.loads(power) if power else None}
    with open(os.path.join(d, "report.json"), "w") as f:
        json.dump(r, f, indent=1)
    with open(os.path.join(d, "report.md"), "w") as f:
        f.write(markdown(r))


if __name__ == "__main__":
    main()
