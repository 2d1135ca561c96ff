#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check that every relative link in the project's Markdown resolves.

The README is short and points into Documentation/, one topic per file, so
a file moved or a heading renamed breaks links that nothing else would
notice.  This scans README.md, userspace/README.md and Documentation/**/*.md
for inline links and images, [text](target), and reference definitions,
[label]: target, outside code spans and fenced code blocks.  External links
(any scheme: http, https, mailto, ...) are not followed.  A relative target
must name a file or directory that exists, relative to the Markdown file;
a #anchor into a Markdown file must be the GitHub slug of one of its
headings (lower case, punctuation but '-' and '_' dropped, spaces to '-',
-1, -2, ... for repeats).

And that every make target named is one of the Makefile's that the
command runs: -C DIR's, else the nearest Makefile up the tree from the
file's or the top level's.  Named: in the same Markdown, in code (a code
span or a fenced block: "make check", "sudo make -C userspace install");
in the man pages (userspace/man/), in bold (.B, .BR and kin, \fB...\fR)
or in an .EX example; in the ABI files (Documentation/ABI/), as
"(make TARGET)" or "(make -C DIR TARGET)".  And that every .PHONY target
of the top level has a line in make help (mk/help.mk), and each line
there a target.

Prints FILE:LINE: broken link TARGET (why) for each broken link, FILE:LINE:
no make target TARGET for each, and exits 1; else one summary line, and
exits 0.  Usage: check-doc-links.py [ROOT] (default: the repository this
script is in).
"""

import functools
import glob
import os
import re
import shlex
import subprocess
import sys
from urllib.parse import unquote

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE = re.compile(r"\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<a\s[^>]*\b(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
MAKE_CMD = re.compile(r"(sudo\s+)?make(\s|$)")
PROMPT = re.compile(r"^\s*\$?\s*")
# The man pages' bold: a request's (.B: its arguments, or the next line's
# text if it has none; .BR and kin: every other argument, split as roff
# does, where an apostrophe is no quote), and \fB...\fR spans.
ROFF_BOLD = re.compile(r"^\.(B|BR|RB|BI|IB)(?:\s+(.*))?$")
ROFF_ARG = re.compile(r'"((?:[^"]|"")*)"?|(\S+)')
ROFF_BOLD_SPAN = re.compile(r"\\f(?:B|\[B\])(.*?)(?=\\f(?:[RIP]|\[[RIP]?\])|$)")
ROFF_ESCAPE = re.compile(r"\\f(?:[BIRP]|\(..|\[[^]]*\])|\\&")
ABI_MAKE = re.compile(r"\(((?:sudo\s+)?make(?:\s+-C\s+\S+)?\s+[a-z0-9][a-z0-9_.+-]*)\)")
# The environment of this script's own makes: a calling make's flags
# (-w, a jobserver this process does not pass on) would put "Entering
# directory" lines in their output.
MAKE_ENV = {k: v for k, v in os.environ.items()
            if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}


def lines_by_fence(path):
    """(line number, text, inside a fenced code block) of each line but the fences."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if fence is None:
                if m:
                    fence = m.group(1)
                    continue
                yield n, line, False
            elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line[m.end():].strip():
                fence = None
            else:
                yield n, line, True


