#!/usr/bin/env python3
"""Every repository path the tracked text cites exists, and the tracked text speaks of the product only.

1. Dead paths: in tracked *.md, *.hpp, *.cpp, *.cu, *.cuh, *.py, *.sh, *.txt (CMakeLists.txt included)
   and *.json files, every token that starts at a top-level folder of the repository (src, include,
   tests, docs, tools, benchmarks, data, python, train, fuzz, experiments) and ends with a file
   extension or '/' must name a file or folder of the checkout that git tracks or will track (not
   ignored). A token stops at the first character that cannot be part of a path, so placeholders and
   globs keep their literal prefix: for "docs/results/<gpu>-<date>/" the folder "docs/results/" is
   checked. A path in another repository is best written as its URL, which is not checked.
2. Development history: no such text file other than CHANGELOG.md mentions development work periods,
   numbered runs or issues, the removed docs/perf folder, or the spec by its old name (cite docs/spec.md).

Prints each finding as path:line: what, and exits 1 when there is any. Run from the repository root
(ctest does); skips (exit 77) only outside a git checkout (no .git: a source archive), where the tracked
files are unknown. Inside a checkout, a git command that fails (git missing, a broken repository) fails the
check: it must not pass for having looked at nothing.

Usage: check_repo_paths.py
"""
import os
import re
import subprocess
import sys

SKIP = 77
ROOTS = ("src", "include", "tests", "docs", "tools", "benchmarks", "data", "python", "train", "fuzz",
         "experiments")
PATH_SUFFIXES = (".md", ".hpp", ".cpp", ".cu", ".cuh", ".py", ".sh", ".txt", ".json")
THIS_FILE = "tests/independent/check_repo_paths.py"  # it spells the patterns it looks for
HISTORY_EXEMPT = {"CHANGELOG.md", THIS_FILE}

# A root folder not preceded by a path character (so "$BUILD/python/x" and URLs do not count), then
# path characters. Trailing dots are sentence punctuation, not part of the path.
PATH_TOKEN = re.compile(r"(?<![\w./\-$~@])((?:%s)/[\w./+\-]*)" % "|".join(ROOTS))
EXTENSION = re.compile(r"\.[A-Za-z0-9]+$")

HISTORY = [
    # The patterns are spelled with character classes so that this file does not contain the words it forbids.
    (re.compile(r"\bs[e]ssions?\b", re.IGNORECASE), "development work period (s[e]ssion)"),
    # "run 3" or a folder run3/, but not "5 CTAs run 2-3% faster".
    (re.compile(r"\brun [0-9]+\b(?!\s*(%|-[0-9]|x\b|times\b))|/run[0-9]+/", re.IGNORECASE), "numbered run"),
    (re.compile(r"\bissues? ?#?[0-9]", re.IGNORECASE), "issue number"),
    (re.compile(r"\bdocs/perf\b"), "docs/perf (removed; results live in docs/results/<gpu>-<date>/)"),
    (re.compile(r"\bSPEC(\.md)?\b"), "the spec by its old name (cite docs/spec.md §N)"),
]


def tracked_files():
    """Tracked files plus new files git does not ignore (they are tracked once committed), less any
    deleted from the working tree. Raises RuntimeError naming git's failure."""
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    try:
        done = subprocess.run(command, capture_output=True)
    except OSError as e:
        raise RuntimeError(f"cannot run git: {e}") from e
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` exited {done.returncode}: "
                           f"{done.stderr.decode(errors='replace').strip()}")
    out = done.stdout
    names = sorted(set(f for f in out.decode("utf-8", "surrogateescape").split("\0") if f))
    return [f for f in names if os.path.isfile(f)]


def read_text(path):
    """The file's lines, or None for a binary, unreadable or deleted file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def known_paths(files):
    """Every tracked file and every folder above one (folders with a trailing '/')."""
    known = set()
    for f in files:
        known.add(f)
        parts = f.split("/")
        for i in range(1, len(parts)):
            known.add("/".join(parts[:i]) + "/")
    return known


def dead_paths(line, known):
    for m in PATH_TOKEN.finditer(line):
        token = m.group(1).rstrip(".")
        if not (token.endswith("/") or EXTENSION.search(token)):
            continue
        if token in known:
            continue
        yield token


def main():
    if not os.path.isdir(".git") and not os.path.isfile(".git"):
        print("not the root of a git checkout: the tracked files are unknown; skipping")
        return SKIP
    try:
        files = tracked_files()
    except RuntimeError as e:
        print(f"error: {e}; the tracked files are unknown, so nothing was checked")
        return 1
    if not files:
        print("error: git lists no tracked file in this checkout: nothing was checked")
        return 1
    known = known_paths(files)
    findings = []
    scanned = 0
    for f in files:
        lines = read_text(f)
        if lines is None:
            continue
        scanned += 1
        cite_paths = f.endswith(PATH_SUFFIXES) or os.path.basename(f) == "CMakeLists.txt"
        check_history = f not in HISTORY_EXEMPT
        for n, line in enumerate(lines, 1):
            if cite_paths:
                for token in dead_paths(line, known):
                    findings.append(f"{f}:{n}: dead path {token}")
            if check_history:
                for pattern, what in HISTORY:
                    m = pattern.search(line)
                    if m:
                        findings.append(f"{f}:{n}: {what}: {m.group(0)!r}")
    for line in findings:
        print(line)
    print(f"{scanned} tracked text files scanned; {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
