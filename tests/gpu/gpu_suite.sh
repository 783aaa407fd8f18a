#!/usr/bin/env bash
# The whole meson test suite on a machine with a GPU, from a build made on
# the development machine (README, "Running the GPU tests"): binaries built
# there run on the GPU machine; carry libcmocka with them, never HDF5 or
# other system libs.
#
#   here:   tests/gpu/gpu_suite.sh prepare     # build, stage libcmocka in .carry/
#   there:  tests/gpu/gpu_suite.sh run [--sanitize] [SUITE...]
#           (with `build` and `.carry` carried beside the working tree)
#
#   here:   tests/gpu/gpu_suite.sh prepare --compact
#           the same, then the library as one shared object in .carry/lib
#           and the tests and persolve relinked against it in .carry/build
#           (about 35 MB in all, against some 650 MB of `build`, where
#           each test binary holds every kernel): carry `.carry` alone;
#           `run` copies .carry/build to build there when build is absent
#
# `run` executes every test that meson registered (build/meson-info/
# intro-tests.json), with its workdir and arguments mapped to this checkout,
# prints a meson-like summary and exits nonzero on any failure. With
# --sanitize, the gpu suite also runs under compute-sanitizer memcheck,
# racecheck and synccheck (each test's quick subset: PS_GPU_TEST_QUICK=1).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

case "${1:-}" in
prepare)
    # Meson before 1.4 gives nvcc no depfile flags (mesonbuild/meson#11969),
    # so a changed .cuh or shared .h leaves stale CUDA objects: rebuild them
    # all (the library's and the tests' own kernels).
    find build -name '*.cu.o' -delete 2>/dev/null
    ./setup.sh
    rm -rf .carry
    mkdir -p .carry/lib
    cp -L "$(ldconfig -p | awk '/libcmocka.so.0 / {print $NF; exit}')" .carry/lib/libcmocka.so.0
    echo "$root" > .carry/build_root
    if [ "${2:-}" != "--compact" ]; then
        echo "prepared: carry 'build' and '.carry'"
        exit 0
    fi
    python3 - <<'PY' || exit 1
import json, os, re, shlex, shutil, subprocess
B, out, lib = "build", ".carry/build", ".carry/lib"
# the library's objects (src/*.a.p) as one shared object on the CUDA runtime's shared library
objs = sorted(os.path.join(B, "src", d, f) for d in os.listdir(os.path.join(B, "src"))
              if d.startswith("libpersolve") and d.endswith(".a.p")
              for f in os.listdir(os.path.join(B, "src", d)) if f.endswith(".o"))
def link_of(target):
    return shlex.split(subprocess.check_output(["ninja", "-C", B, "-t", "commands", target],
                                               text=True).strip().splitlines()[-1])
libs = [a for a in link_of("tools/persolve") if a.startswith("-Xlinker=/") and ".so" in a]  # HDF5's
subprocess.check_call(["nvcc", "-shared", "-cudart", "shared", "-Xcompiler=-fopenmp",
                       "-o", os.path.join(lib, "libpersolve_all.so")] + objs + libs + ["-lm"])
tests = json.load(open(os.path.join(B, "meson-info", "intro-tests.json")))
build = os.path.abspath(B)
targets = {"tools/persolve"} | {os.path.relpath(t["cmd"][0], build) for t in tests
                                if t["cmd"][0].startswith(build + "/")}
for t in sorted(targets):
    a, dst = link_of(t), os.path.join(out, t)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    static = [x for x in a if re.search(r"src/libpersolve(_\w+)?\.a$", x)]
    if not static:  # links no library: as built
        shutil.copy2(os.path.join(B, t), dst)
        continue
    n = []
    for x in a:
        if x == static[0]:
            n += ["-Xlinker=--no-as-needed", "-L" + os.path.abspath(lib), "-lpersolve_all"]
        elif x not in static and x != "-lcudart_static":
            n.append(x)
    n[n.index("-o") + 1] = os.path.abspath(dst)
    if n[0] == "nvcc":
        n[1:1] = ["-cudart", "shared"]
    subprocess.check_call(n, cwd=B)
