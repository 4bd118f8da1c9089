#!/usr/bin/env python3
"""Checks that every ```swift example in a /// doc comment, a DocC article under Sources/, the README or docs/ is compiled.

Tests/BraidTests/Docs/DocCommentExamples.swift holds each doc-comment example pasted into a
function. The Markdown examples (the articles in a `.docc` catalog, README.md and docs/*.md)
are pasted into Tests/BraidTests/Docs/ArticleExamples.swift (compiled) or
Tests/BraidTests/Braid/ReadmeExamples.swift (compiled, and most of them run against each
other there); either file counts. So an example that no longer compiles breaks the test build.
This script catches the other way an example goes stale: edited in the documentation but not
in the test file (or never added).

An example passes when its lines, each stripped of leading and trailing whitespace, appear as a
contiguous run of (likewise stripped) lines of the test file; only indentation may differ.
Prints file:line for each offender and exits 1 if there is any, else exits 0.

Usage: tools/check-doc-examples.py [--root REPOSITORY]
"""

import argparse
import os
import sys
from dataclasses import dataclass, field

EXAMPLES_FILE = os.path.join("Tests", "BraidTests", "Docs", "DocCommentExamples.swift")
ARTICLE_EXAMPLES_FILE = os.path.join("Tests", "BraidTests", "Docs", "ArticleExamples.swift")
README_EXAMPLES_FILE = os.path.join("Tests", "BraidTests", "Braid", "ReadmeExamples.swift")
# Where a Markdown example (article, README, docs/) may be found.
MARKDOWN_EXAMPLE_FILES = (ARTICLE_EXAMPLES_FILE, README_EXAMPLES_FILE)


@dataclass
class Example:
    path: str  # relative to the repository root
    line: int  # 1-based line of the opening ```swift fence
    lines: list[str] = field(default_factory=list)  # stripped
    terminated: bool = False


def doc_text(line: str) -> str | None:
    """The text after `///`, or None when the line is not a doc-comment line."""
    stripped = line.lstrip()
    if not stripped.startswith("///"):
        return None
    return stripped[3:]


def article_text(line: str) -> str:
    """Every line of a Markdown article is text."""
    return line.rstrip("\n")


def extract_examples(path: str, relative: str, text_of=doc_text) -> list[Example]:
    """The ```swift blocks of the /// comments in one file (of the whole file for an article,
    `text_of=article_text`). Other fences (```text, plain ```) are skipped whole, so their
    closing fence is not taken for an opening one."""
    examples: list[Example] = []
    current: Example | None = None
    skipping = False
    with open(path, encoding="utf-8") as source:
        for number, line in enumerate(source, start=1):
            text = text_of(line)
            if text is None:
                # A doc comment ends at the first other line, and so does any block in it.
                current, skipping = None, False
                continue
            content = text.strip()
            if current is not None:
                if content.startswith("```"):
                    current.terminated = True
                    current = None
                else:
                    current.lines.append(content)
            elif skipping:
                skipping = not content.startswith("```")
            elif content.startswith("```"):
                if content[3:].strip() == "swift":
                    current = Example(relative, number)
                    examples.append(current)
                else:
                    skipping = True
    return examples


def all_examples(root: str) -> list[Example]:
    examples: list[Example] = []
    sources = os.path.join(root, "Sources")
    for directory, subdirectories, files in os.walk(sources):
        subdirectories.sort()
        for name in sorted(files):
            path = os.path.join(directory, name)
            if name.endswith(".swift"):
                examples += extract_examples(path, os.path.relpath(path, root))
            elif name.endswith(".md") and ".docc" in directory:
                examples += extract_examples(path, os.path.relpath(path, root), article_text)
    readme = os.path.join(root, "README.md")
    if os.path.isfile(readme):
        examples += extract_examples(readme, "README.md", article_text)
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        for name in sorted(os.listdir(docs)):
            if name.endswith(".md"):
                path = os.path.join(docs, name)
                examples += extract_examples(path, os.path.relpath(path, root), article_text)
    return examples


def contains_run(haystack: list[str], needle: list[str]) -> bool:
    width = len(needle)
    return any(haystack[start:start + width] == needle for start in range(len(haystack) - width + 1))


def longest_present_prefix(haystack: list[str], needle: list[str]) -> int:
    """How many leading lines of `needle` appear together somewhere: points at the first line
    that differs, which is usually the edited one."""
    count = 0
    while count < len(needle) and contains_run(haystack, needle[:count + 1]):
        count += 1
    return count


def problems(root: str) -> tuple[list[str], int]:
    """Messages for the offending examples, and how many examples there are."""
    examples = all_examples(root)
    try:
        with open(os.path.join(root, EXAMPLES_FILE), encoding="utf-8") as file:
            compiled = [line.strip() for line in file]
    except FileNotFoundError:
        compiled = None
    # The files are kept apart (a run may not span two of them), each ending its own lines.
    articles: list[str] = []
    for relative in MARKDOWN_EXAMPLE_FILES:
        try:
            with open(os.path.join(root, relative), encoding="utf-8") as file:
                articles += [line.strip() for line in file] + ["\0"]
        except FileNotFoundError:
            pass
    messages = []
    for example in examples:
        where = f"{example.path}:{example.line}"
        if not example.terminated:
            messages.append(f"{where}: ```swift block without a closing ``` in the same doc comment")
        elif example.path.endswith(".md"):
            if not contains_run(articles, example.lines):
                found = longest_present_prefix(articles, example.lines)
                messages.append(
                    f"{where}: example not found verbatim in {ARTICLE_EXAMPLES_FILE} or {README_EXAMPLES_FILE}; "
                    f"first differing line: {example.lines[found]!r}")
        elif compiled is None:
            messages.append(f"{where}: example not checked: {EXAMPLES_FILE} does not exist")
        elif not contains_run(compiled, example.lines):
            found = longest_present_prefix(compiled, example.lines)
            messages.append(
                f"{where}: example not found verbatim in {EXAMPLES_FILE}; "
                f"first differing line: {example.lines[found]!r}")
    return messages, len(examples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--root", default=default_root, help="repository root (default: this script's)")
    root = parser.parse_args().root
    if not os.path.isdir(os.path.join(root, "Sources")):
        print(f"no Sources/ directory under {root}", file=sys.stderr)
        return 2
    messages, count = problems(root)
    for message in messages:
        print(message, file=sys.stderr)
    if messages:
        print(f"{len(messages)} of {count} examples are not compiled; paste each verbatim into a function "
              f"of {EXAMPLES_FILE} (doc comments), or of {ARTICLE_EXAMPLES_FILE} or {README_EXAMPLES_FILE} "
              "(articles, README.md, docs/); only "
              "indentation may differ", file=sys.stderr)
        return 1
    print(f"all {count} doc-comment, article, README and docs/ examples are compiled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
