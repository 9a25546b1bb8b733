#!/usr/bin/env python3
"""What a file system costs by itself for the steps of a staged file call (BENCHMARKS.md, "File
tools"): p50 of 2,000 of each, from Python, in the directory given (a scratch workspace).

    python3 tests/benches/native_file_floor.py /tmp/ws        # ext4 here
    python3 tests/benches/native_file_floor.py /dev/shm/ws    # tmpfs

Not a test and not run by one: a floor to read toolcell's own figures against.
"""
import os
import statistics
import sys
import time

DIR = sys.argv[1]
TEXT = "lorem ipsum dolor sit amet " * 152  # a little over 4 KiB
CALLS = 2000


def p50(step):
    took = []
    for _ in range(CALLS):
        started = time.perf_counter()
        step()
        took.append(time.perf_counter() - started)
    return statistics.median(took) * 1e6


target = os.path.join(DIR, "native.txt")
with open(target, "w") as f:
    f.write(TEXT)
staging = os.path.join(DIR, "native-staging")


def mkdir_rmdir():
    os.mkdir(staging)
    os.rmdir(staging)


def link_unlink():
    link = os.path.join(DIR, "native-link")
    os.link(target, link)
    os.unlink(link)


def rewrite_in_place():
    with open(target, "w") as f:
        f.write(TEXT)


print(
    f"{DIR}: mkdir+rmdir {p50(mkdir_rmdir):.1f} us, link+unlink {p50(link_unlink):.1f} us, "
    f"truncate+write+close {p50(rewrite_in_place):.1f} us"
)
os.unlink(target)