shutil.copytree(os.path.join(B, "meson-info"), os.path.join(out, "meson-info"))
PY
    echo "prepared: carry '.carry' ($(du -sh .carry | cut -f1))"
    ;;
run)
    shift
    sanitize=0
    if [ "${1:-}" = "--sanitize" ]; then sanitize=1; shift; fi
    if [ ! -d build ] && [ -d .carry/build ]; then
        cp -r .carry/build build # prepare --compact's tree (a copy: the tests find the sources by build/..)
    fi
    export LD_LIBRARY_PATH="$root/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PS_SOURCE_DIR="$root"
    python3 - "$root" "$sanitize" "$@" <<'PY'
import json, os, shutil, signal, subprocess, sys, time
root, sanitize, suites = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
old = open(os.path.join(root, ".carry/build_root")).read().strip()
fix = lambda s: s.replace(old, root) if isinstance(s, str) else s
tests = json.load(open(os.path.join(root, "build/meson-info/intro-tests.json")))
TAIL = 20000  # characters of a test's output shown

def run(cmd, cwd, env, timeout):
    """Run one test in a process group of its own: (result, output). Its
    stdout and stderr are read as bytes and decoded leniently (tests print
    bytes that are not UTF-8); a test that runs past its timeout is killed
    with everything it started and reported with the output it gave."""
    try:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        return "FAIL", f"cannot run {cmd[0]}: {e}\n"
    timed_out = False
    try:
        out = p.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        timed_out = True
    except KeyboardInterrupt:
        kill_group(p)
        raise
    if timed_out:
        kill_group(p)
        out = p.communicate()[0]  # the rest of what it wrote (none lost)
    out = out.decode("utf-8", errors="replace")
    if len(out) > TAIL:  # from a line start
        cut = out.find("\n", len(out) - TAIL)
        out = "[...]\n" + out[cut + 1 if cut >= 0 else len(out) - TAIL:]
    if timed_out:
        return "TIMEOUT", out + f"\n[killed after {timeout:g} s]\n"
    if p.returncode == 77:
        return "SKIP", out
    if p.returncode == 0:
        return "OK", out
    return "FAIL", out + f"\n[exit status {p.returncode}]\n"

def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

passed = skipped = 0
failures = []
for t in tests:
    suite = [s.split(":")[-1] for s in t["suite"]]
    if suites and not set(suites) & set(suite):
        continue
    cmd = [fix(c) for c in t["cmd"]]
    if not os.path.exists(cmd[0]) and os.path.basename(cmd[0]).startswith("python"):
        # the interpreter meson found here (e.g. a pyenv shim) is not there
        cmd[0] = shutil.which(os.path.basename(cmd[0])) or cmd[0]
    runs = [("", cmd)]
    if sanitize and "gpu" in suite:
        runs += [(tool, ["compute-sanitizer", "--tool", tool, "--error-exitcode", "99"] + cmd)
                 for tool in ("memcheck", "racecheck", "synccheck")]
    for tool, c in runs:
        t0 = time.time()
        # under a sanitizer the tests run their quick subset (small sizes),
        # the batch tests' waits bounded by 600 s instead of 60
        env = dict(os.environ, PS_GPU_TEST_QUICK="1", PS_TEST_WAIT_S="600") if tool else None
        res, out = run(c, fix(t["workdir"]), env, (t.get("timeout") or 600) * 3)
        name = t["name"] + (" [" + tool + "]" if tool else "")
        print(f"{'/'.join(suite):6s} {name:28s} {res:5s} {time.time() - t0:7.2f}s", flush=True)
        failed = res in ("FAIL", "TIMEOUT")
        if failed or os.environ.get("PS_VERBOSE") or (t["name"] == "gpu" and not tool):
            if failed:
                print(f"---- {name}: {res}, the last part of its output ----")
            print(out, flush=True)
        passed += res == "OK"; skipped += res == "SKIP"
        if failed:
            failures.append(f"{name} ({res})")
print(f"{passed} passed, {len(failures)} failed, {skipped} skipped")
if failures:
    print("failed: " + ", ".join(failures))
sys.exit(1 if failures else 0)
PY
    ;;
*)
    echo "usage: $0 prepare [--compact] | run [--sanitize] [SUITE...]" >&2
    exit 2
    ;;
esac
