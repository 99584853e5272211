#!/usr/bin/env python3
"""Checks that no function of the module outside its KUnit tests has a stack frame larger
than a bound (default 4 KiB, a quarter of a kernel stack): frames nest under the module
loader's or a system call's, a stack of 16 KiB overflows once they add up to it, and the
kernel's double fault is the only report of that. Reads each function's `sub $N, %rsp` from
the disassembly of the .ko. Prints the largest frames; exits 1 if any is over the bound.

Usage: tests/module-frames.py LLVM_OBJDUMP MODULE.ko [BOUND]
"""

import re
import subprocess
import sys

objdump, module = sys.argv[1], sys.argv[2]
bound = int(sys.argv[3]) if len(sys.argv) > 3 else 4096

listing = subprocess.run([objdump, "-d", module], check=True, capture_output=True, text=True)
frames = {}
function = None
for line in listing.stdout.splitlines():
    start = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
    if start:
        function = start.group(1)
        continue
    grow = re.search(r"subq?\s+\$0x([0-9a-f]+),\s*%rsp", line)
    if grow and function:
        frames[function] = max(frames.get(function, 0), int(grow.group(1), 16))

# KUnit test cases run in a kthread of their own (`kunit_rust_wrapper_*`, `::tests::`).
counted = {f: size for f, size in frames.items() if "kunit_rust_wrapper" not in f and "5tests" not in f}
largest = sorted(counted.items(), key=lambda item: -item[1])[:5]
for function, size in largest:
    print(f"{size:6d} {function}")
over = [f for f, size in counted.items() if size > bound]
if not frames:
    print("module-frames: no function found in the disassembly", file=sys.stderr)
    sys.exit(1)
if over:
    print(f"module-frames: {len(over)} functions have a frame over {bound} bytes", file=sys.stderr)
    sys.exit(1)
print(f"module-frames: every frame outside the KUnit tests is at most {bound} bytes")
