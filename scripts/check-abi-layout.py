#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The clock page's layout in its ABI file is the header's.

Documentation/ABI/testing/sysfs-devices-system-cpu-tsc gives the page
field by field (offset, type, name) and its layout version; the header
both sides compile, common/tsc_clock_page.h, defines them.  Each row's
offset and size must be what the compiler makes of the struct, every
field of the struct must have its row, the version must be the header's,
and max_cycles must be called what it is, a staleness bound (the page's
arithmetic is exact at any reading; it bounds how stale the page may be).

Usage: check-abi-layout.py [REPO]   (default: this script's repository)
Exit: 0 if they agree, 1 if not.
"""
import os
import pathlib
import re
import subprocess
import sys
import tempfile

repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
abi = (repo / "Documentation/ABI/testing/sysfs-devices-system-cpu-tsc").read_text()
header = (repo / "common/tsc_clock_page.h").read_text()
SIZES = {"u16": 2, "u32": 4, "u64": 8}
problems = []

table = abi[abi.index("Layout version"):]
table = table[:table.index("At a TSC reading")]
rows = {}
for line in table.splitlines():
    m = re.match(r"\s+(\d+)\s+(?:(\d+)x)?(u16|u32|u64)\s+(\w+)\s*(.*)$", line)
    if m:
        rows[m.group(4)] = (int(m.group(1)), int(m.group(2) or 1) * SIZES[m.group(3)], m.group(5))
        last = m.group(4)
    elif rows and re.match(r"\s{20,}\S", line) and not line.strip().startswith("="):
        off, size, text = rows[last]
        rows[last] = (off, size, text + " " + line.strip())

struct = header[header.index("struct tscfk_clock_page {"):]
struct = struct[:struct.index("\n};")]
fields = re.findall(r"^\s*(?:__u\d+|struct \w+)\s+(\w+);", struct, re.M)

src = '#include <stddef.h>\n#include <stdio.h>\n#include "tsc_clock_page.h"\nint main(void)\n{\n'
for f in fields:
    src += (f'\tprintf("{f} %zu %zu\\n", offsetof(struct tscfk_clock_page, {f}), '
            f'sizeof(((struct tscfk_clock_page *)0)->{f}));\n')
src += "\treturn 0;\n}\n"
with tempfile.TemporaryDirectory() as tmp:
    c, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
    pathlib.Path(c).write_text(src)
    subprocess.run([os.environ.get("CC", "cc"), "-I", str(repo / "common"), "-o", exe, c], check=True)
    compiled = {f: (int(o), int(s)) for f, o, s in
                (ln.split() for ln in subprocess.run([exe], capture_output=True, text=True,
                                                     check=True).stdout.splitlines())}

for f in fields:
    if f not in rows:
        problems.append(f"{f}: in the header, no row in the ABI's table")
    elif rows[f][:2] != compiled[f]:
        problems.append(f"{f}: the ABI says offset {rows[f][0]}, {rows[f][1]} bytes; "
                        f"the compiler {compiled[f][0]}, {compiled[f][1]}")
for f in rows:
    if f not in compiled:
        problems.append(f"{f}: a row of the ABI's table, no field of the header")
version = re.search(r"#define TSCFK_CLOCK_PAGE_VERSION (\d+)", header).group(1)
if f"Layout version {version}," not in abi:
    problems.append(f"the header's layout is version {version}; the ABI says another")
if "staleness bound" not in rows.get("max_cycles", (0, 0, ""))[2]:
    problems.append("max_cycles: the ABI's row does not call it a staleness bound")

for p in problems:
    print(f"check-abi-layout: {p}")
print(f"# ABI layout: {len(fields)} fields of the clock page, "
      + ("the ABI's table is the header's" if not problems else f"{len(problems)} problems"))
sys.exit(1 if problems else 0)
