#!/usr/bin/env python3
"""Runs ctest's tests under compute-sanitizer, several at a time (tests/gpu/test_gpu.sh).

    tests/gpu/sanitize_run.py --build DIR --tool memcheck|racecheck [-L LABEL] [-R REGEX]
        [-E REGEX] [--jobs N] [--timeout S] [--budget S] [--env K=V ...] [--log-dir DIR]
        [--no-api-errors REGEX] [--expected-api-errors REGEX] [--sanitizer CMD]
        [--tests-json FILE] [--allow-skip] [--dry-run]

The tests are ctest's own entries (`ctest -L LABEL -R REGEX --show-only=json-v1` in DIR): the
same command, environment (shards such as TGC_GPU_TEST_SHARD / TGC_TEST_SHARD included) and
working directory, prefixed with `compute-sanitizer --tool TOOL`. The longest run first: by
the times of the build's last ctest run (Testing/Temporary/CTestCostData.txt), else the
COST property. JOBS run at once (7 by default: the H200 machine has 16 cores); each gets
TGC_NUM_THREADS / OMP_NUM_THREADS = cores / JOBS (at least 1).

A test passes when it exits 0 (77, "GPU tests skipped", fails unless --allow-skip: the GPU
run must run every GPU case) and the sanitizer found nothing unexpected:
  memcheck   "ERROR SUMMARY: N errors" where N counts every report, less the API-error reports
             ("Program hit ERR ... on CUDA API call to FN") whose text matches
             --expected-api-errors (default: out-of-memory answers, which the deliberate
             out-of-memory tests and the allocator's retry-after-freeing-the-cache provoke,
             and cuTensorMapEncodeTiled's invalid-value answers, which the tensor-map tests
             provoke to check the message the library gives with them; a map the library
             needs and cannot encode is a test failure of its own);
             every API error kind is listed with its count, expected or not. Tests whose name
             matches --no-api-errors (default: the NCCL process-group tests, whose library
             probes its kernels with calls that fail by design) run with
             --report-api-errors no: their memory errors are still reported;
  racecheck  "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)": E must be 0
             (warnings are listed, not failures); without that line, "ERROR SUMMARY: N
             errors": N must be 0.
A missing summary line (the sanitizer died, or a timeout) fails the test.

--timeout bounds each test, --budget (0: none) the whole phase: no test starts after it, and
a running test is cut at it (reported "timeout"), so the phase ends within the budget; a
test never started is reported "not run (budget)" and fails the phase. Every test's output
goes to LOG_DIR/TOOL-NAME.log (default DIR/sanitize); a line per test as it ends (status,
seconds, counts), then a table by time and a summary line:
  "TOOL summary: P passed, F failed, S not run of T tests, W s (limit: budget B s)".
Exit status: 0 all passed, 1 a failure, 2 the sanitizer refuses this machine's device
("Device not supported": gVisor machines) and nothing failed otherwise.

--dry-run prints the commands in run order (with their environment) and runs nothing;
--sanitizer replaces `compute-sanitizer` (tests/gpu/test_sanitize_run.sh checks the runner on
the host with a stand-in); --tests-json reads ctest's JSON from a file instead of ctest.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

DEFAULT_EXPECTED_API = (r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"
                        r"|CUDA_ERROR_INVALID_VALUE .* cuTensorMapEncodeTiled")
DEFAULT_NO_API = r"comm|ddp"
UNAVAILABLE = re.compile(r"Device not supported|not supported on this (platform|device)")
API_RE = re.compile(r"=+ Program hit (\S+).*? on CUDA API call to (\S+?)\.?\s*$", re.M)
MEM_SUMMARY = re.compile(r"=+ ERROR SUMMARY: (\d+) errors?")
RACE_SUMMARY = re.compile(
    r"=+ RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
SKIP_LINE = re.compile(r"tgc: \d+ GPU tests skipped")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", required=True, help="the ctest build directory")
    p.add_argument("--tool", required=True, choices=["memcheck", "racecheck"])
    p.add_argument("-L", "--label", default="", help="ctest -L (label regex)")
    p.add_argument("-R", "--regex", default="", help="ctest -R (name regex)")
    p.add_argument("-E", "--exclude", default="", help="ctest -E (name regex)")
    p.add_argument("--jobs", type=int, default=7)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per test")
    p.add_argument("--budget", type=float, default=0.0, help="seconds for all (0: none)")
    p.add_argument("--env", action="append", default=[], help="K=V for every test")
    p.add_argument("--log-dir", default="")
    p.add_argument("--no-api-errors", default=DEFAULT_NO_API)
    p.add_argument("--expected-api-errors", default=DEFAULT_EXPECTED_API)
    p.add_argument("--sanitizer", default="compute-sanitizer")
    p.add_argument("--print-limit", type=int, default=10000)
    p.add_argument("--tests-json", default="")
    p.add_argument("--allow-skip", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args(argv)
    if a.jobs < 1:
        p.error("--jobs must be at least 1")
    return a


def load_tests(a):
    if a.tests_json:
        with open(a.tests_json) as f:
            data = json.load(f)
    else:
        cmd = ["ctest", "--show-only=json-v1"]
        for flag, val in (("-L", a.label), ("-R", a.regex), ("-E", a.exclude)):
            if val:
                cmd += [flag, val]
        out = subprocess.run(cmd, cwd=a.build, stdout=subprocess.PIPE, check=True).stdout
        data = json.loads(out)
    tests = []
    for t in data.get("tests", []):
        if "command" not in t:
            continue  # a test whose executable does not exist (not built)
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        name = t["name"]
        if a.tests_json:  # ctest filtered the others
            labels = props.get("LABELS", [])
            if a.label and not any(re.search(a.label, lb) for lb in labels):
                continue
            if a.regex and not re.search(a.regex, name):
                continue
            if a.exclude and re.search(a.exclude, name):
                continue
        env = {}
        for kv in props.get("ENVIRONMENT", []):
            k, _, v = kv.partition("=")
            env[k] = v
        tests.append({
            "name": name,
            "command": t["command"],
            "env": env,
            "cwd": props.get("WORKING_DIRECTORY", a.build),
            "cost": float(props.get("COST", 0) or 0),
        })
    costs = read_costs(os.path.join(a.build, "Testing", "Temporary", "CTestCostData.txt"))
    for t in tests:
        t["cost"] = max(t["cost"], costs.get(t["name"], 0.0))
    tests.sort(key=lambda t: (-t["cost"], t["name"]))
    return tests


def read_costs(path):
    costs = {}
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("---"):
                    break
                parts = line.split()
                if len(parts) == 3:
                    costs[parts[0]] = float(parts[2])
    except (OSError, ValueError):
        pass
    return costs


def sanitizer_cmd(a, t):
    cmd = a.sanitizer.split() + ["--tool", a.tool, "--print-limit", str(a.print_limit)]
    if a.tool == "memcheck" and a.no_api_errors and re.search(a.no_api_errors, t["name"]):
        cmd += ["--report-api-errors", "no"]
    return cmd + t["command"]


def test_env(a, t, threads):
    env = dict(os.environ)
    env.update(t["env"])
    env.setdefault("TGC_NUM_THREADS", str(threads))
    env["OMP_NUM_THREADS"] = env["TGC_NUM_THREADS"]
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def classify(a, rc, log_text, timed_out):
    """(status, ok, detail) of one finished test."""
    if UNAVAILABLE.search(log_text):
        return "unavailable", None, "compute-sanitizer refuses this machine's device"
    details = []
    api = {}
    expected = 0
    for m in API_RE.finditer(log_text):
        key = "%s@%s" % (m.group(1), m.group(2))
        api[key] = api.get(key, 0) + 1
        if a.expected_api_errors and re.search(a.expected_api_errors, m.group(0)):
            expected += 1
    if api:
        details.append("API errors: " + ", ".join("%s x%d" % kv for kv in sorted(api.items())))
    problems = []
    if a.tool == "memcheck":
        m = MEM_SUMMARY.findall(log_text)
        if not m:
            problems.append("no ERROR SUMMARY line")
        else:
            n = int(m[-1])
            unexpected = n - expected
            details.insert(0, "%d errors, %d expected" % (n, expected))
            if unexpected > 0:
                problems.append("%d unexpected sanitizer errors" % unexpected)
    else:
        m = RACE_SUMMARY.findall(log_text)
        total = MEM_SUMMARY.findall(log_text)
        if not m and total:  # a version that sums racecheck's errors up as memcheck does
            details.insert(0, "%s errors" % total[-1])
            if int(total[-1]) > 0:
                problems.append("%s racecheck errors" % total[-1])
        elif not m:
            problems.append("no RACECHECK SUMMARY line")
        else:
            hz, err, warn = (int(x) for x in m[-1])
            details.insert(0, "%d hazards (%d errors, %d warnings)" % (hz, err, warn))
            if err > 0:
                problems.append("%d racecheck errors" % err)
    skipped = rc == 77 or SKIP_LINE.search(log_text)
    if timed_out:
        problems.insert(0, "timeout after %.0f s" % timed_out)
    elif skipped and not a.allow_skip:
        problems.insert(0, "GPU cases skipped")
    elif rc not in (0, 77):
        problems.insert(0, "exit status %d" % rc)
    if problems:
        return "FAIL", False, "; ".join(problems + details)
    return ("skipped" if skipped else "ok"), True, "; ".join(details)


def main(argv):
    a = parse_args(argv)
    tests = load_tests(a)
    if not tests:
        print("%s: no test matched (label %r, regex %r)" % (a.tool, a.label, a.regex))
        return 1
    threads = max(1, (os.cpu_count() or 1) // a.jobs)
    log_dir = a.log_dir or os.path.join(a.build, "sanitize")
    if a.dry_run:
        print("%s: %d tests, %d at a time, %d threads each, timeout %g s, budget %s" %
              (a.tool, len(tests), a.jobs, threads, a.timeout, "%g s" % a.budget
               if a.budget > 0 else "none"))
        for t in tests:
            env = " ".join("%s=%s" % kv for kv in sorted(t["env"].items()))
            extra = " ".join(a.env)
            print("%s: [cost %.1f] (cd %s && %s %s %s)" % (
                t["name"], t["cost"], t["cwd"], env, extra, " ".join(sanitizer_cmd(a, t))))
        return 0
    os.makedirs(log_dir, exist_ok=True)
    start = time.monotonic()
    deadline = start + a.budget if a.budget > 0 else None
    lock = threading.Lock()
    queue = list(tests)
    results = {}

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    while queue:
                        t = queue.pop(0)
                        results[t["name"]] = ("not run (budget)", False, "", 0.0)
                        print("%s: %s: not run (budget of %g s spent)" %
                              (a.tool, t["name"], a.budget), flush=True)
                    return
                t = queue.pop(0)
            limit = a.timeout
            if deadline is not None:
                limit = min(limit, deadline - time.monotonic())
            log_path = os.path.join(log_dir, "%s-%s.log" % (a.tool, t["name"]))
            t0 = time.monotonic()
            timed_out = False
            with open(log_path, "w") as log:
                try:
                    p = subprocess.Popen(sanitizer_cmd(a, t), cwd=t["cwd"],
                                         env=test_env(a, t, threads), stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
                except OSError as e:
                    log.write("cannot start: %s\n" % e)
                    rc = 127
                else:
                    try:
                        rc = p.wait(timeout=max(limit, 1.0))
                    except subprocess.TimeoutExpired:
                        timed_out = True
                        os.killpg(p.pid, signal.SIGKILL)
                        rc = p.wait()
            secs = time.monotonic() - t0
            with open(log_path, errors="replace") as log:
                text = log.read()
            status, ok, detail = classify(a, rc, text, limit if timed_out else 0)
            with lock:
                results[t["name"]] = (status, ok, detail, secs)
                print("%s: %s: %s, %.1f s%s" % (a.tool, t["name"], status, secs,
                                                 ": " + detail if detail else ""), flush=True)
                if ok is False:
                    tail = text.splitlines()[-30:]
                    print("\n".join("    | " + line for line in tail), flush=True)

    workers = [threading.Thread(target=worker) for _ in range(min(a.jobs, len(tests)))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.monotonic() - start

    print("%s: per-test seconds (longest first):" % a.tool)
    for name, (status, ok, detail, secs) in sorted(results.items(), key=lambda kv: -kv[1][3]):
        print("  %7.1f  %-12s %s" % (secs, status, name))
    passed = sum(1 for r in results.values() if r[1] is True)
    failed = sum(1 for r in results.values() if r[1] is False and r[0] != "not run (budget)")
    not_run = sum(1 for r in results.values() if r[0] == "not run (budget)")
    unavailable = sum(1 for r in results.values() if r[1] is None)
    print("%s summary: %d passed, %d failed, %d not run of %d tests, %.0f s (%d at a time%s)%s" %
          (a.tool, passed, failed, not_run, len(tests), wall, a.jobs,
           ", budget %g s" % a.budget if a.budget > 0 else "",
           ", sanitizer unavailable for %d" % unavailable if unavailable else ""), flush=True)
    if failed or not_run:
        return 1
    if unavailable:
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
