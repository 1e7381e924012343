#!/usr/bin/env python3
"""Runs the command examples of README.md and docs/*.md and compares their output with the page.

An example is a fenced block tagged `console`: `$ command` lines, each followed by the output the
page shows for it. Each block runs in a bash of its own, in a scratch folder, against the
project's stand-ins (the NVML stand-in and its host descriptions, the sysfs fixture trees, the
fixture scripts), and what a terminal would show is compared with the page: a page that drifts
fails, naming the page, the line and a diff. The notation for what varies, and the markers, are
documented in tests/docs/README.md; keep the two in step.

Usage: run_examples.py --source DIR --build DIR [PAGE...]
  Without PAGE: README.md and every docs/*.md of DIR, found when it runs, so that a new page is
  checked without anyone listing it. With PAGE (paths relative to the working directory): those
  pages only (the runner's own tests).
Exit status: 0 when every example ran as shown, 1 when one did not, 2 on a usage error.
"""

import argparse
import difflib
import errno
import glob
import os
import pty
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import time

# How long one block may run (all its commands), in seconds.
BLOCK_TIMEOUT = 60
# Fenced blocks of these languages are examples.
EXAMPLE_LANGUAGES = {"console"}
# A line of the page's output that stands for any number of lines, and the wildcards within a line.
ANY_LINES = {"…", "..."}
WILDCARDS = {
    "…": ".*?",
    "...": ".*?",
    "<pid>": "[0-9]+",
    "<time>": r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z",
}
WILDCARD_PATTERN = re.compile(
    "|".join(re.escape(w) for w in sorted(WILDCARDS, key=len, reverse=True)))
