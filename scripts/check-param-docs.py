#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The modprobe.d example's text for each parameter is the module's own.

packaging/modprobe.d/tsc_freq_khz.conf says its lines are what modinfo
prints: each parameter's description there, continuation lines joined,
must equal its MODULE_PARM_DESC() in module/main.c, and every parameter
of one must be in the other.

Usage: check-param-docs.py [REPO]   (default: this script's repository)
Exit: 0 if they agree, 1 if not.
"""
import pathlib
import re
import sys

repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
source = (repo / "module/main.c").read_text()
module = dict(re.findall(r'MODULE_PARM_DESC\((\w+),\s*"((?:[^"\\]|\\.)*)"\);', source))

conf = {}
name = None
for line in (repo / "packaging/modprobe.d/tsc_freq_khz.conf").read_text().splitlines():
    m = re.match(r"# (\w+) +(\S.*)$", line)
    if m and m.group(1) in module:
        name = m.group(1)
        conf[name] = m.group(2)
    elif name and re.match(r"# {5,}\S", line):
        conf[name] += " " + line[1:].strip()
    else:
        name = None

bad = 0
for param in sorted(set(module) | set(conf)):
    if module.get(param) != conf.get(param):
        bad += 1
        print(f"check-param-docs: {param}: module/main.c says {module.get(param)!r}, "
              f"the modprobe.d example {conf.get(param)!r}")
print(f"# parameter docs: {len(module)} parameters, "
      + ("the modprobe.d example says what modinfo says" if not bad else f"{bad} differ"))
sys.exit(1 if bad else 0)
