#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compile and run every C example of a Markdown file as it is written.

Each fenced ```c block that defines main() is compiled as C11 with
-Wall -Wextra -Werror -pedantic against the library built in the tree
(the static one, as pkg-config --static would link it), run, and must
exit 0 having printed something.  Its main() may take at most
--max-main lines (blank ones not counted): the README promises programs
that short.  A changed API, or an example that grew, fails here rather
than in a reader's hands.

Usage: check-doc-examples.py --lib DIR [--max-main N] FILE.md...
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```c\n(.*?)^```$", re.M | re.S)


def main_lines(src):
    """The non-blank lines of main()'s body, or None if there is no main()."""
    m = re.search(r"^int main\(void\)\n\{\n(.*?)^\}$", src, re.M | re.S)
    if not m:
        return None
    return [line for line in m.group(1).splitlines() if line.strip()]


def check(path, lib, include, max_main, n, tmp):
    text = open(path).read()
    failed = 0
    for block in FENCE.finditer(text):
        src = block.group(1)
        body = main_lines(src)
        if body is None:
            continue
        n += 1
        line = text.count("\n", 0, block.start()) + 1
        what = "%s example at line %d" % (path, line)
        exe = os.path.join(tmp, "example%d" % n)
        c = exe + ".c"
        with open(c, "w") as f:
            f.write(src)
        cc = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror",
              "-pedantic", "-I", include, "-o", exe, c, os.path.join(lib, "libtsc.a"),
              "-lm", "-pthread"]
        built = subprocess.run(cc, capture_output=True, text=True)
        if built.returncode:
            print("not ok %d %s: does not compile\n%s" % (n, what, built.stderr))
            failed += 1
            continue
        try:
            run = subprocess.run([exe], capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            print("not ok %d %s: still running after 30 s" % (n, what))
            failed += 1
            continue
        out = run.stdout.strip()
        if run.returncode or not out:
            print("not ok %d %s: exit %d, output %r %s" % (n, what, run.returncode, out,
                                                           run.stderr))
            failed += 1
        elif len(body) > max_main:
            print("not ok %d %s: main() is %d lines, more than %d" % (n, what, len(body),
                                                                      max_main))
            failed += 1
        else:
            print("ok %d %s: main() %d lines; printed: %s" % (n, what, len(body),
                                                              out.splitlines()[0]))
    return n, failed


def run():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="the directory of libtsc.a")
    ap.add_argument("--include", default=os.path.join(os.path.dirname(__file__), "..",
                                                       "userspace", "include"))
    ap.add_argument("--max-main", type=int, default=5)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    n = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.files:
            n, f = check(path, args.lib, args.include, args.max_main, n, tmp)
            failed += f
    if not n:
        print("not ok 1 no C example with a main() in %s" % " ".join(args.files))
        return 1
    print("# doc-examples: %d of %d examples pass" % (n - failed, n))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run())