MARKER = re.compile(r"^\s*<!--\s*example:(.*?)-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
# Markers' keys: the stand-in NVML host, and variables.
MARKER_KEYS = {"host", "env"}
# The host's own coordination file, and every file beside it: no example may touch them (its
# commands name a coordination file under $TMPDIR instead).
HOST_COORDINATION_FILE = "/var/tmp/flink-gpu-coordination"


class PageError(Exception):
    """A page that the runner cannot read as examples (a bad marker, a block without a command)."""


class Example:
    def __init__(self, page, line, language):
        self.page = page
        self.line = line  # 1-based line of the opening fence
        self.language = language
        self.commands = []  # [(line, command text, [(line, expected output line)])]
        self.host = None
        self.env = []  # [(name, value)]
        self.not_run = None  # the reason, for a block marked not run

    def where(self, line=None):
        return "%s:%d" % (self.page, line if line is not None else self.line)


def parse_marker(text, page, line):
    """The settings of `<!-- example: … -->`: {"not_run": reason} or {"host":…, "env": […]}."""
    body = text.strip()
    if body.startswith("not run"):
        reason = body[len("not run"):].lstrip(":").strip()
        if not reason:
            raise PageError("%s:%d: a block marked `not run` must say why: "
                            "<!-- example: not run: <reason> -->" % (page, line))
        return {"not_run": reason}
    settings = {"host": None, "env": []}
    try:
        words = shlex.split(body)
    except ValueError as e:
        raise PageError("%s:%d: the example marker cannot be read: %s" % (page, line, e))
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or key not in MARKER_KEYS or not value:
            raise PageError("%s:%d: unknown setting %r in the example marker (known: host=NAME, "
                            "env=NAME=VALUE, or `not run: <reason>`)" % (page, line, word))
        if key == "host":
            settings["host"] = value
        else:
            name, equals, variable = value.partition("=")
            if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise PageError("%s:%d: env=%s is not NAME=VALUE" % (page, line, value))
            settings["env"].append((name, variable))
    return settings


def read_page(path, shown):
    """The examples of the page at `path` (named `shown` in messages), and its other errors."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    examples = []
    errors = []
    marker = None  # (line, settings) of a marker that waits for its block
    i = 0
    while i < len(lines):
        text = lines[i]
        found = MARKER.match(text)
        if found:
            try:
                marker = (i + 1, parse_marker(found.group(1), shown, i + 1))
            except PageError as e:
                errors.append(str(e))
                marker = None
            i += 1
            continue
        fence = FENCE.match(text)
        if not fence:
            if text.strip() and marker is not None:
                errors.append("%s:%d: the example marker is not followed by a ```console block"
                              % (shown, marker[0]))
                marker = None
            i += 1
            continue
        indent, ticks, language = fence.groups()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(ticks[0] * len(ticks)):
            body.append((i + 1, lines[i][len(indent):] if lines[i].startswith(indent) else lines[i]))
            i += 1
        i += 1  # the closing fence
        if language not in EXAMPLE_LANGUAGES:
            if marker is not None:
                errors.append("%s:%d: the example marker is for a ```console block, not ```%s"
                              % (shown, marker[0], language))
                marker = None
            # Commands with their output belong in a console block, where they are run.
            if body and body[0][1].startswith("$ "):
                errors.append("%s:%d: a ```%s block that starts with `$ `: make it a ```console "
                              "block, run by this test, or drop the `$ `"
                              % (shown, start + 1, language or ""))
            continue
        example = Example(shown, start + 1, language)
        if marker is not None:
            settings = marker[1]
            example.not_run = settings.get("not_run")
            example.host = settings.get("host")
            example.env = settings.get("env", [])
            marker = None
        try:
            read_commands(example, body)
        except PageError as e:
            errors.append(str(e))
            continue
        examples.append(example)
    if marker is not None:
        errors.append("%s:%d: the example marker is not followed by a ```console block"
                      % (shown, marker[0]))
    return examples, errors


def read_commands(example, body):
    """Splits a console block into `$ ` commands (a line ending in `\\` goes on) and output."""
    j = 0
    while j < len(body):
        line, text = body[j]
        if not text.startswith("$ ") and text != "$":
            if not example.commands:
                raise PageError("%s: a ```console block starts with output, not a `$ ` command"
                                % example.where(line))
            example.commands[-1][2].append((line, text))
            j += 1
            continue
        command = text[2:]
        while command.endswith("\\") and j + 1 < len(body):
            j += 1
            command += "\n" + body[j][1]
        example.commands.append((line, command, []))
        j += 1
    if not example.commands:
        raise PageError("%s: an empty ```console block" % example.where())


def line_regex(expected):
    """The regular expression of one line of the page's output, with its wildcards. The blanks
    after a `<pid>` or a `<time>` match any number of blanks: a table pads the value, whose width
    varies, to its column."""
    parts = []
    last = 0
    for found in WILDCARD_PATTERN.finditer(expected):
        parts.append(re.escape(expected[last:found.start()]))
        parts.append(WILDCARDS[found.group(0)])
        last = found.end()
        if found.group(0).startswith("<"):
            padding = len(expected[last:]) - len(expected[last:].lstrip(" "))
            if padding:
                parts.append(" +")
                last += padding
    parts.append(re.escape(expected[last:]))
    return re.compile("".join(parts), re.DOTALL)


def matches(expected, actual):
    """Whether the lines `actual` are what the lines `expected` (with wildcards) show."""
    regexes = [None if line.strip() in ANY_LINES else line_regex(line) for line in expected]
    memo = {}

    def match(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(regexes):
            result = j == len(actual)
        elif regexes[i] is None:
            result = match(i + 1, j) or (j < len(actual) and match(i, j + 1))
        else:
            result = j < len(actual) and regexes[i].fullmatch(actual[j]) is not None and match(
                i + 1, j + 1)
        memo[key] = result
        return result

    return match(0, 0)


def trimmed(lines):
    """Lines without trailing blanks, and without blank lines at the end."""
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


class Scratch:
    """A folder of one block: `work` (the working directory, where `build`, `examples`, `tests`
    and every other entry of the source tree are links) and `tmp` ($TMPDIR, empty)."""

    def __init__(self, source, build):
        self.root = tempfile.mkdtemp(prefix="flink-gpu-docs-")
        self.work = os.path.join(self.root, "work")
        self.tmp = os.path.join(self.root, "tmp")
        self.home = os.path.join(self.root, "home")
        for folder in (self.work, self.tmp, self.home):
            os.mkdir(folder)
        for entry in os.listdir(source):
            if entry.startswith(".") or entry == "build" or entry.startswith("build-"):
                continue
            os.symlink(os.path.join(source, entry), os.path.join(self.work, entry))
        os.symlink(build, os.path.join(self.work, "build"))

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)


def environment(scratch, source, build, example):
    """A clean environment for a block: nothing of the caller's shell but the sanitizers'
    settings, no NVML unless the marker names a stand-in host."""
    env = {
        "PATH": os.pathsep.join([os.path.join(build, "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": scratch.home,
        "TMPDIR": scratch.tmp,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "TERM": "dumb",
        # As tests/CMakeLists.txt's FLINK_GPU_TEST_WITHOUT_NVML: a path that never exists, so that
        # a GPU host's own libnvidia-ml.so.1 answers no example.
        "FLINK_GPU_NVML_LIBRARY": os.path.join(scratch.root, "no-nvml", "libnvidia-ml.so.1"),
    }
    for name, value in os.environ.items():
        if name.endswith("SAN_OPTIONS"):
            env[name] = value
    if example.host:
        env["FLINK_GPU_NVML_LIBRARY"] = os.path.join(build, "tests/fake-nvml/full/libnvidia-ml.so.1")
        env["FAKE_NVML_DEVICES"] = os.path.join(source, "tests/fixtures/nvml/hosts",
                                                example.host + ".json")
    for name, value in example.env:
        env[name] = value
    return env


def run_block(example, scratch, env):
    """Runs the block's commands in one bash on a terminal (stdout and stderr interleaved as a
    person sees them); returns the output of each command, as lines, or raises TimeoutError."""
    script = ["cd " + shlex.quote(scratch.work)]
    for number, (_, command, _) in enumerate(example.commands):
        script.append("printf '\\036flink-gpu-docs-example %d\\036\\n'" % number)
        script.append(command)
    try:
        master, slave = pty.openpty()
    except OSError as e:
        raise RuntimeError("cannot open a pseudo-terminal (%s): the pages show what a terminal "
                           "shows, stdout and stderr interleaved, so the examples run on one" % e)
    attributes = termios.tcgetattr(slave)
    attributes[1] &= ~termios.ONLCR  # LF stays LF
    attributes[3] &= ~termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, attributes)
    process = subprocess.Popen(["bash", "--norc", "--noprofile", "-c", "\n".join(script)],
                               stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env,
                               cwd=scratch.work, start_new_session=True)
    os.close(slave)
    output = bytearray()
    deadline = time.monotonic() + BLOCK_TIMEOUT
    exited_at = None
    try:
        while True:
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError
            if exited_at is None and process.poll() is not None:
                exited_at = now
            # What a command left running in the background may still write: a short while.
            if exited_at is not None and now - exited_at > 0.5:
                break
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError as e:
                if e.errno != errno.EIO:
                    raise
                data = b""
            if not data:
                if process.poll() is not None:
                    break
                continue
            output += data
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        os.close(master)
    text = output.decode("utf-8", errors="replace").replace("\r\n", "\n")
    for path in {scratch.tmp, os.path.realpath(scratch.tmp)}:
        text = text.replace(path, "$TMPDIR")
    outputs = [[] for _ in example.commands]
    current = None
    for line in text.split("\n"):
        found = re.fullmatch("\x1eflink-gpu-docs-example ([0-9]+)\x1e", line)
        if found:
            current = int(found.group(1))
        elif current is not None:
            outputs[current].append(line)
    return outputs


def host_files():
    """What the host's coordination file and the files beside it are now: path → (inode, size,
    modification time)."""
    state = {}
    for path in glob.glob(glob.escape(HOST_COORDINATION_FILE) + "*"):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        state[path] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return state


def check_example(example, source, build):
    """The failures of one block, as messages."""
    before = host_files()
    failures = check_output(example, source, build)
    after = host_files()
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    if changed:
        failures.append("%s: the block changed the host's coordination files (%s): give its "
                        "commands a coordination file under $TMPDIR (--coordination-file "
                        "\"$TMPDIR/coordination\"), and remove those files if no worker uses them"
                        % (example.where(), ", ".join(changed)))
    return failures


def check_output(example, source, build):
    """The failures of one block's output, as messages."""
    scratch = Scratch(source, build)
    try:
        if example.host and not os.path.isfile(
                os.path.join(source, "tests/fixtures/nvml/hosts", example.host + ".json")):
            return ["%s: host=%s: no tests/fixtures/nvml/hosts/%s.json"
                    % (example.where(), example.host, example.host)]
        env = environment(scratch, source, build, example)
        try:
            outputs = run_block(example, scratch, env)
        except TimeoutError:
            return ["%s: the block did not end within %d s" % (example.where(), BLOCK_TIMEOUT)]
        except RuntimeError as e:
            return ["%s: %s" % (example.where(), e)]
    finally:
        scratch.remove()
    failures = []
    for (line, command, shown), actual in zip(example.commands, outputs):
        expected = trimmed([text for _, text in shown])
        actual = trimmed(actual)
        if matches(expected, actual):
            continue
        first = shown[0][0] if shown else line + 1
        diff = difflib.unified_diff(expected, actual, "the page, from %s" % example.where(first),
                                    "what `$ %s` printed" % command.split("\n")[0], lineterm="", n=2)
        failures.append("%s: `$ %s` printed something else than the page shows:\n%s"
                        % (example.where(line), command.split("\n")[0],
                           "\n".join("    " + d for d in diff)))
    return failures


