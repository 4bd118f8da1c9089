"""Tests for check-doc-examples.py, run as a subprocess on small repositories in temp dirs.

Run from the repository root:
    python3 -m unittest discover -s tools -p 'test_check_doc_examples.py'
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check-doc-examples.py")
EXAMPLES_FILE = os.path.join("Tests", "BraidTests", "Docs", "DocCommentExamples.swift")
ARTICLE_EXAMPLES_FILE = os.path.join("Tests", "BraidTests", "Docs", "ArticleExamples.swift")
README_EXAMPLES_FILE = os.path.join("Tests", "BraidTests", "Braid", "ReadmeExamples.swift")
ARTICLE = os.path.join("Sources", "Greeter", "Greeter.docc", "GettingStarted.md")

# An article with one Swift example (at line 5) and a shell block that is not checked.
ARTICLE_TEXT = textwrap.dedent('''\
    # Getting started

    Say hello:

    ```swift
    Greeter().greet(name: "reader")
    ```

    ```
    swift run
    ```
    ''')

# Two examples: the one on `Greeter` opens at line 3, the one on `greet` at line 9.
SOURCE = textwrap.dedent('''\
    /// Says hello.
    ///
    /// ```swift
    /// let greeter = Greeter()
    /// greeter.greet(name: "world")
    /// ```
    public struct Greeter {
        /// Prints a greeting.
        /// ```swift
        /// greeter.greet(name: "you")
        /// ```
        public func greet(name: String) { print("hello \\(name)") }
    }
    ''')

BOTH_EXAMPLES = textwrap.dedent('''\
    func docExample_Greeter() {
        let greeter = Greeter()
        greeter.greet(name: "world")
    }

    func docExample_Greeter_greet(greeter: Greeter) {
            greeter.greet(name: "you")
    }
    ''')


class CheckDocExamplesTests(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.root = self.directory.name
        self.write(os.path.join("Sources", "Greeter", "Greeter.swift"), SOURCE)

    def tearDown(self):
        self.directory.cleanup()

    def write(self, relative, text):
        path = os.path.join(self.root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)

    def check(self):
        result = subprocess.run(
            [sys.executable, CHECKER, "--root", self.root], capture_output=True, text=True, timeout=30)
        return result.returncode, result.stderr

    def test_passes_when_every_example_is_pasted_whatever_the_indentation(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.assertEqual(self.check(), (0, ""))

    def test_names_the_example_missing_from_the_test_file(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES.replace('greeter.greet(name: "you")', ""))
        status, errors = self.check()
        self.assertEqual(status, 1)
        self.assertIn(os.path.join("Sources", "Greeter", "Greeter.swift") + ":9:", errors)
        self.assertNotIn("Greeter.swift:3:", errors)

    def test_an_example_edited_in_the_source_only_fails(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write(os.path.join("Sources", "Greeter", "Greeter.swift"), SOURCE.replace('"world"', '"everyone"'))
        status, errors = self.check()
        self.assertEqual(status, 1)
        self.assertIn("Greeter.swift:3:", errors)
        # The message points at the line that changed.
        self.assertIn('greeter.greet(name: "everyone")', errors)

    def test_lines_must_be_contiguous(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES.replace("Greeter()\n", "Greeter()\n    print(greeter)\n"))
        status, errors = self.check()
        self.assertEqual(status, 1)
        self.assertIn("Greeter.swift:3:", errors)

    def test_unterminated_block_fails(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write(os.path.join("Sources", "Open.swift"), "/// ```swift\n/// let x = 1\nlet x = 1\n")
        status, errors = self.check()
        self.assertEqual(status, 1)
        self.assertIn("Open.swift:1:", errors)

    def test_other_fences_and_plain_comments_are_ignored(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write(
            os.path.join("Sources", "Other.swift"),
            "/// ```text\n/// not swift\n/// ```\n// ```swift\n// not a doc comment\n// ```\nlet y = 2\n")
        self.assertEqual(self.check(), (0, ""))

    def test_missing_test_file_fails_for_every_example(self):
        status, errors = self.check()
        self.assertEqual(status, 1)
        self.assertIn("Greeter.swift:3:", errors)
        self.assertIn("Greeter.swift:9:", errors)

    def test_an_article_example_must_be_in_the_article_examples_file(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write(ARTICLE, ARTICLE_TEXT)
        status, errors = self.check()
        self.assertEqual(status, 1)
        self.assertIn(ARTICLE + ":5:", errors)
        self.assertIn(ARTICLE_EXAMPLES_FILE, errors)

    def test_an_article_example_in_the_doc_comment_file_does_not_count(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES + 'func article() { Greeter().greet(name: "reader") }\n')
        self.write(ARTICLE, ARTICLE_TEXT)
        status, errors = self.check()
        self.assertEqual(status, 1)
        self.assertIn(ARTICLE + ":5:", errors)

    def test_passes_when_the_article_example_is_pasted(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write(ARTICLE, ARTICLE_TEXT)
        self.write(ARTICLE_EXAMPLES_FILE, 'func article() {\n    Greeter().greet(name: "reader")\n}\n')
        self.assertEqual(self.check(), (0, ""))

    def test_a_readme_example_must_be_compiled(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write("README.md", ARTICLE_TEXT)
        status, errors = self.check()
        self.assertEqual(status, 1)
        self.assertIn("README.md:5:", errors)
        self.assertIn(README_EXAMPLES_FILE, errors)

    def test_a_readme_example_in_the_readme_examples_file_passes(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write("README.md", ARTICLE_TEXT)
        self.write(README_EXAMPLES_FILE, 'func readme() {\n    Greeter().greet(name: "reader")\n}\n')
        self.assertEqual(self.check(), (0, ""))

    def test_an_article_example_in_the_readme_examples_file_passes(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write(ARTICLE, ARTICLE_TEXT)
        self.write(README_EXAMPLES_FILE, 'func readme() {\n    Greeter().greet(name: "reader")\n}\n')
        self.assertEqual(self.check(), (0, ""))

    def test_a_docs_example_must_be_compiled(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write(os.path.join("docs", "guide.md"), ARTICLE_TEXT)
        status, errors = self.check()
        self.assertEqual(status, 1)
        self.assertIn(os.path.join("docs", "guide.md") + ":5:", errors)

    def test_an_example_may_not_span_two_files(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write("README.md", "```swift\nlet a = 1\nlet b = 2\n```\n")
        self.write(ARTICLE_EXAMPLES_FILE, "func one() {\n    let a = 1\n")
        self.write(README_EXAMPLES_FILE, "    let b = 2\n}\n")
        status, errors = self.check()
        self.assertEqual(status, 1)
        self.assertIn("README.md:1:", errors)

    def test_markdown_outside_a_catalog_is_not_an_article(self):
        self.write(EXAMPLES_FILE, BOTH_EXAMPLES)
        self.write(os.path.join("Sources", "Greeter", "NOTES.md"), ARTICLE_TEXT)
        self.assertEqual(self.check(), (0, ""))


if __name__ == "__main__":
    unittest.main()
