"""Validation-loss curves as a self-contained SVG, written by hand (no plotting library needed)."""
from xml.sax.saxutils import escape

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def loss_curves_svg(curves, title, width=760, height=440):
    """curves: {label: [(step, loss), ...]} -> SVG text."""
    pts = [p for c in curves.values() for p in c]
    if not pts:
        return f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="60"><text x="10" y="30">no data</text></svg>'
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    ys = sorted(p[1] for p in pts)
    y0, y1 = ys[0], ys[min(len(ys) - 1, int(0.9 * len(ys)))]  # clip the first steep steps
    y1 = y1 if y1 > y0 else y0 + 1
    L, R, T, B = 60, 190, 40, 50
    sx = lambda x: L + (x - x0) / max(x1 - x0, 1) * (width - L - R)
    sy = lambda y: T + (1 - (min(y, y1) - y0) / (y1 - y0)) * (height - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>']
    for i in range(5):
        y = y0 + (y1 - y0) * i / 4
        out.append(f'<line x1="{L}" x2="{width - R}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.3f}</text>')
        x = x0 + (x1 - x0) * i / 4
        out.append(f'<text x="{sx(x):.1f}" y="{height - B + 18}" text-anchor="middle">{int(x)}</text>')
    out.append(f'<text x="{(L + width - R) / 2}" y="{height - 10}" text-anchor="middle">step</text>')
    out.append(f'<text x="14" y="{height / 2}" transform="rotate(-90 14 {height / 2})" text-anchor="middle">validation loss (nats/byte)</text>')
    for i, (label, c) in enumerate(curves.items()):
        col = COLORS[i % len(COLORS)]
        path = " ".join(f"{'M' if j == 0 else 'L'}{sx(s):.1f},{sy(v):.1f}" for j, (s, v) in enumerate(c))
        out.append(f'<path d="{path}" fill="none" stroke="{col}" stroke-width="1.8"/>')
        ly = T + 16 * i + 8
        out.append(f'<line x1="{width - R + 10}" x2="{width - R + 30}" y1="{ly}" y2="{ly}" stroke="{col}" stroke-width="3"/>')
        out.append(f'<text x="{width - R + 36}" y="{ly + 4}">{escape(label)} {c[-1][1]:.4f}</text>')
    out.append("</svg>")
    return "\n".join(out)
