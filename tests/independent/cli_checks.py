"""What the independent checks share: failures collected (not raised) so one run reports them all,
relative closeness, and running the nibble CLI named on the command line."""
import subprocess
import sys

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL", what)


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def run_nibble(*args):
    """Runs `nibble ARGS` (the binary is sys.argv[1]); exits with its stderr when it fails."""
    r = subprocess.run([sys.argv[1], *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"nibble {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout
