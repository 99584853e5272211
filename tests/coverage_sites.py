#!/usr/bin/env python3
"""Lists the KCOV instrumentation points of a module built for the cov kernel.

Usage: coverage_sites.py OBJDUMP SYMBOLIZER MODULE.ko > sites.tsv

One line per call of __sanitizer_cov_trace_pc: section, offset of the point in hex (the
call's return address, which is what KCOV records), its class (0: module code; 1: KUnit test
code, not counted; 2: module code nothing refers to), whether its block ends in a panic (1:
an overflow, bounds or assertion check failed; such a point is reached only if the module
has a bug), its source line and the demangled function. Read by the guest's ds-coverage.

The source line is that of the innermost inlined frame in this repository's sources (the
module's, nds-abi's), from the module's line tables (``make module VARIANT=cov`` builds with
``-Cdebuginfo=line-tables-only``, which does not change the code); ``-`` where there is none.

KUnit test code is a function of a `tests` module (which `#[kunit_tests]` wraps), and any
function only such code can reach: the copy of a function the module otherwise inlines, or
a generic instance only a test uses. A build without KUnit has none of them. Reachability is
taken from the object: a function is reachable if a non-test function calls or jumps to it,
if a writable or special data section (the module structure, a parameter) refers to it, or
if it is in a read-only object (a vtable, a table of format arguments) that a reachable
function refers to. A Debug vtable only a KUnit assertion's message uses is test code. Functions
nothing refers to (public helpers the module does not use, the standalone copy of a function
inlined wherever it is used) stay counted, in class 2, so that the report can say why they
are never reached. Prints a summary of the split on stderr.
"""
import bisect
import os
import re
import subprocess
import sys

objdump, symbolizer, module = sys.argv[1:4]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
CODE = (".text", ".init.text", ".exit.text")
# Sections that refer to every function without being a way to call it (and .debug_*).
METADATA = (".orc_unwind_ip", ".orc_unwind", ".kunit_test_suites")


def run(*args):
    return subprocess.run([objdump, *args, module], check=True, capture_output=True,
                          text=True).stdout


def symbol(reference):
    """The function a relocation or call operand names, without its offset."""
    return re.sub(r"[+-]0x[0-9a-f]+$", "", reference.strip())


starts = {}                    # code section -> sorted [(start, function)]


def target(reference, kind):
    """The function a relocation refers to. A function local to the object is referred to
    as its section plus an offset: PC-relative relocations carry the offset minus 4."""
    reference = reference.strip()
    local = re.match(r"^(\.[\w.]+)([+-]0x[0-9a-f]+)?$", reference)
    if not local or local.group(1) not in starts:
        return symbol(reference)
    offset = int(local.group(2) or "0", 16)
    if kind in ("PLT32", "PC32"):
        offset += 4
    best = None
    for start, f in starts[local.group(1)]:
        if start > offset:
            break
        best = f
    return best


def is_test(function):
    return "::tests::" in function or function.startswith("kunit_rust_wrapper_")


# -r: relocations inline (calls out of the object point at 0 until linked);
# -C: demangled names (LLVM demangles Rust's v0 symbols).
listing = run("-d", "-r", "-C", "--no-show-raw-insn").splitlines()
section = None
for line in listing:
    if line.startswith("Disassembly of section "):
        section = line[len("Disassembly of section "):].rstrip(":")
    label = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
    if label and section:
        starts.setdefault(section, []).append((int(label.group(1), 16), label.group(2)))
for functions in starts.values():
    functions.sort()

# What a failed check calls: the block of such a call is reached only if the module has a bug.
PANIC = re.compile(r"^core::panicking::|^core::[\w:]*::\w+_fail(ed)?$|^rust_begin_unwind$")

