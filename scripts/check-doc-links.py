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

Prints FILE:LINE: broken link TARGET (why) for each broken link and exits
1; else one summary line, and exits 0.  Usage: check-doc-links.py [ROOT]
(default: the repository this script is in).
"""

import functools
import glob
import os
import re
import sys
from urllib.parse import unquote

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE = re.compile(r"\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<a\s[^>]*\b(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def lines_outside_code(path):
    """(line number, text) of each line outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if fence is None:
                if m:
                    fence = m.group(1)
                    continue
                yield n, line
            elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line[m.end():].strip():
                fence = None


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
    if broken:
        print("# doc links: %d of %d links in %d files broken" % (broken, links, len(files)))
        return 1
    print("# doc links: %d links in %d files, all resolve" % (links, len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
