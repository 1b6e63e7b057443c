"""Validation-loss curves as a self-contained SVG, written by hand (no plotting library needed).

Two panels: every evaluation (the y range clipped so the first steep steps do not flatten the rest), and
a zoom on the second half of training, where the gaps between recipes (a few hundredths) are visible."""
from xml.sax.saxutils import escape

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _panel(out, curves, top, width, height, x0, x1, y0, y1, subtitle, legend):
    y1 = y1 if y1 > y0 else y0 + 1e-3
    L, R, T, B = 60, 210, top + 30, 40
    bottom = top + height
    sx = lambda x: L + (x - x0) / max(x1 - x0, 1) * (width - L - R)
    sy = lambda y: T + (1 - (min(max(y, y0), y1) - y0) / (y1 - y0)) * (bottom - B - T)
    out.append(f'<text x="{L}" y="{top + 18}" font-size="12" fill="#444">{escape(subtitle)}</text>')
    for i in range(5):
        y = y0 + (y1 - y0) * i / 4
        out.append(f'<line x1="{L}" x2="{width - R}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.3f}</text>')
        x = x0 + (x1 - x0) * i / 4
        out.append(f'<text x="{sx(x):.1f}" y="{bottom - B + 16}" text-anchor="middle">{int(round(x))}</text>')
    out.append(f'<text x="{(L + width - R) / 2}" y="{bottom - 8}" text-anchor="middle">step</text>')
    out.append(f'<text x="14" y="{(T + bottom - B) / 2}" transform="rotate(-90 14 {(T + bottom - B) / 2})" '
               f'text-anchor="middle">val loss (nats/byte)</text>')
    for i, (label, c) in enumerate(curves.items()):
        col = COLORS[i % len(COLORS)]
        pts = [(s, v) for s, v in c if x0 <= s <= x1]
        if not pts:
            continue
        path = " ".join(f"{'M' if j == 0 else 'L'}{sx(s):.1f},{sy(v):.1f}" for j, (s, v) in enumerate(pts))
        out.append(f'<path d="{path}" fill="none" stroke="{col}" stroke-width="1.8"/>')
        if len(pts) == 1:
            out.append(f'<circle cx="{sx(pts[0][0]):.1f}" cy="{sy(pts[0][1]):.1f}" r="3" fill="{col}"/>')
        if legend:
            ly = T + 16 * i + 8
            out.append(f'<line x1="{width - R + 10}" x2="{width - R + 30}" y1="{ly}" y2="{ly}" stroke="{col}" '
                       f'stroke-width="3"/>')
            out.append(f'<text x="{width - R + 36}" y="{ly + 4}">{escape(label)} {c[-1][1]:.4f}</text>')


def loss_curves_svg(curves, title, width=760, panel_height=360):
    """curves: {label: [(step, loss), ...]} -> SVG text."""
    curves = {k: [tuple(p) for p in c] for k, c in curves.items() if c}
    pts = [p for c in curves.values() for p in c]
    if not pts:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="60">'
                '<text x="10" y="30">no data</text></svg>')
    height = 2 * panel_height + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           'font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>']
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    ys = sorted(p[1] for p in pts)
    _panel(out, curves, 30, width, panel_height, x0, x1, ys[0], ys[min(len(ys) - 1, int(0.9 * len(ys)))],
           "all evaluations (y clipped at the 90th percentile)", True)
    half = x0 + (x1 - x0) / 2
    tail = [p[1] for p in pts if p[0] >= half]
    pad = 0.05 * (max(tail) - min(tail)) or 1e-3
    _panel(out, curves, 30 + panel_height, width, panel_height, half, x1, min(tail) - pad, max(tail) + pad,
           "second half of training (zoom)", False)
    out.append("</svg>")
    return "\n".join(out)
