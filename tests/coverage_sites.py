#!/usr/bin/env python3
"""Lists the KCOV instrumentation points of a module built for the cov kernel.

Usage: coverage_sites.py OBJDUMP MODULE.ko > sites.tsv

One line per call of __sanitizer_cov_trace_pc: section, offset of the point in hex (the
call's return address, which is what KCOV records), 1 if the call is in a KUnit test
function (a function of a `tests` module, which `#[kunit_tests]` wraps) else 0, and the
demangled function. Read by the guest's ds-coverage.
"""
import re
import subprocess
import sys

objdump, module = sys.argv[1:3]
# -r: relocations inline (the calls of a relocatable object point at 0 until linked);
# -C: demangled names (LLVM demangles Rust's v0 symbols).
listing = subprocess.run(
    [objdump, "-d", "-r", "-C", "--no-show-raw-insn", module],
    check=True, capture_output=True, text=True,
).stdout

section = function = None
points = 0
for line in listing.splitlines():
    if line.startswith("Disassembly of section "):
        section = line[len("Disassembly of section "):].rstrip(":")
        continue
    label = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
    if label:
        function = label.group(1)
        continue
    reloc = re.match(r"^\s+([0-9a-f]+):\s+R_X86_64_PLT32\s+__sanitizer_cov_trace_pc-0x4$", line)
    if reloc and section and function:
        # The relocation patches the 4-byte operand of the 5-byte call: it ends 4 bytes on.
        point = int(reloc.group(1), 16) + 4
        kunit = int("::tests::" in function or function.startswith("kunit_rust_wrapper_"))
        print(f"{section}\t{point:x}\t{kunit}\t{function}")
        points += 1
if points == 0:
    sys.exit(f"coverage_sites.py: no __sanitizer_cov_trace_pc call in {module} "
             "(not built for the cov kernel?)")
