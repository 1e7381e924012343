#!/bin/sh
# For a host with NVIDIA GPUs and a driver: checks what only a real host can answer (NVML against
# nvidia-smi, the discovery as Flink runs it, other users, MIG, masks, the topology, health,
# watch, MPS) and writes a report to judge it by afterwards, without the machine
# (docs/gpu-host-check.md).
#
#   gpu-machine-check.sh --bundle DIR [--report FILE] [STAND-INS]
#       The programs of a bundle (`make gpu-check-bundle`, build/gpu-check-bundle/), no build:
#       for a host that has glibc, libnvidia-ml.so.1, nvidia-smi, a POSIX shell and coreutils,
#       and nothing else (no compiler, CMake, Python or package archive).
#   gpu-machine-check.sh [--report FILE] [STAND-INS] [BUILD_DIR]
#       Full: configures and builds BUILD_DIR (default build-gpu-check; the Debian packages of
#       scripts/install-deps.sh must be there already), runs every test, then the same checks
#       with the build's programs.
#
# STAND-INS, for testing this script on a machine without GPUs (tests/tools/); each is copied
# into the run's own folder, readable by `nobody`:
#   --stand-in-nvml LIB    a libnvidia-ml.so.1 to load instead of the system's
#                          (FLINK_GPU_NVML_LIBRARY)
#   --stand-in-host JSON   the host the stand-in NVML of tests/fixtures/nvml plays
#                          (FAKE_NVML_DEVICES)
#   --stand-in-smi DIR     a folder put first on PATH: its nvidia-smi (and anything else) stands
#                          in for the system's
# Without them the checks see the real library and the real nvidia-smi only: the variables that
# could point elsewhere, and an inherited CUDA_VISIBLE_DEVICES, are unset.
#
# The checks, each with its verdict (pass, fail, timeout or skipped):
#   build, tests      (full mode) configure and build; ctest, every test
#   host              uname, nvidia-smi's summary, its GPU list and -L, the libnvidia-ml the
#                     loader lists
#   links             the programs need glibc alone (ldd, or readelf -d)
#   compare           tools/nvml-vs-nvidia-smi: count, indices, UUIDs, PCI bus ids, MIG UUIDs,
#                     median times and their ratio
#   discovery         nvidia-gpu-discovery.sh 1, as Flink runs it
#   coordination      the same in coordination mode, two owners: two distinct GPUs (one where the
#                     discovery finds one GPU), the file
#   all-gpus          every GPU at once, as this user: none left out, no warning
#   nobody            the same as `nobody` (root only: setpriv or runuser; skipped, saying why,
#                     when the switch fails or the run is nobody's already)
#   mig               every MIG unit, as this user and as nobody (skipped without MIG)
#   mask              an inherited CUDA_VISIBLE_DEVICES: its entries, a UUID prefix, NoDevFiles,
#                     exec passing it on with CUDA_DEVICE_ORDER=PCI_BUS_ID
#   topology          flink-gpu topology next to nvidia-smi topo -m, its JSON, what placement
#                     hands out against --placement index
#   check, status     flink-gpu check --expect N and flink-gpu status (text, JSON, Prometheus);
#                     beside them what the driver says: nvidia-smi's process list and its -q
#                     lines of recovery action, NVLink fabric and compute mode; then a CUDA
#                     process of our own on GPU 0 that no record names (tools/cuda-mps-client):
#                     status must show GPU 0 busy with it, exec of every GPU must be refused
#                     (not tried without libcuda.so.1, or where the driver does not list it)
#   watch             flink-gpu watch for GPU_CHECK_WATCH_SECONDS, then SIGTERM: exit 0
#   mps               two exec -n 1 --share clients under an MPS control daemon, a third refused,
#                     one asking beyond its share failing (skipped without nvidia-cuda-mps-control)
#
# Every command runs under coreutils' timeout, stdin from /dev/null, within what is left of its
# check's limit (GPU_CHECK_STEP_TIMEOUT, default 60 s) and of the run's (GPU_CHECK_TOTAL_TIMEOUT,
# default 290 s, counted after the build and the tests), with NVIDIA_SMI_TIMEOUT half of that
# (our programs stop a hung nvidia-smi themselves): a check that fails or times out is reported
# and the next one runs. Every discovery, exec, share, status, check and watch uses a
# coordination file of the run's own folder, never the host's. A closed stdout does not end the
# run. The report (FILE, default gpu-check-report.txt, and its JSON twin FILE.json) holds every
# command, its exit status, its output (the first 150 and the last 50 lines when there are more
# than 200, at most 64 KiB), its time, and each check's verdict. Other settings:
# GPU_CHECK_WATCH_SECONDS (default 5, at most half a check's limit), NVML_CHECK_RUNS (timed
# runs, default 10, at most 1000), GPU_CHECK_BUILD_TIMEOUT (full mode, each of build and tests,
# default 3600 s); each a whole number from 1 to 999999.
#
# Exit status: 0 when every check passed or was skipped, 1 when one failed or timed out, 2 when
# the command line is wrong or the run could not start (no bundle, no timeout, no report).
#
# POSIX sh and these tools only (tests/tools/ runs it with nothing else on PATH): awk, cat,
# chmod, cp, date, dirname, env, grep, head and tail (with -c), id, ls, mkdir, mktemp, mv, rm,
# sed, sleep, timeout (coreutils, with -k), tr, uname, wc; ldd or readelf, setpriv or runuser,
# ldconfig, where there; cmake, ctest and nproc in full mode.

set -u

program_name=gpu-machine-check
usage() {
  cat >&2 <<'USAGE'
usage: gpu-machine-check.sh --bundle DIR [--report FILE] [STAND-INS]
       gpu-machine-check.sh [--report FILE] [STAND-INS] [BUILD_DIR]
STAND-INS: --stand-in-nvml LIB  --stand-in-host JSON  --stand-in-smi DIR
(see the head of this script, or docs/gpu-host-check.md)
USAGE
  exit 2
}
die() {
  echo "$program_name: $*" >&2
  exit 2
}

# --- the command line ---------------------------------------------------------------------------

mode=full
bundle=
build_dir=
report=
stand_in_nvml=
stand_in_host=
stand_in_smi=
while [ $# -gt 0 ]; do
  case $1 in
    --bundle | --report | --stand-in-nvml | --stand-in-host | --stand-in-smi)
      [ $# -ge 2 ] && [ -n "$2" ] || usage
      case $1 in
        --bundle) mode=bundle bundle=$2 ;;
        --report) report=$2 ;;
        --stand-in-nvml) stand_in_nvml=$2 ;;
        --stand-in-host) stand_in_host=$2 ;;
        --stand-in-smi) stand_in_smi=$2 ;;
      esac
      shift 2
      ;;
    -h | --help)
      sed -n '2,/^$/ s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    -*) usage ;;
    *)
      [ -z "$build_dir" ] || usage
      build_dir=$1
      shift
      ;;
  esac
done
[ "$mode" = full ] || [ -z "$build_dir" ] || usage

absolute() {
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s/%s\n' "$(pwd)" "$1" ;;
  esac
}

# A whole number from the environment ($1: its name, $2: the default): 1 to 999999, six digits
# at most, so that no shell's arithmetic overflows on it.
seconds_setting() {
  seconds_value=
  eval "seconds_value=\${$1:-$2}"
  case $seconds_value in
    '' | *[!0-9]* | 0* | ???????*)
      die "$1 must be a whole number from 1 to 999999, not '$seconds_value'"
      ;;
  esac
  printf '%s\n' "$seconds_value"
}
step_timeout=$(seconds_setting GPU_CHECK_STEP_TIMEOUT 60) || exit 2
total_timeout=$(seconds_setting GPU_CHECK_TOTAL_TIMEOUT 290) || exit 2
watch_seconds=$(seconds_setting GPU_CHECK_WATCH_SECONDS 5) || exit 2
build_timeout=$(seconds_setting GPU_CHECK_BUILD_TIMEOUT 3600) || exit 2
runs=$(seconds_setting NVML_CHECK_RUNS 10) || exit 2
[ "$runs" -le 1000 ] || die "NVML_CHECK_RUNS must be a whole number from 1 to 1000, not '$runs'"
# watch must be stopped by its SIGTERM, and the check end, within its check's limit, on a loaded
# machine too: it runs at most half the limit.
watch_asked=$watch_seconds
[ "$watch_seconds" -le $((step_timeout / 2)) ] || watch_seconds=$((step_timeout / 2))
[ "$watch_seconds" -ge 1 ] || watch_seconds=1
kill_grace=3

