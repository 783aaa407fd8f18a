#!/usr/bin/env python3
"""The spin loops of a persistent kernel in a compiled object, before timing.

    python3 tools/sass_loops.py build/src/libpersolve_gpu.a.p/cuda_kernel.cu.o
    python3 tools/sass_loops.py build/src/libpersolve_gpu_designed.a.p/cuda_kernel_designed.cu.o
    python3 tools/sass_loops.py OBJECT --kernel 'persistent_solve_kernelIfLi1ELi0ELi1ELi2E'

For each kernel whose name matches --kernel (default: the float32 staged
single-channel kernels, fixed in cuda_kernel.cu.o and designed in
cuda_kernel_designed.cu.o), disassembles the object
(cuobjdump and nvdisasm of the CUDA toolkit; the object must be built with
-lineinfo, as the meson build is) and prints, for every loop of the spin
loops, its length in instructions and the number of instructions that
read two or more registers of the same bank (register index modulo 2,
operands without .reuse). The loops are found by their source lines and
length: 120-400 instructions holding the step math of
src/model/bloch_math_tmpl.h (composite's forward steps, the replay's
staged steps), 800-2000 holding src/cuda/sums.cuh (the flush's sums over
spins).

Why: the designed kernel sits at its 128-register cap, and a change
anywhere in it (even in code that runs once an evaluation) can move ptxas
to a register assignment of the spin loops with the same instructions but
about twice the same-bank operand pairs, 40 to 70 us slower an evaluation
of MG on an H100 (README, "Register pressure decides the designed spin
loops"). ptxas -v shows the same switch as the kernel's spill loads (about
150-250 bytes before, 940 and more after). This is a screen, not a
benchmark: time what passes it with persolve bench (ptxas's register
usage level 6 gave the designed loops more such pairs than the default,
970 against 858, and an MG evaluation 9 us faster: README, "The designed
kernels' register usage level").
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

DEFAULT_KERNELS = r'persistent_solve_kernelIfLi1ELi0ELi[01]ELi2E'


def tool(name):
    for d in [os.environ.get('CUDA_HOME', ''), '/usr/local/cuda']:
        p = os.path.join(d, 'bin', name)
        if d and os.path.exists(p):
            return p
    p = shutil.which(name)
    if not p:
        sys.exit(f'sass_loops: {name} not found (CUDA toolkit: set CUDA_HOME)')
    return p


def disassemble(obj):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([tool('cuobjdump'), '-xelf', 'all', os.path.abspath(obj)], cwd=d, check=True,
                       capture_output=True)
        cubins = sorted(f for f in os.listdir(d) if f.endswith('.cubin'))
        if not cubins:
            sys.exit(f'sass_loops: no cubin in {obj}')
        out = []
        for c in cubins:
            out.append(subprocess.run([tool('nvdisasm'), '-g', os.path.join(d, c)], check=True,
                                      capture_output=True, text=True).stdout)
        return '\n'.join(out)


def functions(text, pattern):
    """{kernel: ([(instruction, 'file:line')], {label: instruction index})}"""
    funcs, cur, line = {}, None, None
    for l in text.splitlines():
        m = re.match(r'\s*\.text\.(\S+):', l)
        if m:
            cur = m.group(1) if re.search(pattern, m.group(1)) else None
            if cur:
                funcs[cur] = ([], {})
            continue
        if not cur:
            continue
        ins, labels = funcs[cur]
        m = re.match(r'^(\.L_x_\d+):', l)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.search(r'//## File "([^"]+)", line (\d+)', l)
        if m:
            line = f'{os.path.basename(m.group(1))}:{m.group(2)}'
            continue
        m = re.match(r'\s*/\*[0-9a-f]+\*/\s+(.*?);', l)
        if m:
            ins.append((m.group(1).strip(), line or ''))
    return funcs


def same_bank(instr):
    s = re.sub(r'^@!?U?P\w+\s+', '', instr)
    parts = s.split(None, 1)
    if len(parts) < 2:
        return False
    ops = [o.strip() for o in parts[1].split(',')]
    writes = not parts[0].startswith(('ST', 'BRA', 'BAR', 'ISETP', 'FSETP', 'DSETP', 'RED', 'ATOM'))
    regs = []
    for o in (ops[1:] if writes else ops):
        m = re.fullmatch(r'-?\|?R(\d+)\|?(\.reuse)?(\.H\d)?', o)
        if m and not m.group(2):
            regs.append(int(m.group(1)) % 2)
    return regs.count(0) >= 2 or regs.count(1) >= 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('object', help='a compiled kernel object (e.g. cuda_kernel.cu.o)')
    ap.add_argument('--kernel', default=DEFAULT_KERNELS, help='regular expression on the mangled kernel names')
    args = ap.parse_args()
    if not os.path.exists(args.object):
        sys.exit(f'sass_loops: {args.object}: no such file')
    funcs = functions(disassemble(args.object), args.kernel)
    if not funcs:
        sys.exit(f'sass_loops: no kernel matches {args.kernel!r}')
    for name, (ins, labels) in sorted(funcs.items()):
        loops = []
        for j, (s, _) in enumerate(ins):
            m = re.search(r'BRA.*`\((\.L_x_\d+)\)', s)
            if m and m.group(1) in labels and labels[m.group(1)] < j:
                loops.append((labels[m.group(1)], j))
        print(name)
        total = 0
        for a, b in sorted(set(loops)):
            files = {ln.split(':')[0] for _, ln in ins[a:b + 1]}
            n = b - a + 1
            if 'sums.cuh' in files and 800 <= n <= 2000:
                kind = 'flush'
            elif 'bloch_math_tmpl.h' in files and 120 <= n <= 400:
                kind = 'spin steps'
            else:
                continue
            pairs = sum(1 for s, _ in ins[a:b + 1] if same_bank(s))
            total += pairs
            print(f'  {kind:10s} at {a:6d}: {n:5d} instructions, {pairs:4d} with same-bank register operands')
        print(f'  all these loops: {total} instructions with same-bank register operands')
    return 0


if __name__ == '__main__':
    sys.exit(main())