def lines_outside_code(path):
    """(line number, text) of each line outside fenced code blocks."""
    for n, line, code in lines_by_fence(path):
        if not code:
            yield n, line


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)                     # inline HTML
    text = text.replace("`", "").replace("*", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    """Every anchor a Markdown file defines."""
    found, seen = set(), {}
    for _, line in lines_outside_code(path):
        m = HEADING.match(line)
        if m:
            s = slug(m.group(2))
            found.add(s if s not in seen else "%s-%d" % (s, seen[s]))
            seen[s] = seen.get(s, 0) + 1
        found.update(HTML_ID.findall(line))
    return found


def problem(root, md, target):
    """Why target, a link in md, does not resolve; None if it does."""
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    path, _, anchor = target.partition("#")
    path = unquote(path)
    if not path:
        dest = md
    elif path.startswith("/"):
        dest = os.path.join(root, path.lstrip("/"))
    else:
        dest = os.path.join(os.path.dirname(md), path)
    dest = os.path.normpath(dest)
    if os.path.relpath(dest, root).startswith(os.pardir):
        return "outside the repository"
    if not os.path.exists(dest):
        return "no such file or directory"
    if anchor and dest.endswith(".md"):
        if os.path.isdir(dest):
            return "an anchor into a directory"
        if unquote(anchor) not in anchors(dest):
            return "no heading #%s in %s" % (anchor, os.path.relpath(dest, root))
    return None


@functools.lru_cache(maxsize=None)
def make_database(directory):
    """(targets, phony) of the Makefile in directory, from make's database."""
    out = subprocess.run(["make", "--no-print-directory", "-pRrq", "-C", directory, ":"],
                         capture_output=True, text=True, env=MAKE_ENV).stdout
    targets, phony, skip = set(), set(), False
    for line in out.splitlines():
        if line == "# Not a target:":
            skip = True
            continue
        m = re.match(r"^([^#\s%][^:=]*?):(?![=:])(.*)$", line)
        if m and not skip:
            names = m.group(1).split()
            if names == [".PHONY"]:
                phony.update(m.group(2).split())
            else:
                targets.update(names)
        skip = False
    return frozenset(targets), frozenset(phony)


def make_ones(n, cmds):
    """(n, command) of each of the commands cmds that runs make."""
    for cmd in cmds:
        if MAKE_CMD.match(cmd.strip()):
            yield n, cmd.strip()


def make_commands(path):
    """(line number, command) of each make command in code in path."""
    for n, line, code in lines_by_fence(path):
        if code:
            cmds = [PROMPT.sub("", line)]
        else:
            cmds = [c[1] for c in CODE_SPAN.findall(line)]
        yield from make_ones(n, cmds)


def roff_text(text):
    """text with roff's font escapes dropped and its escaped hyphens plain."""
    return ROFF_ESCAPE.sub("", text).replace("\\-", "-")


def roff_args(text):
    """The arguments of a roff request, split as roff does."""
    return [q.replace('""', '"') if q or not w else w for q, w in ROFF_ARG.findall(text)]


def roff_bold(line, after_b):
    """The bold texts of a man page's line; after_b: it follows a bare .B."""
    m = ROFF_BOLD.match(line)
    if after_b and not line.startswith("."):
        texts = [line]
    elif m and m.group(2):
        args = roff_args(m.group(2))
        texts = [" ".join(args)] if m.group(1) == "B" else args[m.group(1)[0] != "B"::2]
    else:
        texts = []
    return [roff_text(t) for t in texts + ROFF_BOLD_SPAN.findall(line)]


def roff_make_commands(path):
    """(line number, command) of each make command in bold or in an example."""
    example = after_b = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line.startswith((".EX", ".EE")):
                example = line.startswith(".EX")
                continue
            if example:
                cmds = [PROMPT.sub("", roff_text(line))]
            else:
                cmds = roff_bold(line, after_b)
            after_b = line.strip() == ".B"
            yield from make_ones(n, cmds)


def abi_make_commands(path):
    """(line number, command) of each "(make [-C DIR] TARGET)" in an ABI file."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            for cmd in ABI_MAKE.findall(line):
                yield n, cmd.strip()


def commands_of(path):
    """The make commands of a Markdown file, a man page or an ABI file."""
    if re.search(r"\.[1-8]$", path):
        return roff_make_commands(path)
    if not path.endswith(".md"):
        return abi_make_commands(path)
    return make_commands(path)


def nearest_makefile_dir(root, path):
    """The directory of the nearest Makefile from path's up to root, or None."""
    d = os.path.dirname(os.path.abspath(path))
    while True:
        if os.path.isfile(os.path.join(d, "Makefile")):
            return d
        if d == root or d == os.path.dirname(d):
            return None
        d = os.path.dirname(d)


def make_targets(cmd):
    """(directory or None, [targets]) of a make command; None if not checkable."""
    try:
        words = shlex.split(cmd, comments=True)
    except ValueError:
        return None
    if words and words[0] == "sudo":
        words = words[1:]
    directory, targets, i = None, [], 1
    while i < len(words):
        w = words[i]
        if w in ("&&", "||", ";", "|") or w.startswith((">", "<", "|")):
            break
        if w == "-C" and i + 1 < len(words):
            directory, i = words[i + 1], i + 2
            continue
        if w in ("-f", "--file") or w.startswith("-f"):
            return None
        if not w.startswith("-") and "=" not in w:
            targets.append(w.rstrip(",.;:)"))
        i += 1
    return directory, targets


def check_make(root, files):
    """Problems with the make targets the files name, and help's list."""
    bad, named = [], 0
    for md in files:
        for n, cmd in commands_of(md):
            got = make_targets(cmd)
            if not got:
                continue
            directory, targets = got
            if directory:
                places = [os.path.join(root, directory)]
            else:
                near = nearest_makefile_dir(root, md)
                places = ([near] if near else []) + [root]
            for t in targets:
                named += 1
                if not any(t in make_database(p)[0] for p in places):
                    bad.append("%s:%d: no make target %s (in %s)" %
                               (os.path.relpath(md, root), n, t, cmd))
    phony = make_database(root)[1]
    helped = set(subprocess.run(["make", "--no-print-directory", "-s", "-C", root, "help-targets"],
                                capture_output=True, text=True, env=MAKE_ENV).stdout.split())
    bad += ["Makefile: .PHONY target %s has no line in make help (mk/help.mk)" % t
            for t in sorted(phony - helped)]
    bad += ["mk/help.mk: %s is in make help but not a .PHONY target" % t
            for t in sorted(helped - phony)]
    return bad, named


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), os.pardir))
    files = [os.path.join(root, f) for f in ("README.md", "userspace/README.md")]
    files += sorted(glob.glob(os.path.join(root, "Documentation", "**", "*.md"),
                              recursive=True))
    files = [f for f in files if os.path.isfile(f)]
    links = broken = 0
    for md in files:
        for n, line in lines_outside_code(md):
            text = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
            targets = INLINE.findall(text)
            m = REFDEF.match(text)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if SCHEME.match(target.strip("<>")):
                    continue
                links += 1
                why = problem(root, md, target)
                if why:
                    broken += 1
                    print("%s:%d: broken link %s (%s)" %
                          (os.path.relpath(md, root), n, target, why))
    others = sorted(glob.glob(os.path.join(root, "userspace", "man", "*.[1-8]")))
    others += sorted(glob.glob(os.path.join(root, "Documentation", "ABI", "**", "*"),
                               recursive=True))
    named_in = files + [f for f in others if os.path.isfile(f)]
    bad, named = check_make(root, named_in)
    for line in bad:
        print(line)
    if broken or bad:
        print("# doc links: %d of %d links in %d Markdown files broken; %d problems with make "
              "targets" % (broken, links, len(files), len(bad)))
        return 1
    print("# doc links: %d links in %d Markdown files, all resolve; %d make targets named in "
          "%d files (Markdown, man pages, ABI), all exist, and make help lists every one" %
          (links, len(files), named, len(named_in)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