repo_root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$mode" = bundle ]; then
  [ -d "$bundle" ] || die "no bundle at $bundle (make gpu-check-bundle makes one)"
  bundle=$(cd "$bundle" && pwd)
  flink_gpu=$bundle/bin/flink-gpu
  plugin=$bundle/plugins/external-resource-gpu
  tool=$bundle/tools/nvml-vs-nvidia-smi
  client=$bundle/tools/cuda-mps-client
  for needed in "$flink_gpu" "$plugin/nvidia-gpu-discovery" "$plugin/nvidia-gpu-discovery.sh" \
    "$tool" "$client"; do
    [ -x "$needed" ] || die "$bundle is not a whole bundle: $needed is missing or not executable"
  done
  [ -f "$plugin/gpu-discovery-common.sh" ] || die "$bundle lacks $plugin/gpu-discovery-common.sh"
else
  build_dir=$(absolute "${build_dir:-$repo_root/build-gpu-check}")
  flink_gpu=$build_dir/bin/flink-gpu
  plugin=$build_dir/plugins/external-resource-gpu
  tool=$build_dir/bin/nvml-vs-nvidia-smi
  client=$build_dir/bin/cuda-mps-client
fi
report=$(absolute "${report:-gpu-check-report.txt}")
json_report=$report.json
for stand_in in "$stand_in_nvml" "$stand_in_host"; do
  [ -z "$stand_in" ] || [ -f "$stand_in" ] || die "no such file: $stand_in"
done
[ -z "$stand_in_smi" ] || [ -d "$stand_in_smi" ] || die "no such folder: $stand_in_smi"

timeout -k 1 5 sleep 0 2>/dev/null ||
  die "coreutils' timeout (with -k) is needed to bound every step; it is not on PATH ($PATH)"

# The checks are about the real library and the real nvidia-smi: nothing may point elsewhere,
# unless a stand-in was asked for. Nor may a mask of the shell that runs this limit what the
# checks see (mask sets its own). NVIDIA_SMI_TIMEOUT is set for each command (run_cmd).
unset FLINK_GPU_NVML_LIBRARY FAKE_NVML_DEVICES FAKE_NVML_CALL_LOG NVIDIA_SMI_TIMEOUT
unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY

# Whether other users (nobody) can enter folder $1: it and every folder above it are open to
# others (the x bit of others, or t), links followed.
open_to_others() {
  open_dir=$1
  while :; do
    case $(ls -ldL -- "$open_dir" 2>/dev/null) in
      d????????[xt]*) ;;
      *) return 1 ;;
    esac
    [ "$open_dir" != / ] || return 0
    open_dir=$(dirname -- "$open_dir")
  done
}

