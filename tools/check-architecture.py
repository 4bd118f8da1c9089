#!/usr/bin/env python3
"""Checks that ARCHITECTURE.md names only files and folders that exist.

Every `backticked` path under Sources/, Tests/, Benchmarks/ or tools/ must exist; every other
backticked path (`Support/VirtualPair.swift`, `Bridge/`) must be the end of a path in the
repository; every backticked file name ending in .swift, .py or .sh must be the name of a file
in it. Placeholders (the words NAME and TARGET, or a `*`) are not checked.
Exits 1 and lists what is missing otherwise.

Usage: tools/check-architecture.py [ROOT]   (default: the repository this script is in)
"""
import os
import re
import sys

TOP_FOLDERS = ("Sources/", "Tests/", "Benchmarks/", "tools/", "docs/")
FILE_SUFFIXES = (".swift", ".py", ".sh")


def paths(root):
    """Every file and folder under the repository's source folders, relative to `root`
    (folders with a trailing slash), and the files at its top."""
    found = set(name for name in os.listdir(root) if os.path.isfile(os.path.join(root, name)))
    for top in TOP_FOLDERS:
        for folder, folders, files in os.walk(os.path.join(root, top)):
            relative = os.path.relpath(folder, root)
            found.update(os.path.join(relative, name) for name in files)
            found.update(os.path.join(relative, name) + "/" for name in folders)
    return found


PLACEHOLDERS = ("NAME", "TARGET")


def is_placeholder(token):
    return "*" in token or any(re.search(rf"(?<![A-Za-z]){word}(?![A-Za-z])", token) for word in PLACEHOLDERS)


def missing(root, text):
    """The backticked paths and file names of `text` that do not exist under `root`."""
    known = paths(root)
    problems = []
    for token in sorted(set(re.findall(r"`([^`\s]+)`", text))):
        if is_placeholder(token):
            continue
        if token.startswith(TOP_FOLDERS):
            exists = os.path.exists(os.path.join(root, token))
        elif "/" in token and re.fullmatch(r"[\w./+-]+", token):
            exists = any(path == token or path.endswith("/" + token) for path in known)
        elif token.endswith(FILE_SUFFIXES):
            exists = any(os.path.basename(path) == token for path in known)
        else:
            continue
        if not exists:
            problems.append(token)
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "ARCHITECTURE.md")
    with open(path, encoding="utf-8") as f:
        problems = missing(root, f.read())
    if problems:
        print("ARCHITECTURE.md names what does not exist:", file=sys.stderr)
        for token in problems:
            print(f"  {token}", file=sys.stderr)
        return 1
    print("every path ARCHITECTURE.md names exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
