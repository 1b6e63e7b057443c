"""Self-contained HTML report of a step benchmark (benchmarks/step_bench.py --json), the step-level member of
nibble's report family (`nibble bench --html` renders the GEMM-level one): the model and GPU, a table of
every recipe's forward + backward step time with its spread, speedup over the BF16 step, the GEMM-only
speedup nibble bench measured and the step speedup that projects to, and the path that ran; an inline SVG
chart of measured against projected step time. No scripts, styles or fonts from the network.

    python3 benchmarks/step_report.py STEP.json --html STEP.html     (re-render a recorded result)
"""
import argparse
import html
import json
import os
import sys


def _fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def _speedup(row):
    return row.get("step_speedup_vs_bf16", row.get("emulated_step_vs_bf16"))


def _chart(rows, base_ms):
    """Horizontal bars: measured step ms per recipe; a tick where the projected step time would be."""
    bar_h, gap, left, width = 22, 8, 110, 520
    top = max([r["median_ms"] for r in rows] + [base_ms or 0]) or 1.0
    scale = width / (1.1 * top)
    height = len(rows) * (bar_h + gap) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 90}" height="{height}" '
           'role="img" aria-label="step time per recipe">']
    for i, r in enumerate(rows):
        y = 10 + i * (bar_h + gap)
        w = r["median_ms"] * scale
        emulated = "torch-emulated" in (r.get("path") or "") or "cpu-reference" in (r.get("path") or "")
        color = "#bbbbbb" if emulated else ("#4c72b0" if r["recipe"] == "bf16" else "#dd8452")
        out.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end" font-size="12">'
                   f'{html.escape(r["recipe"])}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}">'
                   f'<title>{html.escape(r["recipe"])}: {r["median_ms"]:.2f} ms</title></rect>')
        out.append(f'<text x="{left + w + 4:.1f}" y="{y + 15}" font-size="11">{r["median_ms"]:.2f} ms</text>')
        proj = r.get("projected_step_speedup")
        if proj and base_ms:
            x = left + base_ms / proj * scale
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y - 2}" y2="{y + bar_h + 2}" stroke="black" '
                       f'stroke-width="2"><title>projected from the GEMM speedup: {base_ms / proj:.2f} ms'
                       '</title></line>')
    y = height - 12
    out.append(f'<text x="{left}" y="{y}" font-size="11">bar: measured forward + backward of one block '
               '(grey: torch emulation); black tick: the step time the GEMM-only speedup projects</text>')
    out.append("</svg>")
    return "\n".join(out)


def render_html(result):
    """The whole report as one HTML string."""
    m, rows = result.get("model", {}), result.get("results", [])
    base = next((r["median_ms"] for r in rows if r["recipe"] == "bf16"), None)
    gemm = result.get("bf16_gemm_ms") or {}
    bench = result.get("gemm_bench") or {}
    title = (f"nibble step benchmark: hidden {m.get('hidden')}, ffn {m.get('ffn')}"
             f"{' (gated)' if m.get('gated') else ''}, heads {m.get('heads')}/{m.get('kv_heads')}, "
             f"{m.get('tokens')} tokens")
    head = ["recipe", "step ms (median)", "[min, max]", "vs bf16 step", "GEMM speedup", "projected step",
            "path"]
    body = []
    for r in rows:
        cells = [r["recipe"], _fmt(r["median_ms"], ".2f"),
                 f"[{_fmt(r.get('min_ms'), '.2f')}, {_fmt(r.get('max_ms'), '.2f')}]",
                 _fmt(_speedup(r), ".2f") + ("x" if _speedup(r) is not None else ""),
                 _fmt(r.get("gemm_speedup"), ".2f") + ("x" if r.get("gemm_speedup") is not None else ""),
                 _fmt(r.get("projected_step_speedup"), ".2f")
                 + ("x" if r.get("projected_step_speedup") is not None else ""),
                 r.get("path") or "unknown"]
        body.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    lines = []
    if base and gemm.get("median"):
        f = gemm["median"] / base
        lines.append(f"The 12 linear GEMMs alone take {gemm['median']:.2f} ms of the {base:.2f} ms BF16 step "
                     f"({100 * f:.0f}%); {100 * (1 - f):.0f}% of the step is outside them (attention, norms, "
                     "activations, launch gaps), which caps what any GEMM speedup can buy.")
    if bench:
        lines.append(f"GEMM speedups from {html.escape(str(bench.get('file')))} ("
                     f"{'PREDICTED' if bench.get('predicted') else 'measured'}, {html.escape(str(bench.get('mode')))}"
                     " mode).")
    lines.append("Rows whose path says torch-emulated measure nibble.torch's emulation, not nibble's kernels.")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:last-child{text-align:left;"
        "font-size:11px}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>GPU: {html.escape(str(result.get('gpu')))}; torch {html.escape(str(result.get('torch')))}; "
        f"{result.get('reps')} timed runs after {result.get('warmup')} warm-up, median and range.</p>",
        _chart(rows, base) if rows else "<p>no rows</p>",
        "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>", *body, "</table>",
        *[f"<p>{s}</p>" for s in lines], "</body></html>", ""])


def write_atomically(path, text):
    """Write to a temporary name beside `path`, then rename: an interrupted run leaves no file that
    looks complete."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as fo:
        fo.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="a benchmarks/step_bench.py --json result")
    ap.add_argument("--html", required=True, help="write the report here")
    a = ap.parse_args()
    try:
        with open(a.json) as fi:
            result = json.load(fi)
        if not isinstance(result, dict) or not isinstance(result.get("results"), list):
            raise ValueError("no 'results' list: not a benchmarks/step_bench.py --json file")
        for r in result["results"]:
            if not isinstance(r, dict) or "recipe" not in r or not isinstance(r.get("median_ms"), (int, float)):
                raise ValueError(f"result row {r!r} lacks 'recipe' or a numeric 'median_ms'")
    except (OSError, ValueError) as e:
        sys.exit(f"step_report: {a.json}: {e}")
    write_atomically(a.html, render_html(result))


if __name__ == "__main__":
    main()