# The run's folder: one that everyone can enter, since the checks as nobody run the copies
# there, and whose path is one word, since it goes into --discovery-args. Under TMPDIR when
# TMPDIR is so, else under /tmp (a private TMPDIR, 0700, is common for root).
tmp_base=${TMPDIR:-/tmp}
tmp_note=
case $tmp_base in
  /*[!A-Za-z0-9_./+-]*) tmp_note="TMPDIR=$tmp_base holds a character other than A-Z a-z 0-9 _ . / + -" ;;
  /*) open_to_others "$tmp_base" ||
    tmp_note="TMPDIR=$tmp_base is not a folder that other users (nobody) can enter" ;;
  *) tmp_note="TMPDIR=$tmp_base is not an absolute path" ;;
esac
[ -z "$tmp_note" ] || tmp_base=/tmp
work=$(mktemp -d "$tmp_base/gpu-machine-check.XXXXXX" 2>/dev/null) ||
  die "cannot make the run's folder in $tmp_base (mktemp -d failed)"
owners=
mps_pipe=
cleanup() {
  for owner_pid in $owners; do
    kill "$owner_pid" 2>/dev/null
  done
  if [ -n "$mps_pipe" ]; then
    echo quit | CUDA_MPS_PIPE_DIRECTORY=$mps_pipe timeout -k 1 2 nvidia-cuda-mps-control \
      >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
# A closed stdout or stderr (ssh dropped, `| head`): the run goes on and writes its report,
# without the progress lines. Not ignored, which every command run would inherit: a trap's
# action is reset to the default in them.
trap 'exec >/dev/null' PIPE
chmod 755 "$work"
work_closed=
open_to_others "$work" || work_closed="the run's folder $work cannot be entered by other users"

if [ -n "$stand_in_nvml" ]; then
  mkdir -p "$work/stand-in/nvml"
  cp "$stand_in_nvml" "$work/stand-in/nvml/libnvidia-ml.so.1" || die "cannot copy $stand_in_nvml"
  FLINK_GPU_NVML_LIBRARY=$work/stand-in/nvml/libnvidia-ml.so.1
  export FLINK_GPU_NVML_LIBRARY
fi
if [ -n "$stand_in_host" ]; then
  mkdir -p "$work/stand-in"
  cp "$stand_in_host" "$work/stand-in/host.json" || die "cannot copy $stand_in_host"
  FAKE_NVML_DEVICES=$work/stand-in/host.json
  export FAKE_NVML_DEVICES
fi
if [ -n "$stand_in_smi" ]; then
  mkdir -p "$work/stand-in/smi"
  cp -R "$stand_in_smi/." "$work/stand-in/smi/" || die "cannot copy $stand_in_smi"
  PATH=$work/stand-in/smi:$PATH
  export PATH
fi
[ ! -d "$work/stand-in" ] || chmod -R a+rX "$work/stand-in"

# The report, once the run can start.
# true, not the special builtin ':', whose failed redirection would end the shell unannounced.
true 2>/dev/null >"$report" || die "cannot write the report $report"
true 2>/dev/null >"$json_report" || die "cannot write the report $json_report"

# --- time ---------------------------------------------------------------------------------------

# The clock of every duration and deadline of the run: clock sets clock_ms and clock_s. Linux's
# /proc/uptime, monotonic and read by the shell itself, in steps of 10 ms; the wall clock (date)
# where it cannot be read. A run records about a hundred commands, and each would otherwise start
# two or three processes to read the time, at milliseconds a start on a loaded host.
clock() {
  if read -r clock_uptime _ 2>/dev/null </proc/uptime; then
    case $clock_uptime in
      [0-9]*.[0-9][0-9])
        case ${clock_uptime%.*} in
          *[!0-9]*) ;;
          *)
            clock_s=${clock_uptime%.*}
            clock_fraction=${clock_uptime#*.}
            clock_ms=$((clock_s * 1000 + ${clock_fraction#0} * 10))
            return
            ;;
        esac
        ;;
    esac
  fi
  clock_value=$(date +%s%N 2>/dev/null)
  case $clock_value in
    '' | *[!0-9]*)
      clock_s=$(date +%s)
      clock_ms=$((clock_s * 1000))
      ;;
    *)
      clock_ms=$((clock_value / 1000000))
      clock_s=$((clock_value / 1000000000))
      ;;
  esac
}
now_ms() {
  clock
  echo "$clock_ms"
}
# Milliseconds as seconds with three decimals (none below 0): seconds_in sets seconds,
# seconds_of prints them.
seconds_in() {
  seconds=$1
  [ "$seconds" -ge 0 ] || seconds=0
  seconds_ms=$((seconds % 1000))
  case $seconds_ms in
    ?) seconds_ms=00$seconds_ms ;;
    ??) seconds_ms=0$seconds_ms ;;
  esac
  seconds=$((seconds / 1000)).$seconds_ms
}
seconds_of() {
  seconds_in "$1"
  printf '%s' "$seconds"
}
clock
run_started_ms=$clock_ms
started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# The run's limit starts after the build and the tests (full mode): until then, none.
total_deadline=$((clock_s + 864000))

# --- the report ---------------------------------------------------------------------------------

max_lines=200
max_bytes=65536

# JSON string literals: ", \ and control characters escaped, valid UTF-8 kept, any other byte
# U+FFFD, so that the file is valid JSON whatever a command printed. Each input line ends in \n,
# the last one too unless strip is set.
json_awk='
function utf8_length(s, i, n,    b, second, k, j, c) {
  b = ord[substr(s, i, 1)]
  if (b >= 194 && b <= 223) k = 2
  else if (b >= 224 && b <= 239) k = 3
  else if (b >= 240 && b <= 244) k = 4
  else return 0
  if (i + k - 1 > n) return 0
  second = ord[substr(s, i + 1, 1)]
  if ((b == 224 && second < 160) || (b == 237 && second > 159) ||
      (b == 240 && second < 144) || (b == 244 && second > 143)) return 0
  for (j = 1; j < k; j++) {
    c = ord[substr(s, i + j, 1)]
    if (c < 128 || c > 191) return 0
  }
  return k
}
BEGIN {
  for (i = 1; i < 256; i++) ord[sprintf("%c", i)] = i
  printf "\""
}
{
  if (NR > 1) printf "\\n"
  line = $0
  if (line !~ /[^ -~]/ && index(line, "\\") == 0 && index(line, "\"") == 0) {
    printf "%s", line
    next
  }
  n = length(line)
  for (i = 1; i <= n; i++) {
    c = substr(line, i, 1)
    b = ord[c]
    if (c == "\\") printf "\\\\"
    else if (c == "\"") printf "\\\""
    else if (b == 9) printf "\\t"
    else if (b == 13) printf "\\r"
    else if (b < 32 || b == 127) printf "\\u%04x", b
    else if (b < 128) printf "%s", c
    else {
      k = utf8_length(line, i, n)
      if (k == 0) printf "\\ufffd"
      else { printf "%s", substr(line, i, k); i += k - 1 }
    }
  }
}
END {
  if (NR > 0 && !strip) printf "\\n"
  printf "\""
}'
# A file as a JSON literal. Most files a command leaves are empty (its stderr, mostly): those
# start no process.
json_file() {
  if [ -s "$1" ]; then
    tr -d '\000' <"$1" | LC_ALL=C awk "$json_awk"
  else
    printf '""'
  fi
}
# A string as a JSON literal: without the \n json_file gives every line. A shell string holds no
# NUL. One of letters, digits and the characters of paths and plain words needs no escape and no
# process (the characters are listed, not given as ranges, which some shells read in the
# locale's collation order).
json_string() {
  case $1 in
    *[!abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\ _./=:,+@%-]*)
      printf '%s' "$1" | LC_ALL=C awk -v strip=1 "$json_awk"
      ;;
    *) printf '"%s"' "$1" ;;
  esac
}
# Text for the text report: control characters but tab made '?', so that none reaches a
# terminal; each line behind PREFIX ($2). Nothing, and no process, for an empty file.
printable() {
  [ ! -s "$1" ] ||
    tr '\000-\010\013-\037\177' '[?*]' <"$1" | awk -v prefix="$2" '{ print prefix $0 }'
}

# bound FILE: cuts FILE to the first 150 and the last 50 lines (48 and 16 KiB at most) when it
# has more than 200 lines or 64 KiB; sets bound_lines, bound_bytes (the whole's) and bound_cut.
bound() {
  bound_lines=0
  bound_bytes=0
  bound_cut=false
  [ -s "$1" ] || return 0
  # wc prints the lines, then the bytes.
  bound_counts=$(wc -lc <"$1")
  read -r bound_lines bound_bytes <<EOF
$bound_counts
EOF
  if [ "$bound_lines" -gt $max_lines ] || [ "$bound_bytes" -gt $max_bytes ]; then
    bound_cut=true
    {
      head -n 150 "$1" | head -c 49152
      printf '\n[... cut by %s: %s lines, %s bytes in all; the first 150 and the last 50 lines are kept ...]\n' \
        "$program_name" "$bound_lines" "$bound_bytes"
      tail -n 50 "$1" | tail -c 16384
    } >"$1.cut"
    mv "$1.cut" "$1"
  fi
}

# The command as a shell would take it back, in quoted: words quoted only where they need it.
quote() {
  quoted=
  for word in "$@"; do
    case $word in
      '') word="''" ;;
      *\'*) word="'$(printf '%s' "$word" | sed "s/'/'\\\\''/g")'" ;;
      *[!A-Za-z0-9_./=:,+@%-]*) word="'$word'" ;;
    esac
    quoted="$quoted${quoted:+ }$word"
  done
}
quote_words() {
  quote "$@"
  printf '%s\n' "$quoted"
}

text() { printf '%s\n' "$*" >>"$report"; }
# A progress line on stdout, which may be closed (the PIPE trap).
say() { printf '%s\n' "$*" 2>/dev/null; }

checks_total=0
count_pass=0
count_fail=0
count_timeout=0
count_skipped=0
: >"$work/checks.json"
: >"$work/summary.txt"
command_number=0

# begin_check ID TITLE [LIMIT]: the checks' state, their limit (LIMIT s, default the step's,
# never past the run's), their heading.
begin_check() {
  check_id=$1
  check_title=$2
  check_limit=${3:-$step_timeout}
  check_verdict=pass
  check_reason=
  clock
  check_started_ms=$clock_ms
  check_deadline=$((clock_s + check_limit))
  [ "$check_deadline" -le "$total_deadline" ] || check_deadline=$total_deadline
  : >"$work/check.commands"
  : >"$work/check.notes"
  : >"$work/check.failures"
  text ""
  text "== $check_id: $check_title"
  say "== $check_id: $check_title"
}

# Before a JSON value is appended to the list in file $1: the comma, where needed.
json_separate() {
  [ ! -s "$1" ] || printf ',\n' >>"$1"
}
# Appends "$2" (a JSON value) to the list in file $1.
json_append() {
  json_separate "$1"
  printf '%s' "$2" >>"$1"
}

note() {
  text "  note: $*"
  json_append "$work/check.notes" "$(json_string "$*")"
}

fail_check() {
  text "  FAILED: $*"
  say "   FAILED: $*"
  json_append "$work/check.failures" "$(json_string "$*")"
  if [ "$check_verdict" = pass ] || [ "$check_verdict" = skipped ]; then
    check_verdict=fail
    check_reason=$*
  fi
}

timeout_check() {
  text "  TIMED OUT: $*"
  say "   TIMED OUT: $*"
  json_append "$work/check.failures" "$(json_string "$*")"
  if [ "$check_verdict" != timeout ]; then
    check_verdict=timeout
    check_reason=$*
  fi
}

skip_check() {
  text "  skipped: $*"
  if [ "$check_verdict" = pass ]; then
    check_verdict=skipped
    check_reason=$*
  fi
}

# Seconds left to the current check (at most the run's): seconds_left sets left, time_left
# prints them.
seconds_left() {
  clock
  left=$((check_deadline - clock_s))
}
time_left() {
  seconds_left
  echo "$left"
}

# record JUDGED RC ELAPSED_MS TIMED_OUT OUT ERR COMMAND...: one command in both reports.
record() {
  record_judged=$1 record_rc=$2 record_ms=$3 record_timed_out=$4 record_out=$5 record_err=$6
  shift 6
  quote "$@"
  record_text=$quoted
  text "\$ $record_text"
  seconds_in "$record_ms"
  if [ "$record_timed_out" = true ]; then
    text "  timed out after $seconds s (exit $record_rc)"
  else
    text "  exit $record_rc in $seconds s"
  fi
  bound "$record_out"
  out_lines=$bound_lines out_bytes=$bound_bytes out_cut=$bound_cut
  bound "$record_err"
  err_lines=$bound_lines err_bytes=$bound_bytes err_cut=$bound_cut
  printable "$record_out" "  | " >>"$report"
  printable "$record_err" "  ! " >>"$report"
  json_separate "$work/check.commands"
  printf '{"command": %s, "judged": "%s", "exit": %d, "timed_out": %s, "duration_ms": %d, "stdout": %s, "stdout_lines": %d, "stdout_bytes": %d, "stdout_cut": %s, "stderr": %s, "stderr_lines": %d, "stderr_bytes": %d, "stderr_cut": %s}' \
    "$(json_string "$record_text")" "$record_judged" "$record_rc" "$record_timed_out" \
    "$record_ms" "$(json_file "$record_out")" "$out_lines" "$out_bytes" "$out_cut" \
    "$(json_file "$record_err")" "$err_lines" "$err_bytes" "$err_cut" >>"$work/check.commands"
}

# The command under way, in the background so that a signal's trap need not wait for it (wait
# returns at once when a trapped signal comes).
running_pid=
foreign_pid=

# NVIDIA_SMI_TIMEOUT for a command that may run $1 s: half of it, at least 1 s, so that our
# programs stop a hung nvidia-smi themselves (SIGKILL 0.2 s after their limit) before timeout
# stops them; nvidia-smi may run in a process group of its own, which timeout does not reach.
smi_limit_for() {
  NVIDIA_SMI_TIMEOUT=$(($1 / 2))
  [ "$NVIDIA_SMI_TIMEOUT" -ge 1 ] || NVIDIA_SMI_TIMEOUT=1
  export NVIDIA_SMI_TIMEOUT
}

# After a command that timeout stopped (or watch's SIGTERM): SIGKILL to what is left of the
# process group timeout made ($1, timeout's pid), such as a child that ignored SIGTERM while the
# command itself ended on it, which timeout then leaves running. The group's number stays its
# own while anything is in it; when nothing is, the kill finds nothing.
end_group() {
  kill -s KILL -- "-$1" 2>/dev/null
}

# run_cmd [--any-exit | --shown] [--runs-for SECONDS] [--] COMMAND [ARG...]
# Runs one command of the current check under timeout, within what is left of the check's limit,
# stdin from /dev/null, and records it. By default an exit status other than 0 fails the check;
# --any-exit leaves the judging to the caller, --shown is for information only. --runs-for: the
# command runs until it is sent SIGTERM after SECONDS, and its own exit status is kept (watch).
# A time-out makes the check time out. Sets rc, out and err (the files of stdout and stderr, cut
# as the report shows them) and elapsed_ms.
run_cmd() {
  judged=exit-status
  runs_for=
  while :; do
    case ${1-} in
      --any-exit)
        judged=by-the-check
        shift
        ;;
      --shown)
        judged=shown
        shift
        ;;
      --runs-for)
        runs_for=$2
        shift 2
        ;;
      --)
        shift
        break
        ;;
      *) break ;;
    esac
  done
  command_number=$((command_number + 1))
  out=$work/command$command_number.out
  err=$work/command$command_number.err
  : >"$out"
  : >"$err"
  seconds_left
  ran=false
  if [ "$left" -le 0 ]; then
    rc=124
    elapsed_ms=0
    timed_out=true
    timeout_check "not run, no time left: $(quote_words "$@")"
    return
  fi
  timed_out=false
  ran=true
  smi_limit_for "$left"
  clock
  started_ms=$clock_ms
  if [ -n "$runs_for" ]; then
    [ "$runs_for" -lt "$left" ] || runs_for=$left
    timeout -s TERM -k "$kill_grace" --preserve-status "$runs_for" "$@" </dev/null >"$out" \
      2>"$err" &
    running_pid=$!
    wait "$running_pid"
    rc=$?
    # Killed after SIGTERM was not enough.
    [ "$rc" -ne 137 ] || timed_out=true
    end_group "$running_pid"
  else
    timeout -k "$kill_grace" "$left" "$@" </dev/null >"$out" 2>"$err" &
    running_pid=$!
    wait "$running_pid"
    rc=$?
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || end_group "$running_pid"
  fi
  running_pid=
  clock
  elapsed_ms=$((clock_ms - started_ms))
  if [ -z "$runs_for" ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } &&
    [ "$elapsed_ms" -ge $((left * 1000 - 1000)) ]; then
    timed_out=true
  fi
  record "$judged" "$rc" "$elapsed_ms" "$timed_out" "$out" "$err" "$@"
  if [ "$timed_out" = true ]; then
    timeout_check "$(quote_words "$@") did not end within $left s"
  elif [ "$judged" = exit-status ] && [ "$rc" -ne 0 ]; then
    # What it said first, stderr before stdout.
    said=$(cat "$err" "$out" | grep -v '^[[:space:]]*$' | head -n 1)
    fail_check "exit $rc: $(quote_words "$@")${said:+: $said}"
  fi
}

end_check() {
  clock
  check_ms=$((clock_ms - check_started_ms))
  checks_total=$((checks_total + 1))
  case $check_verdict in
    pass) count_pass=$((count_pass + 1)) ;;
    fail) count_fail=$((count_fail + 1)) ;;
    timeout) count_timeout=$((count_timeout + 1)) ;;
    skipped) count_skipped=$((count_skipped + 1)) ;;
  esac
  seconds_in "$check_ms"
  text "-> $check_verdict${check_reason:+: $check_reason} ($seconds s)"
  say "   $check_verdict${check_reason:+: $check_reason} ($seconds s)"
  printf '%-8s %-13s %s\n' "$check_verdict" "$check_id" "${check_reason:-$check_title}" \
    >>"$work/summary.txt"
  # One write of the whole object: a signal's trap (finish_report) between two writes would put
  # half an object, and its own result line, into the report.
  json_append "$work/checks.json" "$(
    printf '{"id": %s, "title": %s, "verdict": "%s", "reason": %s, "limit_s": %d, "duration_ms": %d, "failures": [' \
      "$(json_string "$check_id")" "$(json_string "$check_title")" "$check_verdict" \
      "$(json_string "$check_reason")" "$check_limit" "$check_ms"
    [ ! -s "$work/check.failures" ] || cat "$work/check.failures"
    printf '], "notes": ['
    [ ! -s "$work/check.notes" ] || cat "$work/check.notes"
    printf '], "commands": [\n'
    [ ! -s "$work/check.commands" ] || cat "$work/check.commands"
    printf ']}'
  )"
}

# run_check ID TITLE FUNCTION [LIMIT]: one check; none runs past the run's limit, and none but
# build and tests without the programs.
run_check() {
  begin_check "$1" "$2" "${4:-}"
  clock
  if [ "$clock_s" -ge "$total_deadline" ]; then
    timeout_check "not run: the run's limit of $total_timeout s was reached"
  elif [ -n "${no_programs:-}" ]; then
    skip_check "$no_programs"
  else
    "$3"
  fi
  end_check
}

# --- what the checks share ----------------------------------------------------------------------

# nvidia-smi as the discovery finds it: on PATH, then in the folders drivers install it into.
smi=$(command -v nvidia-smi 2>/dev/null) || smi=
case $smi in /*) ;; *) smi= ;; esac
if [ -z "$smi" ]; then
  for folder in /usr/bin /usr/local/bin /usr/local/nvidia/bin /usr/lib/wsl/lib /opt/nvidia/bin; do
    if [ -x "$folder/nvidia-smi" ]; then
      smi=$folder/nvidia-smi
      break
    fi
  done
fi
smi_missing="nvidia-smi was not found, on PATH nor in the driver's folders"

# What nvidia-smi tells of the host (the host check): unknown until then.
gpu_count=
smi_list_state="the host check did not run nvidia-smi's GPU list"
mig_gpus=0
uuid0=
: >"$work/smi-list.txt"
tab=$(printf '\t')

# The discovery's files, copied into the run's folder for nobody to run (the bundle or the build
# folder may be under a home that nobody cannot enter).
shared=$work/plugin
# How to run as nobody (setpriv or runuser), or why the checks as nobody are skipped; the
# nobody check also tries the switch first (a container may forbid it).
as_nobody=
nobody_skip=
if [ "$(id -un 2>/dev/null)" = nobody ]; then
  nobody_skip="this run is nobody's already (all-gpus ran as nobody)"
elif [ "$(id -u)" -ne 0 ]; then
  nobody_skip="not root: cannot run as nobody (setpriv and runuser need root)"
elif ! id -u nobody >/dev/null 2>&1; then
  nobody_skip="this host has no user nobody"
elif command -v setpriv >/dev/null 2>&1; then
  as_nobody=setpriv
  nobody_group=nogroup
  grep -q '^nogroup:' /etc/group 2>/dev/null || nobody_group=nobody
elif command -v runuser >/dev/null 2>&1; then
  as_nobody=runuser
else
  nobody_skip="neither setpriv nor runuser is on PATH: cannot run as nobody"
fi
[ -z "$as_nobody" ] || [ -z "$work_closed" ] || nobody_skip=$work_closed
run_as_nobody() {
  run_as_judged=$1
  shift
  if [ "$as_nobody" = setpriv ]; then
    run_cmd "$run_as_judged" setpriv --reuid=nobody --regid="$nobody_group" --clear-groups -- "$@"
  else
    run_cmd "$run_as_judged" runuser -u nobody -- "$@"
  fi
}

# The files the checks that need them share: the coordination file of the coordination, check,
# status and watch checks; that of exec (mask). Every discovery, exec, share, status, check and
# watch names one of the run's folder, so that nothing of the host's (the records, drains and
# sharing declarations of /var/tmp/flink-gpu-coordination) changes a verdict, and nothing is
# written outside the run's folder. The plain-mode discoveries get one that nothing writes.
coordination=$work/coordination
plain=$work/plain-coordination

# Two owners that outlive the discoveries that record them (the coordination check).
start_owner() {
  sleep 600 >/dev/null 2>&1 &
  owner_pid=$!
  owners="$owners $owner_pid"
}

# --- the checks ---------------------------------------------------------------------------------

check_build() {
  if [ -f "$build_dir/CMakeCache.txt" ] || ! command -v ninja >/dev/null 2>&1; then
    # Keep the generator the folder was made with.
    run_cmd cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFLINK_GPU_WERROR=ON -DFLINK_GPU_BENCH=OFF
  else
    run_cmd cmake -S "$repo_root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFLINK_GPU_WERROR=ON -DFLINK_GPU_BENCH=OFF
  fi
  [ "$rc" -eq 0 ] || return
  run_cmd cmake --build "$build_dir" -j "$(nproc 2>/dev/null || echo 2)"
}

check_tests() {
  run_cmd --any-exit ctest --test-dir "$build_dir" --output-on-failure \
    -j "$(nproc 2>/dev/null || echo 2)"
  [ "$rc" -eq 0 ] || [ "$timed_out" = true ] || fail_check "some tests failed (ctest exited with $rc)"
}

check_host() {
  note "the run's folder: $work${tmp_note:+ (not under TMPDIR: $tmp_note)}"
  run_cmd --shown uname -a
  run_cmd --shown id
  [ "$mode" != bundle ] || run_cmd --shown cat "$bundle/MANIFEST"
  [ -z "$stand_in_nvml$stand_in_host$stand_in_smi" ] ||
    note "STAND-INS, not a real host: NVML ${stand_in_nvml:-none}, host ${stand_in_host:-(none)}, nvidia-smi from ${stand_in_smi:-(the system)}"
  note "libnvidia-ml.so.1: ${FLINK_GPU_NVML_LIBRARY:-as the loader finds it}"
  ldconfig=$(command -v ldconfig 2>/dev/null) || ldconfig=
  for candidate in /sbin/ldconfig /usr/sbin/ldconfig; do
    [ -n "$ldconfig" ] || [ ! -x "$candidate" ] || ldconfig=$candidate
  done
  if [ -n "$ldconfig" ]; then
    run_cmd --shown sh -c '"$1" -p | grep -F libnvidia-ml.so' sh "$ldconfig"
  fi
  # The kernel's own list, one line per GPU: what status and drain read when NVML and nvidia-smi
  # fail with a driver/library version mismatch (docs/operating.md, after a driver upgrade).
  kernel_gpus=${FLINK_GPU_PROC_ROOT:-/proc/driver/nvidia}/gpus
  if [ -d "$kernel_gpus" ]; then
    run_cmd --shown sh -c 'for f in "$1"/*/information; do
      [ -r "$f" ] && awk '"'"'{ i = index($0, ":"); if (!i) next
        k = substr($0, 1, i - 1); v = substr($0, i + 1)
        gsub(/^[ \t]+|[ \t]+$/, "", k); gsub(/^[ \t]+|[ \t]+$/, "", v); f[k] = v }
        END { printf "%s  %s  %s  minor %s  excluded %s\n", f["Bus Location"], f["GPU UUID"],
              f["Model"], f["Device Minor"], f["GPU Excluded"] }'"'"' "$f"
    done' sh "$kernel_gpus"
  else
    note "the kernel's list: $kernel_gpus does not exist (no NVIDIA kernel module loaded)"
  fi
  if [ -z "$smi" ]; then
    fail_check "$smi_missing"
    note "PATH=$PATH; and /usr/bin, /usr/local/bin, /usr/local/nvidia/bin, /usr/lib/wsl/lib, /opt/nvidia/bin"
    return
  fi
  note "nvidia-smi: $smi"
  run_cmd "$smi"
  run_cmd "$smi" --query-gpu=index,uuid,name,pci.bus_id,driver_version,mig.mode.current \
    --format=csv
  if [ "$ran" = false ]; then
    smi_list_state="nvidia-smi's GPU list was not run: the host check's time was up"
  elif [ "$timed_out" = true ]; then
    smi_list_state="nvidia-smi's GPU list did not end within $left s"
  elif [ "$rc" -ne 0 ]; then
    smi_list_state="nvidia-smi's GPU list failed (exit $rc)"
  else
    smi_list_state="nvidia-smi listed no GPU"
    gpu_count=$(awk -F', *' '$1 ~ /^[0-9]+$/ { n++ } END { print n + 0 }' "$out")
    mig_gpus=$(awk -F', *' '$1 ~ /^[0-9]+$/ && $6 ~ /^Enabled/ { n++ } END { print n + 0 }' "$out")
    uuid0=$(awk -F', *' '$1 == "0" { print $2 }' "$out" | tr -d ' \r')
    note "GPUs: $gpu_count, in MIG mode: $mig_gpus, GPU 0: ${uuid0:-?}"
    [ "$gpu_count" -gt 0 ] || fail_check "nvidia-smi lists no GPU"
  fi
  run_cmd "$smi" -L
  cp "$out" "$work/smi-list.txt"
}

