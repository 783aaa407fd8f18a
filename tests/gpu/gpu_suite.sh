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
    mkdir -p .carry/lib
    cp -L "$(ldconfig -p | awk '/libcmocka.so.0 / {print $NF; exit}')" .carry/lib/libcmocka.so.0
    echo "$root" > .carry/build_root
    echo "prepared: carry 'build' and '.carry'"
    ;;
run)
    shift
    sanitize=0
    if [ "${1:-}" = "--sanitize" ]; then sanitize=1; shift; fi
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
    echo "usage: $0 prepare | run [--sanitize] [SUITE...]" >&2
    exit 2
    ;;
esac
