"""The loss study's results as docs/training.md tabulates them: final validation loss per (size, tokens per
parameter, scheme), each scheme's gap to bf16, and the seed-to-seed spread the gaps are judged against:

    python3 train/study_table.py data/law/loss-study/runs.csv [--markdown table.md] [--json table.json]

Seed spread: for every (size, budget, scheme) run with more than one seed, the largest minus the smallest final
loss; the noise floor is the largest such spread (conservative: the gaps of every cell are judged against the
noisiest pair). A cell's loss is the mean over its seeds. A gap to bf16 is printed only where it exceeds the
noise floor; smaller ones read "~" (within seed noise). Without any seed pair the noise floor is unknown and the
table says so above the gaps. Reads the CSV train/plan.py writes (columns scheme, n, d, loss, seed, size;
tokens per parameter from d / n); standard library only.
"""
import argparse
import csv
import json
import sys

REQUIRED = ("scheme", "n", "d", "loss", "seed", "size")
BASE = "bf16"


class StudyError(ValueError):
    """A runs CSV this tool cannot tabulate; the message names the problem and the fix."""


def read_runs(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    except OSError as e:
        raise StudyError(f"cannot read the runs CSV '{path}': {e.strerror}; run train/plan.py on a GPU to make it")
    if not rows:
        raise StudyError(f"'{path}' has no runs yet: run train/plan.py on a GPU first (docs/training.md, Loss study)")
    missing = [c for c in REQUIRED if c not in rows[0]]
    if missing:
        raise StudyError(f"'{path}' lacks the column(s) {', '.join(missing)}: give the CSV train/plan.py writes")
    runs = []
    for i, r in enumerate(rows, start=2):
        try:
            n, d, loss = float(r["n"]), float(r["d"]), float(r["loss"])
        except ValueError:
            raise StudyError(f"'{path}' line {i}: n, d and loss must be numbers (got {r['n']!r}, {r['d']!r}, "
                             f"{r['loss']!r})")
        if not (n > 0 and d > 0 and loss > 0):
            raise StudyError(f"'{path}' line {i}: n, d and loss must be positive")
        runs.append(dict(scheme=r["scheme"], size=r["size"], n=n, tpp=round(d / n), seed=r["seed"], loss=loss))
    return runs


def tabulate(runs):
    """{'noise': floor or None, 'pairs': [...], 'schemes': [...], 'rows': [...]}: the numbers of the table."""
    cells = {}
    for r in runs:
        cells.setdefault((r["size"], r["n"], r["tpp"], r["scheme"]), []).append(r)
    pairs = []
    for (size, n, tpp, scheme), rs in sorted(cells.items()):
        seeds = {r["seed"] for r in rs}
        if len(seeds) > 1:
            losses = [r["loss"] for r in rs]
            pairs.append(dict(size=size, tokens_per_param=tpp, scheme=scheme, seeds=sorted(seeds),
                              spread=max(losses) - min(losses)))
    noise = max((p["spread"] for p in pairs), default=None)
    schemes = sorted({k[3] for k in cells}, key=lambda s: (s != BASE, s))
    rows = []
    for size, n, tpp in sorted({k[:3] for k in cells}, key=lambda k: (k[1], k[2])):
        mean = {s: sum(r["loss"] for r in cells[(size, n, tpp, s)]) / len(cells[(size, n, tpp, s)])
                for s in schemes if (size, n, tpp, s) in cells}
        row = dict(size=size, n=n, tokens_per_param=tpp, loss=mean, gap={}, significant={})
        for s, v in mean.items():
            if s == BASE or BASE not in mean:
                continue
            row["gap"][s] = v - mean[BASE]
            row["significant"][s] = noise is not None and abs(v - mean[BASE]) > noise
        rows.append(row)
    return dict(noise=noise, pairs=pairs, schemes=schemes, rows=rows)


def markdown(t):
    lines = []
    if t["noise"] is None:
        lines.append("Seed spread: not measured (no size, budget and scheme ran with two seeds); gaps to bf16 are "
                     "shown without a noise floor.")
    else:
        worst = max(t["pairs"], key=lambda p: p["spread"])
        lines.append(f"Seed spread: largest |loss difference| between seeds {t['noise']:.4f} ({worst['scheme']}, "
                     f"{worst['size']}, {worst['tokens_per_param']} tokens/param; {len(t['pairs'])} pairs). Gaps to "
                     f"bf16 at or below it read ~.")
    lines.append("")
    lines.append("| size | N | tokens/param | " + " | ".join(t["schemes"]) + " |")
    lines.append("|---|---|---|" + "---|" * len(t["schemes"]))
    for r in t["rows"]:
        cells = []
        for s in t["schemes"]:
            if s not in r["loss"]:
                cells.append("")
            elif s not in r["gap"]:
                cells.append(f"{r['loss'][s]:.4f}")
            elif t["noise"] is None:
                cells.append(f"{r['loss'][s]:.4f} ({r['gap'][s]:+.4f})")
            else:
                cells.append(f"{r['loss'][s]:.4f} ({r['gap'][s]:+.4f})" if r["significant"][s]
                             else f"{r['loss'][s]:.4f} (~)")
        lines.append(f"| {r['size']} | {r['n'] / 1e6:.2f}M | {r['tokens_per_param']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", help="the runs CSV of train/plan.py (data/law/loss-study/runs.csv)")
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--json", help="write the numbers (noise floor, seed pairs, losses, gaps) here")
    a = ap.parse_args(argv)
    try:
        t = tabulate(read_runs(a.runs))
    except StudyError as e:
        print(f"study_table: error: {e}", file=sys.stderr)
        return 1
    text = markdown(t)
    sys.stdout.write(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(t, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