# The libraries a program needs, by ldd (or readelf -d): glibc's alone.
check_links() {
  if command -v ldd >/dev/null 2>&1; then
    links_tool=ldd
  elif command -v readelf >/dev/null 2>&1; then
    links_tool=readelf
  else
    skip_check "neither ldd nor readelf is on PATH"
    return
  fi
  for linked in "$flink_gpu" "$plugin/nvidia-gpu-discovery" "$tool" "$client"; do
    if [ "$links_tool" = ldd ]; then
      run_cmd ldd "$linked"
      libraries=$(awk '{ print $1 }' "$out")
    else
      run_cmd readelf -d "$linked"
      libraries=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' "$out")
    fi
    if grep -q 'not found' "$out" "$err"; then
      fail_check "${linked##*/}: $(grep -h 'not found' "$out" "$err" | head -3 | tr '\n' ' ')"
    fi
    for library in $libraries; do
      case ${library##*/} in
        linux-vdso.so.* | linux-gate.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | ld-linux*.so.*) ;;
        *) fail_check "${linked##*/} needs $library, which is not glibc's" ;;
      esac
    done
  done
}

check_compare() {
  if [ -n "$smi" ]; then
    run_cmd --any-exit "$tool" --runs "$runs" --nvidia-smi "$smi"
  else
    run_cmd --any-exit "$tool" --runs "$runs"
  fi
  timing=$(grep '^timing' "$out")
  [ -z "$timing" ] || note "$timing"
  case $rc in
    0) ;;
    1) fail_check "NVML and nvidia-smi disagree: $(sed -n '/^DISAGREE:/,$ s/^  //p' "$out" | head -n 5 | sed 's/$/;/' | tr '\n' ' ' | sed 's/; $//')" ;;
    *) [ "$timed_out" = true ] ||
      fail_check "the comparison could not be made (exit $rc): $(head -n 1 "$err")" ;;
  esac
}

