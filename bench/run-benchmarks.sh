#!/usr/bin/env bash
# Runs the benchmark programs of a build and prints the figures the README quotes:
#
#   1. in-process overhead: GPUDriver::retrieveResourceInfo / a bare posix_spawn + read + waitpid
#      of the same discovery script (driver_bench);            target: within 5 % (ratio <= 1.05)
#      Twice: from the two separate benchmarks' means, and from BM_PairedRetrieveVsBare, which
#      alternates the two calls in one loop and is the steadier figure on a busy machine.
#      (The CLI ratio is likewise given twice, the second from BM_PairedProcesses.)
#   2. whole CLI: a `flink-gpu discover` process / a bare run of the script (cli_bench);
#                                                               target: within 2x   (ratio <= 2)
#   3. flink-gpu's peak resident memory (VmHWM at exit), next to the bare script's.
#   4. default discovery: one coordinated allocation (a whole run of nvidia-gpu-discovery.sh on a
#      stand-in host of 64 GPUs, 63 held by a live owner) / a bare run of nvidia-smi itself
#      (discovery_bench);                                       target: within 1.5x (ratio <= 1.5)
#      Also twice, the second from BM_PairedDiscovery.
#   5. placement: the time to plan one request with the placement rule on 16 and 64 GPUs
#      (placement_bench; its console figures are the ones quoted). Targets: < 10 ms, < 50 ms.
#   6. in-process default discovery: a GPUDriver made and its retrieveResourceInfo(1) with the
#      default discovery in-process / the same through the script, coordinated, on a stand-in
#      NVML host of 64 GPUs, 63 held (in_process_bench); target: at least 20x faster. Twice,
#      the second (the speed-up, script / in-process) from BM_PairedInProcessVsScript, with the
#      in-process figure in microseconds.
#   7. the commands that read the files, over a bare read of the same file (status_bench):
#      `flink-gpu status` (text, JSON, Prometheus, --gpu 0), `check` and `release --owner` on
#      100,000 records and on 10,000, and how much longer 100,000 take than 10,000 (linear:
#      about 10x); status and check on 16,000 health lines; watch's update of them in-process; a
#      coordinated discovery from a full coordination file, its time and peak, and status (all,
#      --gpu 0) on it. And the peak memory of `release --junk` against the size of the file it
#      repairs (target: about 2x).
#   8. storms of 4 and 16 processes taking the coordination file's lock 20 times each, holding it
#      0.2 or 2 ms (lock_bench): our wait (a try every millisecond, with a deadline) and the one
#      tried and not kept (woken by the file's close), over a blocking flock, in wall-clock and
#      CPU time.
#
# For reference it also prints process::run / bare spawn (the driver's process layer alone) and
# `flink-gpu --version` / script (flink-gpu's start-up alone, without a discovery), and for the
# discovery the program run without its sh wrapper, and a plain (uncoordinated) discovery, each
# over the bare nvidia-smi. Under targets 2 and 4 it prints their floor on this machine: the
# same ratio for bench/spawn_floor.c, a C program that only runs the script (or nvidia-smi,
# from a sh wrapper and without) and passes on its output, linked as our programs are (glibc
# dynamic) and fully static. A target below the first cannot be met here by a program built as
# ours must be; a figure's excess over the floor is what our code costs.
#
# Builds nothing: configure and build first (FLINK_GPU_BENCH=ON, the default), preferably in a
# Release or RelWithDebInfo build. Usage:
#
#   bench/run-benchmarks.sh [BUILD_DIR] [--benchmark_... flags]
#
# BUILD_DIR defaults to build/ in the repository root. Flags after it go to every program
# (e.g. --benchmark_filter=Bare). Console output is shown as it runs; the JSON of each program
# goes to BUILD_DIR/bench-results/<program>.json, from which the ratios are
# computed (python3). Ratios are of mean wall-clock time over the repetitions, with a rough 95 %
# interval from the spread of the repetitions (median ratio in brackets). When that interval
# straddles the target the verdict says "inconclusive": the machine was too noisy, rerun it when
# it is idle. Exit status: non-zero if a benchmark failed (it reports the error; Google Benchmark
# itself still exits 0), not when a target is missed.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo_root/build
if [[ $# -gt 0 && $1 != -* ]]; then
  build_dir=$1
  shift
fi

programs=(driver_bench cli_bench discovery_bench placement_bench in_process_bench status_bench
  lock_bench)

for program in "${programs[@]}"; do
  if [[ ! -x $build_dir/bin/$program ]]; then
    echo "run-benchmarks.sh: $build_dir/bin/$program not found; build it first, e.g." >&2
    echo "  cmake -S $repo_root -B $build_dir -G Ninja && ninja -C $build_dir $program" >&2
    exit 2
  fi
done

results=$build_dir/bench-results
mkdir -p "$results"

for program in "${programs[@]}"; do
  echo "=== $program ==="
  "$build_dir/bin/$program" --benchmark_format=console \
    --benchmark_out="$results/$program.json" --benchmark_out_format=json "$@"
  echo
done

python3 - "$results/driver_bench.json" "$results/cli_bench.json" \
  "$results/discovery_bench.json" "$results/in_process_bench.json" \
  "$results/status_bench.json" "$results/lock_bench.json" <<'PY'
import json
import math
import statistics
import sys

UNIT_TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
STATUS_COMMANDS = ("status", "json", "prometheus", "gpu", "check", "release")
STATUS_COUNTERS = (*(f"{c}_ratio" for c in STATUS_COMMANDS), *(f"{c}_ms" for c in STATUS_COMMANDS),
                   "cat_ms", "watch_ratio", "watch_ms", "read_ms", "peak_MiB", "file_MiB",
                   "peak_per_file", "version_MiB", "run_ms")
LOCK_WAYS = ("blocking", "ours", "woken")
LOCK_COUNTERS = (*(f"{w}_ms" for w in LOCK_WAYS), *(f"{w}_cpu_ms" for w in LOCK_WAYS),
                 *(f"{w}_ratio" for w in LOCK_WAYS[1:]), *(f"{w}_cpu_ratio" for w in LOCK_WAYS[1:]))
errors = []


def load(path):
    """{benchmark name: {"agg": {aggregate name: entry}, "reps": [real time in us, ...]}}."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}  # a --benchmark_filter that matched nothing in this program leaves it empty
    data = json.loads(text)
    found = {}
    for entry in data["benchmarks"]:
        if entry.get("error_occurred"):
            errors.append(f"{entry['name']}: {entry.get('error_message', 'failed')}")
            continue
        # The benchmark's name and its arguments ("BM_PairedRecords/100000"), without the
        # settings Google Benchmark adds (iterations:, repeats:, min_time:, real_time).
        name = "/".join(part for part in entry["run_name"].split("/")
                        if not part.startswith(("iterations:", "repeats:", "min_time:",
                                                "real_time")))
        slot = found.setdefault(name, {"agg": {}, "reps": [], "counters": {}})
        if entry.get("run_type") == "aggregate":
            slot["agg"][entry["aggregate_name"]] = entry
        else:
            slot["reps"].append(us(entry))
            for counter in ("ratio", "discover_ratio", "version_ratio", "program_ratio",
                            "plain_ratio", "floor_ratio", "program_floor_ratio",
                            "static_floor_ratio", "static_program_floor_ratio", "speedup",
                            "in_process_us", "script_us", "discover_us", "floor_us", "bare_us",
                            "coordinated_us", "wrapper_floor_us",
                            *STATUS_COUNTERS, *LOCK_COUNTERS):
                if counter in entry:
                    slot["counters"].setdefault(counter, []).append(entry[counter])
    # A benchmark run once (status_bench's memory, no repetitions) has no aggregates: its
    # counters are read from its one run.
    return {name: slot for name, slot in found.items() if "mean" in slot["agg"] or slot["reps"]}


def us(entry):
    return entry["real_time"] * UNIT_TO_US[entry["time_unit"]]


def relative_standard_error(reps):
    """Standard error of the mean over the repetitions, relative to the mean."""
    if len(reps) < 2:
        return float("nan")
    return statistics.stdev(reps) / statistics.fmean(reps) / math.sqrt(len(reps))


def describe(found, name):
    a = found[name]["agg"]
    return (f"{name} {us(a['mean']):.0f} us (median {us(a['median']):.0f} us, "
            f"cv {a['cv']['real_time'] * 100:.1f} % over {len(found[name]['reps'])} repetitions)")


def compare(found, label, numerator, denominator, limit, target):
    if any(name not in found or "mean" not in found[name]["agg"]
           for name in (numerator, denominator)):
        print(f"{label}: not measured (filtered out or failed)")
        return
    n, d = found[numerator], found[denominator]
    mean_ratio = us(n["agg"]["mean"]) / us(d["agg"]["mean"])
    median_ratio = us(n["agg"]["median"]) / us(d["agg"]["median"])
    # Rough 95 % interval of the ratio of means (repetitions taken as independent).
    spread = 2 * mean_ratio * math.hypot(relative_standard_error(n["reps"]),
                                         relative_standard_error(d["reps"]))
    interval = "" if math.isnan(spread) else f" +/- {spread:.3f}"
    if limit is None:
        verdict = None
    elif math.isnan(spread):
        verdict = "meets target" if mean_ratio <= limit else "ABOVE TARGET"
    else:
        if mean_ratio + spread <= limit:
            verdict = "meets target"
        elif mean_ratio - spread > limit:
            verdict = "ABOVE TARGET"
        else:
            verdict = "inconclusive (the interval straddles the target; rerun on a quieter machine)"
    line = f"{label}: {mean_ratio:.3f}{interval} [median {median_ratio:.3f}]"
    if verdict is not None:
        line += f"   target {target} -> {verdict}"
    print(line)
    print(f"    {describe(found, numerator)}")
    print(f"    {describe(found, denominator)}")


def counter_mean(found, name, counter):
    values = found.get(name, {}).get("counters", {}).get(counter, [])
    return statistics.fmean(values) if values else None


def counter_interval(found, name, counter):
    """A counter of a paired benchmark over its repetitions: (how many, their mean, 2 standard
    errors), or None when it was not measured."""
    values = found.get(name, {}).get("counters", {}).get(counter, [])
    if not values:
        return None
    spread = 2 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return len(values), statistics.fmean(values), spread


def paired(found, name, counter, limit, target, at_least=False):
    """The per-repetition ratios a paired benchmark reported: their mean +/- 2 standard errors.
    The target is an upper limit, or with at_least a lower one (a speed-up)."""
    interval = counter_interval(found, name, counter)
    if interval is None:
        return
    repetitions, mean_ratio, spread = interval
    line = (f"  same, paired ({name} {counter}, {repetitions} repetitions): "
            f"{mean_ratio:.3f} +/- {spread:.3f}")
    if limit is not None and at_least:
        verdict = ("meets target" if mean_ratio - spread >= limit else
                   "BELOW TARGET" if mean_ratio + spread < limit else "inconclusive")
        line += f"   target {target} -> {verdict}"
    elif limit is not None:
        verdict = ("meets target" if mean_ratio + spread <= limit else
                   "ABOVE TARGET" if mean_ratio - spread > limit else "inconclusive")
        line += f"   target {target} -> {verdict}"
    print(line)


def floor(found, name, counter, limit, what):
    """The least a program doing `what` costs here (bench/spawn_floor.c, from a paired
    benchmark), against the target `limit` it bounds."""
    interval = counter_interval(found, name, counter)
    if interval is None:
        return
    repetitions, mean_ratio, spread = interval
    verdict = ("the target is below it: no program so built can meet it here"
               if mean_ratio - spread > limit else
               "the target is above it" if mean_ratio + spread <= limit else
               "inconclusive (the interval straddles the target)")
    print(f"  floor here, {what}: {mean_ratio:.3f} +/- {spread:.3f}   {verdict}   "
          f"[{name} {counter}, {repetitions} repetitions]")


def times(found, name, counters):
    """The mean time of each side of a paired benchmark, in microseconds."""
    parts = []
    for counter in counters:
        value = counter_mean(found, name, counter)
        if value is not None:
            parts.append(f"{counter.removesuffix('_us')} {value:.0f} us")
    if parts:
        print(f"  times ({name}): " + ", ".join(parts))


driver = load(sys.argv[1])
cli = load(sys.argv[2])
discovery = load(sys.argv[3])
in_process = load(sys.argv[4])
status = load(sys.argv[5])
lock = load(sys.argv[6])

print("=== Summary: ratio of mean wall-clock times, +/- a rough 95 % interval ===")
compare(driver, "retrieveResourceInfo / bare spawn+wait", "BM_RetrieveResourceInfo",
        "BM_BareSpawnAndWait", 1.05, "<= 1.05 (within 5 %)")
paired(driver, "BM_PairedRetrieveVsBare", "ratio", 1.05, "<= 1.05")
compare(driver, "process::run / bare spawn+wait (for reference)", "BM_ProcessRun",
        "BM_BareSpawnAndWait", 1.05, "<= 1.05")
compare(cli, "flink-gpu discover process / script process", "BM_FlinkGpuDiscoverProcess",
        "BM_ScriptProcess", 2.0, "<= 2x")
paired(cli, "BM_PairedProcesses", "discover_ratio", 2.0, "<= 2x")
floor(cli, "BM_PairedProcesses", "floor_ratio", 2.0, "spawn_floor (dynamic, as ours)")
floor(cli, "BM_PairedProcesses", "static_floor_ratio", 2.0, "spawn_floor_static")
times(cli, "BM_PairedProcesses", ("script_us", "discover_us", "floor_us"))
compare(cli, "flink-gpu --version process / script process (start-up alone, for reference)",
        "BM_FlinkGpuVersionProcess", "BM_ScriptProcess", None, None)
paired(cli, "BM_PairedProcesses", "version_ratio", None, None)
if "BM_FlinkGpuDiscoverProcess" in cli:
    def mib(name, counter):
        value = cli.get(name, {}).get("agg", {}).get("mean", {}).get(counter)
        return "n/a (ptrace not allowed?)" if value is None else f"{value:.2f} MiB"

    print(f"flink-gpu peak RSS: {mib('BM_FlinkGpuDiscoverProcess', 'peak_rss_MiB')} (VmHWM at "
          f"exit); the bare script: {mib('BM_ScriptProcess', 'peak_rss_MiB')}; wait4 ru_maxrss "
          f"of flink-gpu: {mib('BM_FlinkGpuDiscoverProcess', 'wait4_maxrss_MiB')}")
compare(discovery, "coordinated discovery / bare nvidia-smi (64 GPUs, 63 held)",
        "BM_CoordinatedDiscovery", "BM_BareNvidiaSmi", 1.5, "<= 1.5x")
paired(discovery, "BM_PairedDiscovery", "ratio", 1.5, "<= 1.5x")
floor(discovery, "BM_PairedDiscovery", "floor_ratio", 1.5, "sh wrapper + spawn_floor")
floor(discovery, "BM_PairedDiscovery", "program_floor_ratio", 1.5, "spawn_floor")
floor(discovery, "BM_PairedDiscovery", "static_program_floor_ratio", 1.5, "spawn_floor_static")
times(discovery, "BM_PairedDiscovery", ("bare_us", "coordinated_us", "wrapper_floor_us"))
compare(discovery, "coordinated program without the sh wrapper / bare nvidia-smi (for reference)",
        "BM_CoordinatedProgram", "BM_BareNvidiaSmi", None, None)
paired(discovery, "BM_PairedDiscovery", "program_ratio", None, None)
compare(discovery, "plain discovery (no coordination) / bare nvidia-smi (for reference)",
        "BM_PlainDiscovery", "BM_BareNvidiaSmi", None, None)
paired(discovery, "BM_PairedDiscovery", "plain_ratio", None, None)
compare(in_process, "in-process default discovery / the same through the script (64 GPUs, 63 "
        "held, stand-in NVML)", "BM_InProcessDiscovery", "BM_ScriptDiscovery", 0.05,
        "<= 0.05 (20x faster)")
paired(in_process, "BM_PairedInProcessVsScript", "speedup", 20.0, ">= 20x (speed-up)",
       at_least=True)
paired(in_process, "BM_PairedInProcessVsScript", "in_process_us", None, None)
paired(in_process, "BM_PairedInProcessVsScript", "script_us", None, None)


def over_bare(found, name, label, commands, bare):
    """Each command's mean time over the bare read's (the ratio of the means), with the median
    of the repetitions' own ratios in brackets."""
    bare_ms = counter_mean(found, name, f"{bare}_ms")
    if bare_ms is None:
        print(f"{label}: not measured (filtered out or failed)")
        return
    print(f"{label} (bare read {bare_ms:.2f} ms):")
    for command in commands:
        ms = counter_mean(found, name, f"{command}_ms")
        ratios = found[name]["counters"].get(f"{command}_ratio", [])
        if ms is None or not ratios:
            continue
        print(f"    {command:<11} {ms:8.1f} ms  {ms / bare_ms:7.1f}x the bare read "
              f"[median {statistics.median(ratios):.1f}x]")


over_bare(status, "BM_PairedRecords/100000", "100,000 records: each command over cat of the file",
          STATUS_COMMANDS, "cat")
over_bare(status, "BM_PairedRecords/10000", "10,000 records: each command over cat of the file",
          STATUS_COMMANDS, "cat")
if "BM_PairedRecords/100000" in status and "BM_PairedRecords/10000" in status:
    growth = []
    for command in STATUS_COMMANDS:
        large = counter_mean(status, "BM_PairedRecords/100000", f"{command}_ms")
        small = counter_mean(status, "BM_PairedRecords/10000", f"{command}_ms")
        if large is not None and small:
            growth.append(f"{command} {large / small:.1f}x")
    print("  from 10,000 records to 100,000 (10x; linear is about 10x): " + ", ".join(growth))
over_bare(status, "BM_PairedHealth", "16,000 health lines: each command over cat of the file",
          ("status", "check"), "cat")
watch_ms = counter_mean(status, "BM_PairedWatchUpdate", "watch_ms")
read_ms = counter_mean(status, "BM_PairedWatchUpdate", "read_ms")
if watch_ms is not None and read_ms:
    print(f"watch's update of 16,000 health lines (in-process): {watch_ms:.1f} ms, "
          f"{watch_ms / read_ms:.1f}x a bare read of the file ({read_ms:.2f} ms)")
for name in sorted(status):
    if not name.startswith("BM_ReleaseJunkMemory/"):
        continue
    peak = counter_mean(status, name, "peak_MiB")
    size = counter_mean(status, name, "file_MiB")
    version = counter_mean(status, name, "version_MiB")
    if peak is None or not size:
        continue
    kind = ("yes", "mixed", "some")[int(name.rsplit("kind:", 1)[1])]
    print(f"release --junk on {size:.0f} MiB ({kind}): peak {peak:.1f} MiB, {peak / size:.2f}x the "
          f"file (flink-gpu --version alone: {version:.1f} MiB)   target about 2x")


def full_file_runs(prefix, argument, labels, describe):
    """A line for each run of `prefix` (BM_FullFile…): its time and peak against the file's size;
    `labels` names the values of its argument `argument`, `describe` makes the line's start."""
    for name in sorted(status):
        if not name.startswith(prefix):
            continue
        peak = counter_mean(status, name, "peak_MiB")
        size = counter_mean(status, name, "file_MiB")
        run_ms = counter_mean(status, name, "run_ms")
        if peak is None or not size or run_ms is None:
            continue
        label = labels[int(name.rsplit(f"{argument}:", 1)[1])]
        print(f"{describe(label, size)}: {run_ms:.0f} ms, peak {peak:.1f} MiB, "
              f"{peak / size:.0f}x the file")


full_file_runs("BM_FullFileAllocation/", "kind", ("gone owners' records", "held records"),
               lambda kind, size: f"a coordinated discovery from a full file ({size:.1f} MiB, "
                                  f"{kind})")
full_file_runs("BM_FullFileStatus/", "gpu", ("status", "status --gpu 0"),
               lambda command, size: f"{command} on a full file ({size:.1f} MiB of gone owners' "
                                     f"records)")
for name in sorted(lock, key=lambda n: [int(p.split(":")[1]) for p in n.split("/")[1:]]):
    if counter_mean(lock, name, "blocking_ms") is None:
        continue
    processes, hold = (part.split(":")[1] for part in name.split("/")[1:3])
    print(f"{processes} processes taking the lock 20 times each, held {hold} us, "
          f"over a blocking flock:")
    for way in LOCK_WAYS:
        ms = counter_mean(lock, name, f"{way}_ms")
        cpu = counter_mean(lock, name, f"{way}_cpu_ms")
        ratios = ("" if way == "blocking" else
                  f"  {counter_mean(lock, name, f'{way}_ratio'):.2f}x the time, "
                  f"{counter_mean(lock, name, f'{way}_cpu_ratio'):.2f}x the CPU")
        print(f"    {way:<9} {ms:7.1f} ms, CPU {cpu:7.1f} ms{ratios}")
for error in dict.fromkeys(errors):
    print(f"FAILED: {error}", file=sys.stderr)
sys.exit(1 if errors else 0)
PY