section = function = None
points = []                    # [section, offset, function, ends in a panic]
block_point = None             # the point of the block being read, until a jump or return
calls = {}                     # function -> functions it calls, jumps to or takes
# A direct call or jump, until the next line shows whether a relocation patches its operand:
# then the operand objdump shows (0, so the next instruction) means nothing and the relocation
# names the target. (calling function, instruction address, function shown)
direct_pending = None
for line in listing:
    reloc = re.match(r"^\s+([0-9a-f]+):\s+R_X86_64_(\w+)\s+(.*)$", line)
    if direct_pending:
        caller, address, shown = direct_pending
        direct_pending = None
        if not (reloc and address < int(reloc.group(1), 16) <= address + 8):
            calls[caller].add(shown)
    if line.startswith("Disassembly of section "):
        section = line[len("Disassembly of section "):].rstrip(":")
        continue
    label = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
    if label:
        function = label.group(1)
        calls.setdefault(function, set())
        block_point = None
        continue
    if not (section and function):
        continue
    if reloc:
        referred = target(reloc.group(3), reloc.group(2))
        if referred == "__sanitizer_cov_trace_pc":
            # The relocation patches the 4-byte operand of the 5-byte call: it ends 4 on.
            points.append([section, int(reloc.group(1), 16) + 4, function, False])
            block_point = points[-1]
        elif referred:
            calls[function].add(referred)
            if block_point and PANIC.search(referred):
                block_point[3] = True
        continue
    direct = re.search(r"^\s+([0-9a-f]+):\s+(?:callq?|jmpq?|j\w+)\s+0x[0-9a-f]+ <(.*)>$", line)
    if direct:
        direct_pending = (function, int(direct.group(1), 16), symbol(direct.group(2)))
    ends = re.match(r"^\s+[0-9a-f]+:\s+(ud2|j\w+|retq?)\b", line)
    if ends:
        if block_point and ends.group(1) == "ud2":
            block_point[3] = True
        block_point = None
if direct_pending:
    calls[direct_pending[0]].add(direct_pending[2])

if not points:
    sys.exit(f"coverage_sites.py: no __sanitizer_cov_trace_pc call in {module} "
             "(not built for the cov kernel?)")

# Read-only data is reached only through the code that refers to it: a vtable (or a table of
# format arguments) in .rodata makes its functions reachable only if reachable code uses it.
# An object of .rodata starts where code (or other data) points; the function pointers at most
# OBJECT_SPAN bytes after such a start belong to it.
ROTABLE = ".rodata"
OBJECT_SPAN = 256


def data_offset(reference, kind):
    """The .rodata offset a relocation refers to, or None."""
    local = re.match(r"^\.rodata([+-]0x[0-9a-f]+)?$", reference.strip())
    if not local:
        return None
    offset = int(local.group(1) or "0", 16)
    return offset + 4 if kind in ("PLT32", "PC32") else offset


# Code's references to .rodata objects.
objects_used_by = {}           # .rodata offset -> functions that refer to it
function = None
for line in listing:
    label = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
    if label:
        function = label.group(1)
        continue
    reloc = re.match(r"^\s+([0-9a-f]+):\s+R_X86_64_(\w+)\s+(.*)$", line)
    if reloc and function:
        offset = data_offset(reloc.group(3), reloc.group(2))
        if offset is not None:
            objects_used_by.setdefault(offset, set()).add(function)

# Functions data refers to: entry points the kernel calls through a table, and the functions
# in .rodata objects.
roots = set()
root_objects = set()
rodata_functions = []          # (offset in .rodata, function it points to)
rodata_objects = []            # (offset in .rodata, .rodata object it points to)
data_section = None
for line in run("-r", "-C").splitlines():
    header = re.match(r"^RELOCATION RECORDS FOR \[(.*)\]:$", line)
    if header:
        data_section = header.group(1)
        continue
    if data_section in CODE or data_section in METADATA or \
            (data_section or "").startswith(".debug"):
        continue
    fields = line.split(None, 2)
    if len(fields) == 3 and fields[1].startswith("R_X86_64_"):
        kind = fields[1][len("R_X86_64_"):]
        referred = target(fields[2], kind)
        object_offset = data_offset(fields[2], kind)
        if data_section == ROTABLE:
            if referred in calls:
                rodata_functions.append((int(fields[0], 16), referred))
            elif object_offset is not None:
                rodata_objects.append((int(fields[0], 16), object_offset))
        elif referred in calls:
            roots.add(referred)
        elif object_offset is not None:
            root_objects.add(object_offset)

