#!/usr/bin/env python3
"""Tests of run_examples.py on the pages of fixtures/: a drifted page fails, naming the page, the
line and a diff; every form of the notation matches; a page that is not examples (a `not run`
without a reason, a `$ ` block of another language, an unknown setting, output before any
command) fails; and every docs/*.md of a source tree is checked without being listed.

Usage: run_examples_test.py RUN_EXAMPLES SOURCE_DIR BUILD_DIR
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

RUNNER, SOURCE, BUILD = (os.path.abspath(a) for a in sys.argv[1:4])
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def run(*pages, source=SOURCE):
    """The runner's exit status and output on `pages` (paths relative to fixtures/)."""
    result = subprocess.run(
        [sys.executable, RUNNER, "--source", source, "--build", BUILD, *pages],
        cwd=FIXTURES, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return result.returncode, result.stdout


class RunExamplesTest(unittest.TestCase):
    def test_a_drifted_page_fails_naming_the_page_the_line_and_a_diff(self):
        status, output = run("drifted.md")
        self.assertEqual(status, 1, output)
        self.assertIn("drifted.md:6: `$ echo hello` printed something else than the page shows",
                      output)
        self.assertIn("--- the page, from drifted.md:7", output)
        self.assertIn("-goodbye", output)
        self.assertIn("+hello", output)

    def test_every_form_of_the_notation_matches(self):
        status, output = run("notation.md")
        self.assertEqual(status, 0, output)
        self.assertIn("notation.md: 3 run, 1 marked not run", output)

    def test_wildcards_stand_for_what_they_say_only(self):
        status, output = run("strict.md")
        self.assertEqual(status, 1, output)
        self.assertIn("2 failure(s)", output)
        self.assertIn("strict.md:6: `$ echo \"pid none\"` printed something else", output)
        self.assertIn("strict.md:13: `$ printf 'first\\nsecond\\nthird\\n'` printed something else",
                      output)

    def test_not_run_needs_a_reason(self):
        status, output = run("unreasoned.md")
        self.assertEqual(status, 1, output)
        self.assertIn("unreasoned.md:1: a block marked `not run` must say why", output)

    def test_commands_with_output_in_another_language_fail(self):
        status, output = run("dollar-in-sh.md")
        self.assertEqual(status, 1, output)
        self.assertIn("dollar-in-sh.md:1: a ```sh block that starts with `$ `", output)

    def test_an_unknown_setting_fails(self):
        status, output = run("unknown-setting.md")
        self.assertEqual(status, 1, output)
        self.assertIn("unknown-setting.md:1: unknown setting 'hots=islands-8'", output)

    def test_output_before_any_command_fails(self):
        status, output = run("output-first.md")
        self.assertEqual(status, 1, output)
        self.assertIn("output-first.md:2: a ```console block starts with output", output)

    def test_every_page_of_docs_is_checked_without_being_listed(self):
        source = tempfile.mkdtemp(prefix="flink-gpu-docs-test-")
        try:
            os.mkdir(os.path.join(source, "docs"))
            shutil.copy(os.path.join(FIXTURES, "notation.md"), os.path.join(source, "README.md"))
            shutil.copy(os.path.join(FIXTURES, "notation.md"), os.path.join(source, "docs/a.md"))
            shutil.copy(os.path.join(FIXTURES, "drifted.md"), os.path.join(source, "docs/new.md"))
            status, output = run(source=source)
            self.assertEqual(status, 1, output)
            self.assertIn("checked 3 pages", output)
            for page in ("README.md", "docs/a.md", "docs/new.md"):
                self.assertIn("  %s: " % page, output)
            self.assertIn("docs/new.md:6: `$ echo hello` printed something else", output)
        finally:
            shutil.rmtree(source)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