# The first line of stdout must be one device identifier, and the only line.
one_identifier() {
  first=$(head -n 1 "$out")
  case $first in
    '' | *[!0-9A-Za-z-]*) fail_check "$1 printed '$first', not one GPU identifier" ;;
    *) [ "$(wc -l <"$out" | tr -d ' ')" -eq 1 ] || fail_check "$1 printed more than one line" ;;
  esac
}

check_discovery() {
  run_cmd "$plugin/nvidia-gpu-discovery.sh" 1 --coordination-file "$plain"
  [ "$rc" -ne 0 ] || one_identifier "nvidia-gpu-discovery.sh 1"
}

check_coordination() {
  # How many GPUs the discovery itself finds (NVML's, or nvidia-smi's when NVML cannot answer):
  # asked for more than any host has, it names them all. A second owner is refused on a host of
  # one; without the list, two are assumed.
  run_cmd --any-exit "$plugin/nvidia-gpu-discovery.sh" 100000 --coordination-file "$plain"
  found=$(sed -n 's/.* GPU(s) found, 100000 requested (found: \([^)]*\)).*/\1/p' "$err" "$out" |
    head -n 1)
  if [ -n "$found" ]; then
    discovery_count=$(printf '%s\n' "$found" | tr ',' '\n' | grep -c .)
    note "the discovery finds $discovery_count GPU(s): $found"
  else
    discovery_count=2
    note "the discovery did not list its GPUs (exit $rc): two owners, two GPUs expected"
  fi
  start_owner
  first_owner=$owner_pid
  start_owner
  second_owner=$owner_pid
  run_cmd "$plugin/nvidia-gpu-discovery.sh" 1 --enable-coordination-mode \
    --coordination-file "$coordination" --owner-pid "$first_owner"
  [ "$rc" -ne 0 ] || one_identifier "the first owner's discovery"
  first_gpu=$(head -n 1 "$out")
  if [ "$discovery_count" -ge 2 ]; then
    run_cmd "$plugin/nvidia-gpu-discovery.sh" 1 --enable-coordination-mode \
      --coordination-file "$coordination" --owner-pid "$second_owner"
    [ "$rc" -ne 0 ] || one_identifier "the second owner's discovery"
    second_gpu=$(head -n 1 "$out")
    [ "$rc" -ne 0 ] || [ "$first_gpu" != "$second_gpu" ] ||
      fail_check "both owners were given GPU $first_gpu"
  else
    run_cmd --any-exit "$plugin/nvidia-gpu-discovery.sh" 1 --enable-coordination-mode \
      --coordination-file "$coordination" --owner-pid "$second_owner"
    [ "$rc" -eq 1 ] || fail_check "a second owner of the one GPU got exit $rc, not 1"
  fi
  run_cmd --shown cat "$coordination"
}

