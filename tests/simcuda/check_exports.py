#!/usr/bin/env python3
"""Checks the simulated libraries' exports.

libcuda.so.1: exactly the functions of the cuGetProcAddress table (drv_procaddr.c), since the
simulated runtime reaches the driver only through that table, and unversioned, as the real one;
besides them only the simulated CUPTI's hooks (TOOL_HOOKS, simcuda_tools.h), which are no CUDA API.
libcudart.so.13: only cuda* functions, each versioned libcudart.so.13 as in the real library.
libcupti.so.13 (optional fourth argument): only cupti* functions, each versioned libcupti.so.13 as
in the real library.
"""
import re
import subprocess
import sys


def dynsyms(lib):
    out = subprocess.run(['nm', '-D', '--defined-only', lib], check=True, capture_output=True,
                         text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            syms.append((parts[1], parts[2]))
    return syms


TOOL_HOOKS = {'simcuda_set_copy_observer', 'simcuda_context_tool_id', 'simcuda_stream_tool_id'}


def check_versioned(lib, prefix, version):
    """Every export a function named prefix*, versioned version. Returns (count, failures)."""
    count = failed = 0
    for kind, name in dynsyms(lib):
        if kind == 'A' and name == version:
            continue
        base, _, ver = name.partition('@@')
        if kind != 'T' or not base.startswith(prefix) or ver != version:
            print(f'not ok - {version} exports {kind} {name}')
            failed += 1
        count += 1
    return count, failed


def main():
    libcuda, libcudart, table_src = sys.argv[1:4]
    libcupti = sys.argv[4] if len(sys.argv) > 4 else None
    failed = 0

    src = open(table_src).read()
    body = src[src.index('table[] = {'):src.index('};', src.index('table[] = {'))]
    table = set()
    for m in re.finditer(r'\b([ET])\((\w+),\s*\d+,\s*(\w+)(?:,\s*(\w+))?\)', body):
        table.add(m.group(3))
        if m.group(4):
            table.add(m.group(4))

    exported = set()
    for kind, name in dynsyms(libcuda):
        if kind != 'T':
            print(f'not ok - libcuda exports a non-function {name}')
            failed += 1
            continue
        if '@' in name:
            print(f'not ok - libcuda symbol {name} carries a version')
            failed += 1
        exported.add(name.split('@')[0])
    for name in sorted(TOOL_HOOKS - exported):
        print(f'not ok - the tool hook {name} is not exported')
        failed += 1
    hooks = exported & TOOL_HOOKS
    for name in sorted(hooks & table):
        print(f'not ok - the tool hook {name} is in the cuGetProcAddress table')
        failed += 1
    exported -= TOOL_HOOKS
    for name in sorted(exported - table):
        print(f'not ok - {name} is exported but not in the cuGetProcAddress table')
        failed += 1
    for name in sorted(table - exported):
        print(f'not ok - {name} is in the table but not exported')
        failed += 1
    print(f'ok - libcuda: {len(exported)} exports, all in the table, and {len(hooks)} tool hooks')

    count, bad = check_versioned(libcudart, 'cuda', 'libcudart.so.13')
    failed += bad
    print(f'ok - libcudart: {count} exports, all cuda*@@libcudart.so.13')

    if libcupti:
        count, bad = check_versioned(libcupti, 'cupti', 'libcupti.so.13')
        failed += bad
        print(f'ok - libcupti: {count} exports, all cupti*@@libcupti.so.13')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