def object_node(start):
    """The name of the .rodata object starting at `start` in the reachability graph."""
    return f"<.rodata+{start:#x}>"


object_starts = sorted(set(objects_used_by) | root_objects | {o for _, o in rodata_objects})


def containing_object(offset):
    """The object an entry at `offset` belongs to: the last start at or before it."""
    index = bisect.bisect_right(object_starts, offset) - 1
    start = object_starts[index] if index >= 0 else None
    return start if start is not None and offset - start < OBJECT_SPAN else None


for start in object_starts:
    calls[object_node(start)] = set()
for offset, f in rodata_functions:
    start = containing_object(offset)
    if start is not None:
        calls[object_node(start)].add(f)
for offset, referred in rodata_objects:
    start = containing_object(offset)
    if start is not None:
        calls[object_node(start)].add(object_node(referred))
roots.update(object_node(start) for start in root_objects)
for start, users in objects_used_by.items():
    for user in users:
        calls[user].add(object_node(start))

reachable = set()
todo = [f for f in roots if not is_test(f)]
while todo:
    f = todo.pop()
    if f in reachable:
        continue
    reachable.add(f)
    todo.extend(t for t in calls.get(f, ()) if t in calls and not is_test(t))
test_reachable = set()
todo = [f for f in calls if is_test(f)]
while todo:
    f = todo.pop()
    if f in test_reachable:
        continue
    test_reachable.add(f)
    todo.extend(t for t in calls.get(f, ()) if t in calls)


def test_code(f):
    return is_test(f) or (f in test_reachable and f not in reachable)


def source_lines(offsets):
    """The repository source line of each .text offset (the call before the return address
    KCOV records), by the symbolizer's inlined frames, innermost first."""
    query = "".join(f"{offset - 1:#x}\n" for offset in offsets)
    frames = subprocess.run([symbolizer, f"--obj={module}", "--inlining", "--functions=none"],
                            input=query, check=True, capture_output=True, text=True).stdout
    lines = []
    for answer in frames.strip("\n").split("\n\n") if offsets else []:
        ours = [f for f in answer.splitlines() if f.startswith(REPO)]
        lines.append(os.path.normpath(ours[0][len(REPO):].rsplit(":", 1)[0]) if ours else "-")
    if len(lines) != len(offsets):
        sys.exit(f"coverage_sites.py: {symbolizer} answered {len(lines)} of {len(offsets)}")
    return lines


# A relocatable object's code sections all start at 0: only .text, where nearly every point
# is, can be named to the symbolizer.
text_offsets = [offset for section, offset, _, _ in points if section == ".text"]
text_lines = dict(zip(text_offsets, source_lines(text_offsets)))

split = {"kunit": 0, "test-only": 0, "counted": 0, "unreferenced": 0}
for section, offset, f, panics in points:
    if test_code(f):
        kind = 1
        split["kunit" if is_test(f) else "test-only"] += 1
    else:
        kind = 0 if f in reachable else 2
        split["counted" if kind == 0 else "unreferenced"] += 1
    source = text_lines.get(offset, "-") if section == ".text" else "-"
    print(f"{section}\t{offset:x}\t{kind}\t{int(panics)}\t{source}\t{f}")
print(f"coverage_sites.py: {len(points)} points: {split['counted']} in module code, "
      f"{split['unreferenced']} in module code nothing refers to, {split['kunit']} in KUnit "
      f"tests, {split['test-only']} in functions only the tests reach", file=sys.stderr)