copy_plugin() {
  [ ! -d "$shared" ] || return 0
  mkdir -p "$shared" &&
    cp "$plugin/nvidia-gpu-discovery" "$plugin/nvidia-gpu-discovery.sh" \
      "$plugin/gpu-discovery-common.sh" "$shared/" &&
    chmod 755 "$shared" "$shared/nvidia-gpu-discovery" "$shared/nvidia-gpu-discovery.sh"
}

# discover_all [--as-nobody] WHO UNITS [ARGS...]: one discovery of every unit (as nobody, by
# setpriv or runuser, with --as-nobody), judged: exit 0, UNITS lines, nothing left out, no
# warning (a MIG GPU's memory for non-root must be quietly unknown).
discover_all() {
  discover_switch=false
  [ "$1" != --as-nobody ] || { discover_switch=true && shift; }
  discover_who=$1 discover_units=$2
  shift 2
  if [ "$discover_switch" = true ]; then
    run_as_nobody --any-exit "$shared/nvidia-gpu-discovery.sh" "$discover_units" "$@" \
      --coordination-file "$plain"
  else
    run_cmd --any-exit "$shared/nvidia-gpu-discovery.sh" "$discover_units" "$@" \
      --coordination-file "$plain"
  fi
  [ "$timed_out" = false ] || return
  # Flink's protocol: the identifiers on one line, comma-separated.
  printed=$(tr ',' '\n' <"$out" | grep -c .)
  if [ "$rc" -ne 0 ]; then
    fail_check "$discover_who: the discovery of $discover_units failed (exit $rc): $(head -n 1 "$err")"
  elif [ "$printed" -ne "$discover_units" ]; then
    fail_check "$discover_who: $printed units printed, $discover_units asked"
  elif grep -q 'left out' "$err"; then
    fail_check "$discover_who: a GPU was left out (lost, or denied to this user)"
  elif grep -qi 'warning' "$err"; then
    fail_check "$discover_who: the discovery warned: $(grep -i warning "$err" | head -n 1)"
  fi
}

need_count() {
  if [ -z "$smi" ]; then
    skip_check "$smi_missing: no GPU count to check against"
    return 1
  elif [ "${gpu_count:-0}" -eq 0 ]; then
    skip_check "$smi_list_state: no GPU count to check against"
    return 1
  fi
  copy_plugin || {
    fail_check "cannot copy the discovery into $shared"
    return 1
  }
}

check_all_gpus() {
  need_count || return
  discover_all "$(id -un)" "$gpu_count"
}

check_nobody() {
  need_count || return
  if [ -n "$nobody_skip" ]; then
    skip_check "$nobody_skip"
    return
  fi
  # Whether this host lets root become nobody at all (a container may not).
  run_as_nobody --any-exit id -un
  [ "$timed_out" = false ] || return
  if [ "$rc" -ne 0 ] || [ "$(cat "$out")" != nobody ]; then
    nobody_skip="$as_nobody cannot switch to nobody here (exit $rc: $(cat "$err" "$out" | head -n 1))"
    skip_check "$nobody_skip"
    return
  fi
  discover_all --as-nobody nobody "$gpu_count"
}

check_mig() {
  need_count || return
  if [ "$mig_gpus" -eq 0 ]; then
    skip_check "no GPU in MIG mode"
    return
  fi
  instances=$(grep -c 'MIG ' "$work/smi-list.txt")
  # Every unit: each MIG instance, and each GPU not in MIG mode.
  units=$((instances + gpu_count - mig_gpus))
  note "MIG instances listed by nvidia-smi -L: $instances; units with --mig: $units"
  discover_all "$(id -un) --mig" "$units" --mig
  if [ -z "$nobody_skip" ]; then
    discover_all --as-nobody nobody "$units" --mig
  else
    note "not as nobody: $nobody_skip"
  fi
  run_cmd "$flink_gpu" discover --mig -n 1 --format json --discovery-args "--coordination-file=$plain"
}

check_mask() {
  need_count || return
  if [ -z "$uuid0" ]; then
    fail_check "nvidia-smi gave no UUID for GPU 0"
    return
  fi
  # The scheduler's mask: the last GPU by index, GPU 0 by a UUID prefix.
  prefix0=$(printf '%.12s' "$uuid0")
  last=$((gpu_count - 1))
  if [ "$gpu_count" -ge 2 ]; then
    mask=$last,$prefix0
    amount=2
  else
    mask=$prefix0
    amount=1
  fi
  run_cmd env CUDA_VISIBLE_DEVICES="$mask" "$shared/nvidia-gpu-discovery.sh" "$amount" \
    --coordination-file "$plain"
  got=$(tr '\n' ',' <"$out" | sed 's/,$//')
  [ "$rc" -ne 0 ] || [ "$got" = "$mask" ] ||
    fail_check "under CUDA_VISIBLE_DEVICES=$mask the discovery printed '$got', not '$mask'"
  run_cmd env CUDA_VISIBLE_DEVICES="$mask" "$flink_gpu" discover -n "$amount" --format json \
    --discovery-args "--coordination-file=$plain"
  [ "$rc" -ne 0 ] || grep -q "\"uuid\": *\"$uuid0\"" "$out" ||
    fail_check "the JSON does not name $uuid0 for $prefix0"
  run_cmd --any-exit env CUDA_VISIBLE_DEVICES=NoDevFiles "$shared/nvidia-gpu-discovery.sh" 1 \
    --coordination-file "$plain"
  if [ "$rc" -eq 0 ]; then
    fail_check "CUDA_VISIBLE_DEVICES=NoDevFiles was not refused"
  elif [ "$timed_out" = false ] && ! grep -q 'CUDA_VISIBLE_DEVICES=NoDevFiles' "$err"; then
    fail_check "the refusal does not name CUDA_VISIBLE_DEVICES=NoDevFiles"
  fi
  # shellcheck disable=SC2016 # for the child to expand
  run_cmd env CUDA_VISIBLE_DEVICES="$mask" "$flink_gpu" exec -n "$amount" \
    --coordination-file "$work/exec-coordination" -- \
    sh -c 'echo "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER"'
  visible=$(cat "$out")
  [ "$rc" -ne 0 ] || [ "$visible" = "$mask PCI_BUS_ID" ] ||
    fail_check "exec gave '$visible', not '$mask PCI_BUS_ID'"
}

check_topology() {
  run_cmd "$flink_gpu" topology
  if [ -n "$smi" ]; then
    run_cmd "$smi" topo -m
  else
    fail_check "$smi_missing: no nvidia-smi topo -m to compare with"
  fi
  run_cmd "$flink_gpu" topology --format json
  # What placement hands out (nothing is held: plain mode), against Flink's first-free rule.
  amounts=1
  [ "${gpu_count:-0}" -lt 2 ] || amounts="$amounts 2"
  [ $((${gpu_count:-0} / 2)) -le 2 ] || amounts="$amounts $((gpu_count / 2))"
  for amount in $amounts; do
    run_cmd --shown "$plugin/nvidia-gpu-discovery" "$amount" --coordination-file "$plain"
    run_cmd --shown "$plugin/nvidia-gpu-discovery" "$amount" --placement index \
      --coordination-file "$plain"
  done
}

