#!/usr/bin/env python3
"""Static SASS statistics of nibble's CUDA kernels, on a machine without a GPU.

For each kernel of a compiled object (default: every object of build/src/kernels), prints its static
instruction count, registers, spills and shared memory (cuobjdump -res-usage), how many subroutine
CALLs it contains (a 64-bit integer division or a generic fallback is a CALL: a CALL inside a hot loop
costs tens of instructions per iteration) and its most frequent opcodes. Static counts are not executed
counts (branches, loops): Nsight Compute (ncu) on a GPU gives those; this is for reading a kernel's
code before spending device time on it (docs/kernels-fp4.md).

cuobjdump is missing from some CUDA toolkit installs; `--install` puts NVIDIA's wheels from PyPI
(nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) into .venv-sass and uses them from there.

Usage: sass_stats.py [--install] [--top N] [OBJECT.o ...] [--kernel REGEX]
"""
import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv-sass")


def find_cuobjdump(install: bool) -> str:
    """cuobjdump with nvdisasm beside it or on PATH (cuobjdump -sass runs nvdisasm), else ""."""
    def usable(tool):
        return tool and (os.path.exists(os.path.join(os.path.dirname(tool), "nvdisasm")) or shutil.which("nvdisasm"))
    candidates = [shutil.which("cuobjdump")] + glob.glob(
        os.path.join(VENV, "lib", "python*", "site-packages", "nvidia", "*", "bin", "cuobjdump"))
    found = next((t for t in candidates if usable(t)), "")
    if found or not install:
        return found
    if not os.path.exists(VENV):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    subprocess.run([os.path.join(VENV, "bin", "pip"), "install", "-q", "nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm"],
                   check=True)
    return find_cuobjdump(False)


def run(tool: str, args: list) -> str:
    # cuobjdump calls nvdisasm, which the wheels put next to it.
    env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run([tool] + args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{os.path.basename(tool)} {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def demangled_name(mangled: str) -> str:
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt:
        return mangled
    return subprocess.run([cxxfilt, mangled], capture_output=True, text=True).stdout.strip() or mangled


def kernels(tool: str, obj: str) -> dict:
    """{mangled name: {'ops': Counter, 'n': int, 'calls': int, 'res': str}} of one object."""
    out = {}
    current = None
    for line in run(tool, ["-sass", obj]).splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            current = out.setdefault(m.group(1), {"ops": collections.Counter(), "n": 0, "calls": 0, "res": ""})
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_]*)", line)
        if current is not None and m:
            op = m.group(1)
            current["ops"][op] += 1
            current["n"] += 1
            current["calls"] += op == "CALL"
    name = None
    for line in run(tool, ["-res-usage", obj]).splitlines():
        m = re.search(r"Function (\S+):", line)
        if m:
            name = m.group(1)
        elif name in out and "REG:" in line:
            out[name]["res"] = " ".join(re.findall(r"(REG:\d+|STACK:\d+|SHARED:\d+|LOCAL:\d+)", line))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("objects", nargs="*", help="compiled objects (default: build/src/kernels/**/*.cu.o)")
    ap.add_argument("--kernel", default="", help="only kernels whose demangled name matches this regex")
    ap.add_argument("--top", type=int, default=6, help="opcodes listed per kernel")
    ap.add_argument("--install", action="store_true", help="install cuobjdump from PyPI into .venv-sass if missing")
    a = ap.parse_args()
    tool = find_cuobjdump(a.install)
    if not tool:
        print("sass_stats: no cuobjdump on PATH or in .venv-sass; rerun with --install (pip: nvidia-cuda-cuobjdump, "
              "nvidia-cuda-nvdisasm)",
              file=sys.stderr)
        return 2
    objects = a.objects or sorted(glob.glob(os.path.join(ROOT, "build", "src", "cuda", "**", "*.cu.o"), recursive=True))
    if not objects:
        print("sass_stats: no objects given and none under build/src/kernels (build first)", file=sys.stderr)
        return 2
    pattern = re.compile(a.kernel) if a.kernel else None
    for obj in objects:
        for mangled, k in kernels(tool, obj).items():
            name = demangled_name(mangled)
            if pattern and not pattern.search(name):
                continue
            top = ", ".join(f"{op} {n}" for op, n in k["ops"].most_common(a.top))
            print(f"{os.path.basename(obj)}: {name[:160]}\n  {k['n']} instructions, {k['calls']} CALL, {k['res']}\n"
                  f"  {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
