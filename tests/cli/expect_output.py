#!/usr/bin/env python3
"""Runs a command and checks both its exit code and its output (stdout and stderr together).

ctest's PASS_REGULAR_EXPRESSION alone ignores the exit code (a command printing the text and then
failing would pass); this driver fails unless the exit code is the expected one AND the regular
expression (Python syntax) matches the output.
Usage: expect_output.py EXIT_CODE REGEX COMMAND [ARGS...]
"""
import re
import subprocess
import sys


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[-1])
        return 2
    want_rc, regex, command = int(argv[1]), argv[2], argv[3:]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(done.stdout)
    problems = []
    if done.returncode != want_rc:
        problems.append(f"exit code {done.returncode}, expected {want_rc}")
    if not re.search(regex, done.stdout):
        problems.append(f"output does not match {regex!r}")
    for p in problems:
        print(f"expect_output: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
