#!/usr/bin/python3
"""Reads one `bazel test --test_summary=short` run and says what passed, failed and skipped.

A test target bazel reports PASSED counts as passed unless every test case in its test.xml
was skipped (gtest's GTEST_SKIP, e.g. a GPU test on a machine with no GPU): then it counts
as skipped. Targets bazel itself skipped (incompatible with the configuration, such as the
CUDA-only tests without --config=cuda) count as skipped too. Every skipped test case and
target is named with its reason, so a skip is never mistaken for a pass.

  test_summary.py --log LOG --testlogs DIR [--label TEXT] [--not-run-reason TEXT]
                  [--ignore TARGET ...]

Prints the report, then a last line "counts P F S" that test.sh adds up.
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ElementTree

STATUS_LINE = re.compile(r"^(//\S+)\s+(?:\(cached\) )?([A-Z][A-Z ]*[A-Z])\b")
FAILED = {"FAILED", "TIMEOUT", "NO STATUS", "FLAKY", "INCOMPLETE", "FAILED TO BUILD"}


def skipped_cases(xml_path):
    """(cases run, [(case name, reason)] skipped) from a gtest XML file; None if unreadable."""
    try:
        root = ElementTree.parse(xml_path).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    cases = 0
    skipped = []
    for case in root.iter("testcase"):
        cases += 1
        marker = case.find("skipped")
        if marker is None and case.get("result") != "skipped":
            continue
        reason = ""
        if marker is not None:
            reason = (marker.get("message") or marker.text or "").strip()
        # gtest writes "file:line\nmessage": keep the message.
        reason = reason.splitlines()[-1].strip() if reason else "no reason given"
        name = "%s.%s" % (case.get("classname", "?"), case.get("name", "?"))
        skipped.append((name, reason))
    return cases, skipped


def result_dirs(target_dir):
    """The folders holding one target's newest results: the target's own, or a sharded
    target's shard_* folders (Bazel writes no merged test.xml or test.log), whichever a run
    wrote last (the other may be left over from a run before the target's shard_count
    changed)."""
    def mtime(path):
        try:
            return os.path.getmtime(path)
        except OSError:
            return None
    try:
        shards = [os.path.join(target_dir, d) for d in sorted(os.listdir(target_dir))
                  if d.startswith("shard_")]
    except OSError:
        shards = []
    shards = [d for d in shards if mtime(os.path.join(d, "test.xml")) is not None
              or mtime(os.path.join(d, "test.log")) is not None]
    whole = mtime(os.path.join(target_dir, "test.xml")) or mtime(os.path.join(target_dir, "test.log"))
    if shards:
        newest_shard = [max(filter(None, (mtime(os.path.join(d, f)) for f in ("test.xml", "test.log"))))
                        for d in shards]
        if whole is None or min(newest_shard) > whole:
            return shards
    return [target_dir]


def target_cases(target_dir):
    """(cases run, skipped) of one target, over its shards if it has them."""
    cases, skipped = 0, []
    for directory in result_dirs(target_dir):
        found = skipped_cases(os.path.join(directory, "test.xml"))
        if found is not None:
            cases += found[0]
            skipped += found[1]
    return cases, skipped


def failure_lines(target_dir, limit=12):
    """What a failed target said, so that a CI log shows why without its test.log: each
    failed case's gtest failure messages from test.xml, or else the end of test.log (a
    crash, a timeout), of each shard that failed. At most LIMIT lines, each indented."""
    lines = []
    for directory in result_dirs(target_dir):
        said = []
        try:
            root = ElementTree.parse(os.path.join(directory, "test.xml")).getroot()
            for case in root.iter("testcase"):
                for failure in case.findall("failure"):
                    name = "%s.%s" % (case.get("classname", "?"), case.get("name", "?"))
                    text = (failure.get("message") or failure.text or "").strip()
                    said.append("%s: %s" % (name, " | ".join(text.splitlines())[:400]))
        except (OSError, ElementTree.ParseError):
            pass
        failed_run = not said and _log_says_failed(directory)
        if failed_run:
            try:
                with open(os.path.join(directory, "test.log"), errors="replace") as log:
                    said = [line[:400] for line in log.read().splitlines()[-limit:]]
            except OSError:
                pass
        lines += said
    return ["    " + line for line in lines[:limit]]


def _log_says_failed(directory):
    """Whether a result folder is of a failed run: its test.xml names no failure (or is
    missing) but the run did not pass, e.g. a crash or a timeout. A passing shard's
    test.xml counts its failures as 0."""
    try:
        root = ElementTree.parse(os.path.join(directory, "test.xml")).getroot()
    except (OSError, ElementTree.ParseError):
        return True
    failures = sum(int(s.get("failures", "0") or 0) + int(s.get("errors", "0") or 0)
                   for s in root.iter("testsuite"))
    return failures > 0 or root.find(".//testcase") is None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--testlogs", required=True)
    parser.add_argument("--label", default="")
    parser.add_argument("--not-run-reason", default="not built in this configuration")
    parser.add_argument("--ignore", action="append", default=[])
    args = parser.parse_args()
    ignored = set(args.ignore)
    label = " [%s]" % args.label if args.label else ""

    passed = failed = skipped = 0
    with open(args.log, errors="replace") as log:
        lines = log.read().splitlines()
    for line in lines:
        match = STATUS_LINE.match(line)
        if not match:
            continue
        target, status = match.group(1), match.group(2)
        if target in ignored:
            continue
        if status in FAILED:
            failed += 1
            print("%s%s %s" % (target, label, status))
            package, name = target[2:].split(":", 1)
            for line in failure_lines(os.path.join(args.testlogs, package, name)):
                print(line)
            continue
        if status == "SKIPPED":
            skipped += 1
            print("%s%s SKIPPED: %s" % (target, label, args.not_run_reason))
            continue
        if status != "PASSED":
            continue
        package, name = target[2:].split(":", 1)
        cases, skips = target_cases(os.path.join(args.testlogs, package, name))
        if cases > 0 and len(skips) == cases:
            skipped += 1
            print("%s%s SKIPPED (all %d test cases): %s" % (target, label, cases, skips[0][1]))
            for case, reason in skips[1:]:
                if reason != skips[0][1]:
                    print("  %s skipped: %s" % (case, reason))
            continue
        passed += 1
        print("%s%s PASSED%s" % (target, label,
                                 " (%d of %d test cases skipped)" % (len(skips), cases)
                                 if skips else ""))
        for case, reason in skips:
            print("  %s skipped: %s" % (case, reason))
    print("counts %d %d %d" % (passed, failed, skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