def default_pages(source):
    pages = ["README.md"] + sorted(
        os.path.relpath(p, source) for p in glob.glob(os.path.join(source, "docs", "*.md")))
    return [(os.path.join(source, page), page) for page in pages]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("pages", nargs="*")
    args = parser.parse_args()
    source = os.path.abspath(args.source)
    build = os.path.abspath(args.build)
    flink_gpu = os.path.join(build, "bin", "flink-gpu")
    if not os.access(flink_gpu, os.X_OK):
        print("run_examples: %s is not built (cmake --build %s --target flink-gpu-docs-examples)"
              % (flink_gpu, build), file=sys.stderr)
        return 2
    pages = [(os.path.abspath(p), p) for p in args.pages] if args.pages else default_pages(source)
    missing = [shown for path, shown in pages if not os.path.isfile(path)]
    if missing or (not args.pages and len(pages) < 2):
        print("run_examples: no page %s under %s" % (", ".join(missing) or "docs/*.md", source),
              file=sys.stderr)
        return 2

    failures = []
    summary = []
    total_run = total_not_run = 0
    for path, shown in pages:
        examples, errors = read_page(path, shown)
        failures += errors
        run = not_run = 0
        for example in examples:
            if example.not_run:
                not_run += 1
                continue
            run += 1
            failures += check_example(example, source, build)
        total_run += run
        total_not_run += not_run
        summary.append("  %s: %d run%s" % (shown, run, ", %d marked not run" % not_run
                                           if not_run else ""))
    print("checked %d pages, %d examples run, %d marked not run:" % (len(pages), total_run,
                                                                     total_not_run))
    print("\n".join(summary))
    if failures:
        print("\n%d failure(s):\n" % len(failures))
        print("\n\n".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