check_health() {
  if [ -n "$gpu_count" ] && [ "$gpu_count" -gt 0 ]; then
    run_cmd "$flink_gpu" check --expect "$gpu_count" --coordination-file "$coordination"
    run_cmd "$flink_gpu" check --expect "$gpu_count" --coordination-file "$coordination" \
      --format json
  else
    note "no GPU count from nvidia-smi: check runs without --expect"
    run_cmd "$flink_gpu" check --coordination-file "$coordination"
    run_cmd "$flink_gpu" check --coordination-file "$coordination" --format json
  fi
}

check_status() {
  run_cmd "$flink_gpu" status --coordination-file "$coordination"
  run_cmd "$flink_gpu" status --coordination-file "$coordination" --format json
  run_cmd "$flink_gpu" status --coordination-file "$coordination" --format prometheus
  # What the driver says, beside those verdicts: the processes it lists, and what nvidia-smi -q
  # says of each GPU's recovery action, NVLink fabric and compute mode (where nvidia-smi gave
  # GPU 0's UUID in the host check: one that did not answer then is not asked again).
  if [ -n "$smi" ] && [ -n "$uuid0" ]; then
    run_cmd --shown "$smi" --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv
    # shellcheck disable=SC2016 # for the child to expand
    run_cmd --shown sh -c '"$0" -q | grep -i -E "^GPU |UUID|Recovery|Fabric|State|Status|Clique|Cluster|Compute Mode|Health"' "$smi"
  fi
  foreign_process_look
}

# A CUDA process on GPU 0 that no record names, started here: where the driver lists it, status
# must show GPU 0 busy with it (or say once that it cannot judge, in a pid namespace of its own),
# and exec of every GPU must be refused for it. Without libcuda.so.1, nvidia-smi, or GPU 0's UUID,
# a note says why it is not tried.
foreign_process_look() {
  if [ -z "$uuid0" ] || [ -z "$smi" ]; then
    note "no CUDA process of our own is tried: no nvidia-smi or no UUID of GPU 0"
    return
  fi
  foreign_dir=$work/foreign
  foreign_coordination=$foreign_dir/coordination
  mkdir -p "$foreign_dir"
  hold=$(($(time_left) - 2))
  [ "$hold" -ge 1 ] || hold=1
  CUDA_VISIBLE_DEVICES=$uuid0 timeout -k "$kill_grace" "$hold" "$client" 256 "$hold" \
    </dev/null >"$foreign_dir/client.out" 2>"$foreign_dir/client.err" &
  foreign_pid=$!
  waited=0
  while [ "$waited" -lt 15 ] && [ "$(time_left)" -gt 5 ] &&
    ! grep -q allocated "$foreign_dir/client.out" && kill -0 "$foreign_pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
  done
  client_pid=$(sed -n 's/^client \([0-9]*\): allocated.*/\1/p' "$foreign_dir/client.out")
  if [ -z "$client_pid" ]; then
    note "no CUDA process of our own is tried: the client did not allocate: $(cat "$foreign_dir/client.err" "$foreign_dir/client.out" | head -n 1)"
    end_foreign
    return
  fi
  run_cmd --shown "$smi" --query-compute-apps=pid --format=csv,noheader
  if ! tr -d ' \r' <"$out" | grep -q "^$client_pid\$"; then
    note "nvidia-smi does not list our CUDA process $client_pid (a pid namespace of its own?): not judged"
    end_foreign
    return
  fi
  run_cmd "$flink_gpu" status --coordination-file "$foreign_coordination" --gpu 0 --format json
  if grep -q "pid namespace of its own" "$err"; then
    note "flink-gpu cannot see the host's process ids here: $(grep 'pid namespace' "$err" | head -n 1)"
    end_foreign
    return
  fi
  grep -q "\"state\":\"busy\"" "$out" && grep -q "\"pid\":$client_pid[,}]" "$out" ||
    fail_check "flink-gpu status does not show GPU 0 busy with process $client_pid, which the driver lists and no record names"
  if [ -n "$gpu_count" ] && [ "$gpu_count" -gt 0 ]; then
    run_cmd --any-exit "$flink_gpu" exec -n "$gpu_count" \
      --coordination-file "$foreign_coordination" -- true
    [ "$timed_out" = true ] || { [ "$rc" -ne 0 ] && grep -q busy "$err"; } ||
      fail_check "exec of every GPU was not refused while process $client_pid used GPU 0 (exit $rc)"
  fi
  end_foreign
}

end_foreign() {
  [ -n "${foreign_pid:-}" ] || return 0
  kill -TERM "$foreign_pid" 2>/dev/null
  wait "$foreign_pid" 2>/dev/null
  foreign_pid=
}

check_watch() {
  [ "$watch_asked" -eq "$watch_seconds" ] ||
    note "GPU_CHECK_WATCH_SECONDS=$watch_asked is more than half the check's limit of $step_timeout s: watch runs $watch_seconds s"
  run_cmd --any-exit --runs-for "$watch_seconds" "$flink_gpu" watch \
    --coordination-file "$coordination"
  # runs_for: what run_cmd gave it, at most what was left of the check.
  if [ "$timed_out" = true ]; then
    return
  elif [ "$elapsed_ms" -lt $((runs_for * 1000 - 500)) ]; then
    fail_check "watch ended by itself after $(seconds_of "$elapsed_ms") s (exit $rc), before SIGTERM"
  elif [ "$rc" -ne 0 ]; then
    fail_check "watch exited with $rc on SIGTERM, not 0"
  fi
  # shellcheck disable=SC2016 # for the child to expand
  run_cmd --shown sh -c 'ls -l -- "$1"*' sh "$coordination"
}

check_mps() {
  if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    skip_check "nvidia-cuda-mps-control is not on PATH"
    return
  fi
  need_count || return
  if [ -z "$uuid0" ]; then
    fail_check "nvidia-smi gave no UUID for GPU 0"
    return
  fi
  mps_dir=$work/mps
  mps_coordination=$mps_dir/coordination
  pipe=$mps_dir/pipe
  mkdir -p "$pipe" "$mps_dir/log"
  run_cmd "$flink_gpu" share --gpu 0 --replicas 2 --mps "$pipe" \
    --coordination-file "$mps_coordination"
  [ "$rc" -eq 0 ] || return
  share_mib=$(sed -n "s/.*${tab}memory=\\([0-9]*\\).*/\\1/p" "$mps_coordination.sharing" | head -n 1)
  note "each share: ${share_mib:-?} MiB"
  run_cmd env CUDA_MPS_PIPE_DIRECTORY="$pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log" \
    CUDA_VISIBLE_DEVICES="$uuid0" nvidia-cuda-mps-control -d
  [ "$rc" -eq 0 ] || return
  mps_pipe=$pipe
  small=$((${share_mib:-2048} / 2))
  # Two clients at once, in the background, each under timeout (its pid in client<n>.pid, for
  # stop_running and the end), recorded when they have ended. They hold their memory until
  # they are sent SIGTERM, once the looks beside them are done, or until their time is up.
  client_left=$(time_left)
  hold=$((client_left - 1))
  [ "$hold" -ge 1 ] || hold=1
  smi_limit_for "$client_left"
  clients=
  for n in 1 2; do
    (
      client_started=$(now_ms)
      timeout -k "$kill_grace" "$client_left" "$flink_gpu" exec -n 1 --share \
        --coordination-file "$mps_coordination" -- "$client" "$small" "$hold" \
        </dev/null >"$mps_dir/client$n.out" 2>"$mps_dir/client$n.err" &
      echo "$!" >"$mps_dir/client$n.pid"
      wait "$!"
      echo "$? $(($(now_ms) - client_started))" >"$mps_dir/client$n.status"
    ) &
    clients="$clients $!"
  done
  # Until both hold their memory, one has ended, 30 s have gone, or only the 5 s the looks and
  # the last client need are left of the check.
  both_held=false
  waited=0
  while [ "$waited" -lt 30 ] && [ "$(time_left)" -gt 5 ]; do
    if [ "$(cat "$mps_dir/client1.out" "$mps_dir/client2.out" 2>/dev/null | grep -c allocated)" -ge 2 ]; then
      both_held=true
      break
    fi
    [ ! -f "$mps_dir/client1.status" ] && [ ! -f "$mps_dir/client2.status" ] || break
    sleep 1
    waited=$((waited + 1))
  done
  run_cmd --shown "$smi"
  # shellcheck disable=SC2016 # for the child to expand
  run_cmd --shown env CUDA_MPS_PIPE_DIRECTORY="$pipe" \
    sh -c 'echo get_server_list | nvidia-cuda-mps-control'
  run_cmd --shown "$flink_gpu" status --coordination-file "$mps_coordination"
  run_cmd --any-exit "$flink_gpu" exec -n 1 --share --coordination-file "$mps_coordination" -- true
  [ "$timed_out" = true ] || grep -q 'not enough free GPU shares' "$err" ||
    fail_check "a third exec -n 1 --share was not refused while two clients held both shares"
  end_clients
  for n in 1 2; do
    read -r client_rc client_ms <"$mps_dir/client$n.status" || client_rc=255 client_ms=0
    client_timed_out=false
    [ "$client_rc" -ne 124 ] && [ "$client_rc" -ne 137 ] || client_timed_out=true
    record by-the-check "$client_rc" "$client_ms" "$client_timed_out" "$mps_dir/client$n.out" \
      "$mps_dir/client$n.err" "$flink_gpu" exec -n 1 --share \
      --coordination-file "$mps_coordination" -- "$client" "$small" "$hold"
    if [ "$client_timed_out" = true ]; then
      timeout_check "MPS client $n did not end within $client_left s"
    elif [ "$client_rc" -ne 0 ]; then
      fail_check "MPS client $n exited with $client_rc: $(cat "$mps_dir/client$n.err" "$mps_dir/client$n.out" | head -n 1)"
    fi
  done
  [ "$both_held" = true ] ||
    fail_check "two MPS clients did not both hold ${small} MiB at once"
  over=$((${share_mib:-2048} + 1024))
  run_cmd --any-exit "$flink_gpu" exec -n 1 --share --coordination-file "$mps_coordination" -- \
    "$client" "$over" 0
  [ "$timed_out" = true ] || [ "$rc" -eq 3 ] ||
    fail_check "a client asking $over MiB of a ${share_mib:-?} MiB share got exit $rc, not 3 (an allocation that fails)"
  # shellcheck disable=SC2016 # for the child to expand
  run_cmd --shown env CUDA_MPS_PIPE_DIRECTORY="$pipe" sh -c 'echo quit | nvidia-cuda-mps-control'
  mps_pipe=
}

