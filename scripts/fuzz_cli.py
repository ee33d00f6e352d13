#!/usr/bin/env python3
"""Fuzzes the runner's command line and the file names it is given, against the real binary.

usage: scripts/fuzz_cli.py DARKROOM SECONDS [--seed N] [--keep DIR]
       scripts/fuzz_cli.py DARKROOM --replay DIR

Each input is a whole run of the `darkroom` executable: a command line built from the runner's
subcommands and options with hostile values (numbers out of range, NaN, huge digit strings,
control characters, very long strings, odd paths), over a folder of inputs whose names are random
bytes (not UTF-8, control characters, 255-byte names, names that clean to one). The rules checked:
the process ends by itself (no signal, no hang past 30 s), its status is one of 0, 1, 2, 64, 75,
130, 143, no "Fatal error" is printed, and no temporary file is left among the outputs. A failing
input is kept as a JSON reproducer in --keep DIR (Tests/FuzzRegressions/cli), which --replay runs
again (FuzzReplayTests does, under `make test`).

Outputs always go under a fresh scratch folder: the runner runs as the user who starts this
script, so no generated value may name a folder outside it for writing.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

ALLOWED = {0, 1, 2, 64, 75, 130, 143}
HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)

NUMBERS = [
    "0", "-0", "1", "-1", "-3", "256", "257", "1024", "1025", "60000", "99999999999999999999", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "1e300", "1e-300", "1e-7", "0.000001", "86400", "86401", "nan", "NaN",
    "inf", "-inf", "infinity", "0x10", " 5", "5 ", "٣", "1_000", "1,5", "", "=", "1e", "--", "-", "+5",
]
TEXTS = [
    "", "a", "jsonl", "JSONL", "\x1b[2J", "\x1b]0;x\x07", "a\nb", "a\x00b", "é" * 300, "x" * 70000, "../" * 40,
    "/", "/dev/zero", "/dev/null", "/proc/self/mem", "/proc/self/fd/0", "file:///etc/passwd", "data:,", "data:image/png;base64,",
    "http://[::1]/a.jpg", "http://127.0.0.1:1/a.jpg", "https://", "http://%zz", "~", "-", "--help", "fetch=", "=1",
    "decode=nan", "fetch=1e300", "write=0.5", "\u202e", "\ud7ff", "*", "?",
]
SANE = {
    "--jobs": ["1", "2", "4"], "-j": ["1", "3"], "--fetch-concurrency": ["1", "8"], "--timeout": ["0.5", "10", "60"],
    "--stage-timeout": ["fetch=10", "decode=0.001", "resize=5", "encode=30"], "--vips-threads": ["1", "2"],
    "--events": ["jsonl"], "--root": ["@IN", ".", "@IN/.."], "--input-list": ["/dev/zero", "/dev/null", "@IN", "-"],
    "--store": ["memory", "disk", "table"],
}
OPTIONS = {
    "run": [
        ("--jobs", NUMBERS), ("-j", NUMBERS), ("--fetch-concurrency", NUMBERS), ("--timeout", NUMBERS),
        ("--stage-timeout", TEXTS + ["fetch=" + n for n in NUMBERS]), ("--vips-threads", NUMBERS), ("--events", TEXTS),
        ("--root", TEXTS + ["."]), ("--input-list", TEXTS), ("--recursive", None), ("--no-fusion", None), ("--quiet", None),
    ],
    "validate": [("--quiet", None)],
    "cache": [("--store", TEXTS + ["memory", "disk", "table"]), ("--json", None)],
}


def random_name(rng):
    kind = rng.randrange(7)
    if kind == 0:
        return bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 20))).replace(b"/", b"_").replace(b"\0", b"_")
    if kind == 1:
        return ("é" * rng.randrange(100, 128)).encode() + b".png"
    if kind == 2:
        return b"a" * rng.randrange(240, 256)
    if kind == 3:
        return rng.choice([b"a b.jpg", b"a_b.jpg", b"A_B.JPG", b"a.jpg", b"a.png", b"a-jpg.png"])
    if kind == 4:
        return rng.choice([b"\x1b[31mred.jpg", b"new\nline.jpg", b"tab\t.png", b"\xff\xfe.png", b".hidden.jpg"])
    if kind == 5:
        return rng.choice([b"x.php", b"x.svg", b"x.jpg.exe", b"x", b"x.JPG", b"x.jpeg "])
    return ("%d.%s" % (rng.randrange(1000), rng.choice(["jpg", "png", "webp", "gif", "tif"]))).encode()


def make_case(rng):
    """A reproducible description of one run: argv (with placeholders) and the input files."""
    files = []
    images = ["dunes.jpg", "rings.png", "checker.webp", "portrait-rotated.jpg"]
    for _ in range(rng.randrange(0, 6)):
        content = rng.choice(images + ["empty", "text"])
        files.append({"name": list(random_name(rng)), "content": content})
    command = rng.choice(["run", "run", "run", "validate", "cache"])
    pipelines = ["thumbnail.json", "avatar-sizes.json", "cached-thumbnail.json", "avatar.json"]
    argv = [command]
    if command == "cache":
        argv.append(rng.choice(["stats", "purge", "clear", "sweep", "nothing"]))
    argv.append("@PIPELINE:" + rng.choice(pipelines + ["missing.json", "@IN"]))
    if command == "run" or argv[1:2] == ["purge"]:
        for _ in range(rng.randrange(0, 4)):
            argv.append(rng.choice(["@IN", "@IN/" + str(rng.randrange(5)), rng.choice(TEXTS)]))
    if command in ("run", "cache"):
        argv += ["--output" if command == "run" else "--cache-dir", "@OUT"]
    if command == "run" and rng.random() < 0.5:
        argv += ["--cache-dir", "@OUT/cache"]
    for _ in range(rng.randrange(0, 5)):
        name, values = rng.choice(OPTIONS[command])
        if values is None:
            argv.append(name)
            continue
        value = rng.choice(SANE[name]) if name in SANE and rng.random() < 0.7 else rng.choice(values)
        if rng.random() < 0.5:
            argv.append(name + "=" + value)
        else:
            argv += [name, value]
    if rng.random() < 0.03:
        argv.insert(rng.randrange(len(argv) + 1), rng.choice(TEXTS + NUMBERS))
    if "--recursive" in argv:
        # Walking the whole file system is slow, not wrong: keep recursive walks in the scratch folder.
        argv = [arg for arg in argv if arg not in ("/", "../" * 40, "~")]
    return {"argv": argv, "files": files}


def run_case(binary, case, timeout=30):
    """Runs one case in a fresh scratch folder; returns None when every rule held, else why."""
    scratch = tempfile.mkdtemp(prefix="darkroom-fuzz-cli-")
    try:
        inputs = os.path.join(scratch, "in")
        output = os.path.join(scratch, "out")
        os.makedirs(inputs)
        for item in case["files"]:
            path = os.path.join(inputs.encode(), bytes(item["name"]))
            content = item["content"]
            try:
                if content == "empty":
                    data = b""
                elif content == "text":
                    data = b"<?php echo 1; ?>"
                else:
                    with open(os.path.join(PACKAGE, "Examples/images", content), "rb") as source:
                        data = source.read()
                with open(path, "wb") as target:
                    target.write(data)
            except OSError:
                pass  # a name the file system refuses (too long): the run goes on without it
        argv = []
        for arg in case["argv"]:
            arg = arg.replace("@OUT", output).replace("@IN", inputs)
            if arg.startswith("@PIPELINE:"):
                name = arg[len("@PIPELINE:"):]
                arg = name if name.startswith("/") else os.path.join(PACKAGE, "Examples/pipelines", name)
            argv.append(arg.encode("utf-8", "surrogateescape").replace(b"\0", b"_"))
        started = time.monotonic()
        environment = dict(os.environ, TMPDIR=scratch, HOME=scratch)
        try:
            result = subprocess.run(
                [binary.encode()] + argv, cwd=scratch, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                env=environment)
        except subprocess.TimeoutExpired:
            return "hang: still running after %d s" % timeout
        stderr = result.stderr.decode("utf-8", "replace")
        if result.returncode < 0:
            return "signal %d after %.1f s: %s" % (-result.returncode, time.monotonic() - started, stderr[-2000:])
        if result.returncode not in ALLOWED:
            return "status %d: %s" % (result.returncode, stderr[-2000:])
        if "Fatal error" in stderr:
            return "Fatal error: " + stderr[-2000:]
        left = [name for _, _, names in os.walk(output) for name in names if name.endswith(".tmp")]
        if left:
            return "temporary files left: %s" % left[:5]
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    args = sys.argv[1:]
    if len(args) >= 3 and args[1] == "--replay":
        failures = 0
        count = 0
        for name in sorted(os.listdir(args[2])) if os.path.isdir(args[2]) else []:
            if not name.endswith(".json"):
                continue
            with open(os.path.join(args[2], name)) as handle:
                case = json.load(handle)
            count += 1
            problem = run_case(args[0], case)
            if problem:
                failures += 1
                print("FAILED %s: %s" % (name, problem))
        print("replayed %d reproducers, %d failed" % (count, failures))
        sys.exit(1 if failures else 0)
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    binary, seconds = args[0], float(args[1])
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 1
    keep = args[args.index("--keep") + 1] if "--keep" in args else None
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    runs = 0
    found = 0
    while time.monotonic() < deadline:
        case = make_case(rng)
        runs += 1
        problem = run_case(binary, case)
        if problem:
            found += 1
            print("FOUND (run %d): %s\n  argv: %r" % (runs, problem.splitlines()[0][:300], case["argv"]), flush=True)
            if keep:
                os.makedirs(keep, exist_ok=True)
                with open(os.path.join(keep, "seed%d-run%d.json" % (seed, runs)), "w") as handle:
                    json.dump(case, handle)
        if runs % 200 == 0:
            print("%d runs, %d found" % (runs, found), flush=True)
    print("%d runs in %.0f s, %d found" % (runs, seconds, found))
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
