"""Tests for tools/check-architecture.py on a small repository made for each test."""
import importlib.util
import os
import tempfile
import unittest

spec = importlib.util.spec_from_file_location(
    "check_architecture", os.path.join(os.path.dirname(os.path.abspath(__file__)), "check-architecture.py"))
check_architecture = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_architecture)


class CheckArchitectureTests(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.root = self.directory.name
        for path in ["Sources/Braid/QUIC/QUIC.swift", "Tests/BraidTests/Support/VirtualPair.swift", "tools/fuzz.sh",
                     "Package.swift"]:
            full = os.path.join(self.root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            open(full, "w").close()

    def tearDown(self):
        self.directory.cleanup()

    def missing(self, text):
        return check_architecture.missing(self.root, text)

    def test_existing_paths_pass(self):
        text = "`Sources/Braid/QUIC/QUIC.swift`, `Sources/Braid/QUIC/`, `tools/fuzz.sh`, `Package.swift`"
        self.assertEqual(self.missing(text), [])

    def test_a_moved_file_is_reported(self):
        self.assertEqual(self.missing("see `Sources/Braid/Stack/QUIC.swift`"), ["Sources/Braid/Stack/QUIC.swift"])

    def test_relative_paths_must_end_a_real_path(self):
        self.assertEqual(self.missing("`Support/VirtualPair.swift` and `QUIC/`"), [])
        self.assertEqual(self.missing("`Support/MemoryPair.swift`"), ["Support/MemoryPair.swift"])

    def test_bare_file_names_must_exist_somewhere(self):
        self.assertEqual(self.missing("`VirtualPair.swift`"), [])
        self.assertEqual(self.missing("`Gone.swift`"), ["Gone.swift"])

    def test_placeholders_and_code_are_not_checked(self):
        self.assertEqual(self.missing("`Sources/Braid/NAME/`, `*FuzzInput.swift`, `a + b`, `QUICChannel`"), [])


if __name__ == "__main__":
    unittest.main()