# The MPS clients' timeouts get SIGTERM, which they pass on to the clients; then their
# subshells are waited for (the timeouts bound them).
end_clients() {
  [ -n "${clients:-}" ] || return 0
  # shellcheck disable=SC2046 # pids
  kill -TERM $(cat "$work"/mps/client*.pid 2>/dev/null) 2>/dev/null
  # shellcheck disable=SC2086 # pids
  wait $clients
  clients=
}

# The summary and the JSON twin: at the end, or when a signal ends the run early (then the check
# under way is left out, and the run does not pass).
finish_report() {
  [ -z "${report_finished:-}" ] || return 0
  report_finished=1
  finished_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  clock
  run_ms=$((clock_ms - run_started_ms))
  ok=true
  [ $((count_fail + count_timeout)) -eq 0 ] && [ -z "$interrupted" ] || ok=false
  if [ "$ok" = true ]; then result=PASSED; else result=FAILED; fi
  [ -z "$interrupted" ] || result="INTERRUPTED by $interrupted, during $check_id"
  result_line="result: $result: $count_pass passed, $count_fail failed, $count_timeout timed out, $count_skipped skipped, in $(seconds_of "$run_ms") s"
  {
    echo ""
    echo "== summary"
    cat "$work/summary.txt"
    echo "$result_line"
    echo "finished: $finished_utc"
  } >>"$report"
  say "$result_line"

  if [ "$mode" = bundle ]; then
    manifest=$(json_file "$bundle/MANIFEST" 2>/dev/null) || manifest=null
    where="\"bundle\": $(json_string "$bundle"), \"build_dir\": null, \"manifest\": $manifest"
  else
    where="\"bundle\": null, \"build_dir\": $(json_string "$build_dir"), \"manifest\": null"
  fi
  if [ -n "$stand_in_nvml$stand_in_host$stand_in_smi" ]; then
    stand_ins="{\"nvml\": $(json_string "$stand_in_nvml"), \"host\": $(json_string "$stand_in_host"), \"nvidia_smi\": $(json_string "$stand_in_smi")}"
  else
    stand_ins=null
  fi
  {
    printf '{"report": "flink-gpu gpu-machine-check", "format": 1, "mode": "%s", %s,\n' "$mode" "$where"
    printf ' "started": "%s", "finished": "%s", "duration_ms": %d,\n' "$started_utc" "$finished_utc" "$run_ms"
    printf ' "host": %s, "user": %s, "stand_ins": %s,\n' "$(json_string "$(uname -a)")" \
      "$(json_string "$(id)")" "$stand_ins"
    printf ' "limits": {"check_s": %d, "total_s": %d, "watch_s": %d, "nvml_runs": %d},\n' \
      "$step_timeout" "$total_timeout" "$watch_seconds" "$runs"
    printf ' "checks": [\n'
    cat "$work/checks.json"
    printf '],\n "summary": {"pass": %d, "fail": %d, "timeout": %d, "skipped": %d},\n' \
      "$count_pass" "$count_fail" "$count_timeout" "$count_skipped"
    if [ -n "$interrupted" ]; then
      printf ' "interrupted": "%s", "ok": %s}\n' "$interrupted" "$ok"
    else
      printf ' "interrupted": null, "ok": %s}\n' "$ok"
    fi
  } >"$json_report"
}

# --- the run ------------------------------------------------------------------------------------

{
  echo "flink-gpu GPU host check ($program_name), format 1"
  echo "started:  $started_utc"
  if [ "$mode" = bundle ]; then
    echo "mode:     bundle $bundle"
  else
    echo "mode:     full, build folder $build_dir"
  fi
  echo "host:     $(uname -a)"
  echo "user:     $(id)"
  if [ -n "$stand_in_nvml$stand_in_host$stand_in_smi" ]; then
    echo "STAND-INS (not a real host): nvml=${stand_in_nvml:-none} host=${stand_in_host:-none} nvidia-smi=${stand_in_smi:-none}"
  fi
  echo "limits:   ${step_timeout} s a check, ${total_timeout} s in all; watch ${watch_seconds} s; ${runs} timed runs"
  echo "reading:  each command is '\$ command', its exit status and time, stdout as '  | ', stderr"
  echo "          as '  ! '; each check ends in '-> verdict'; the JSON twin is $json_report"
} >"$report"
say "$program_name: report in $report (and .json)"

# The command under way gets the signal, which timeout passes on to its process group.
stop_running() {
  [ -z "$running_pid" ] || kill -TERM "$running_pid" 2>/dev/null
  end_clients
  end_foreign
}

# A signal ends the run with what it has: the report of the checks done (once the command under
# way has ended: timeout bounds it).
interrupted=
check_id=start
for signal in INT TERM HUP; do
  # shellcheck disable=SC2064 # the signal's name now
  trap "interrupted=SIG$signal; stop_running; finish_report; exit 1" "$signal"
done

no_programs=
if [ "$mode" = full ]; then
  run_check build "configure and build $build_dir" check_build "$build_timeout"
  [ "$check_verdict" = pass ] || no_programs="the build failed"
  run_check tests "ctest, every test" check_tests "$build_timeout"
fi
clock
total_deadline=$((clock_s + total_timeout))
run_check host "the host: nvidia-smi, the driver, libnvidia-ml" check_host
run_check links "the programs need glibc alone" check_links
run_check compare "NVML against nvidia-smi (tools/nvml-vs-nvidia-smi)" check_compare
run_check discovery "the discovery as Flink runs it: nvidia-gpu-discovery.sh 1" check_discovery
run_check coordination "coordination mode: two owners, two GPUs" check_coordination
run_check all-gpus "every GPU as $(id -un): none left out, no warning" check_all_gpus
run_check nobody "every GPU as nobody" check_nobody
run_check mig "MIG instances as units (--mig)" check_mig
run_check mask "an inherited CUDA_VISIBLE_DEVICES" check_mask
run_check topology "flink-gpu topology next to nvidia-smi topo -m; placement" check_topology
run_check check "flink-gpu check, the node health check" check_health
run_check status "flink-gpu status" check_status
run_check watch "flink-gpu watch for $watch_seconds s, then SIGTERM" check_watch
run_check mps "sharing under MPS: two exec --share clients" check_mps

finish_report
[ "$ok" = true ]
