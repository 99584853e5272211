"""What a Rust source names through `crate::`, shared by the two layering checks
(tests/module-layers.py for the module, tests/userspace-layers.py for the workspace)."""

import re


def crate_heads(code: str, dollar_crate: bool = False) -> set:
    """The first segment after each `crate::`, and every head of a `use crate::{...}` tree.

    With `dollar_crate`, a macro's `$crate::` counts as `crate::` too.
    """
    before = r"\b" if dollar_crate else r"(?<![\w$])"
    names = set(re.findall(before + r"crate::(\w+)", code))
    for match in re.finditer(before + r"crate::\{", code):
        depth, expect_head = 0, True
        for token in re.findall(r"\w+|::|[{},]", code[match.end() - 1 :]):
            if token == "{":
                depth += 1
            elif token == "}":
                depth -= 1
                if depth == 0:
                    break
            elif token == ",":
                expect_head = depth == 1 or expect_head
            elif depth == 1 and expect_head and token != "::":
                names.add(token)
                expect_head = False
    return {name for name in names if name.isidentifier() and name != "self"}
