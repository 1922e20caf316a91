#!/usr/bin/env bash
# GPU check: build Conveyor against a CUDA PyTorch's bundled libtorch, run the test suite, and
# benchmark the model on cpu and cuda:0. Prints a short table at the end.
#
#   scripts/gpu-check.sh --fetch-debs DIR   on a Debian 12 machine with apt and network: download
#                                           the .deb files of every other dependency into DIR
#   scripts/gpu-check.sh [--debs DIR] [--build DIR] [--jobs N]
#                                           on the GPU machine (no network needed): dependencies
#                                           missing there are unpacked from DIR with `dpkg -x`
#                                           into DIR/prefix (nothing is installed system-wide)
#
# Needs on the GPU machine: an NVIDIA GPU (nvidia-smi), python3 with a CUDA build of torch built
# with the C++11 ABI (torch._C._GLIBCXX_USE_CXX11_ABI, as the Debian libraries use it), g++ >= 12
# and cmake >= 3.18 (ninja optional), and a glibc no older than Debian 12's (2.36) when the .deb
# libraries are used. Conveyor targets the libtorch 1.13 API; a newer PyTorch may need fixes.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)

# Every dependency but libtorch (PyTorch brings its own), with the runtime libraries behind it.
debs=(libcaf-dev libcaf-core0.17 libcaf-io0.17 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libboost1.74-dev nlohmann-json3-dev libtomlplusplus-dev libtomlplusplus3 libcli11-dev
  libsentencepiece-dev libsentencepiece0 libprotobuf-lite32 libgtest-dev libbenchmark-dev
  libbenchmark1debian)

deb_dir=""
build="build-gpu"
jobs=$(nproc)
fetch=""
while [ $# -gt 0 ]; do
  case "$1" in
    --fetch-debs) fetch=$2; shift 2 ;;
    --debs) deb_dir=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { echo "gpu-check: $*" >&2; }
die() { log "$*"; exit 1; }

if [ -n "$fetch" ]; then
  mkdir -p "$fetch"
  (cd "$fetch" && apt-get download "${debs[@]}")
  log "$(find "$fetch" -name '*.deb' | wc -l) .deb files in $fetch; copy them to the GPU machine"
  exit 0
fi

# -- the machine --------------------------------------------------------------------------------
command -v nvidia-smi >/dev/null || die "no nvidia-smi: this machine has no NVIDIA driver"
gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)
[ -n "$gpu" ] || die "nvidia-smi lists no GPU"
log "GPU: $gpu"
command -v python3 >/dev/null || die "no python3"
read -r torch_version torch_cuda torch_abi torch_prefix < <(python3 - <<'EOF'
import torch
print(torch.__version__, torch.cuda.is_available(), torch._C._GLIBCXX_USE_CXX11_ABI,
      torch.utils.cmake_prefix_path)
EOF
) || die "python3 cannot import torch"
log "PyTorch $torch_version (CUDA available: $torch_cuda, C++11 ABI: $torch_abi) at $torch_prefix"
[ "$torch_cuda" = True ] || die "this PyTorch has no usable CUDA (torch.cuda.is_available() is False)"
[ "$torch_abi" = True ] || die "this PyTorch uses the pre-C++11 ABI; the Debian libraries (CAF, \
spdlog, ...) use the C++11 one and would not link. Use a cxx11-ABI build of PyTorch or libtorch."
command -v cmake >/dev/null || die "no cmake"
command -v g++ >/dev/null || die "no g++"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

# -- dependencies: the system's, else unpacked .deb files ---------------------------------------
prefix_path="$torch_prefix"
missing=()
for header in caf/all.hpp spdlog/spdlog.h fmt/core.h boost/version.hpp nlohmann/json.hpp \
  toml++/toml.h CLI/CLI.hpp sentencepiece_processor.h gtest/gtest.h benchmark/benchmark.h; do
  [ -e "/usr/include/$header" ] || missing+=("$header")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "missing here: ${missing[*]}"
  [ -n "$deb_dir" ] || die "pass --debs DIR (made with --fetch-debs on a Debian 12 machine)"
  prefix="$(cd "$deb_dir" && pwd)/prefix"
  mkdir -p "$prefix"
  for deb in "$deb_dir"/*.deb; do
    log "unpacking $(basename "$deb")"
    dpkg -x "$deb" "$prefix"
  done
  # Debian's -dev symlinks are absolute (/usr/lib/...); point them into the prefix.
  find "$prefix" -type l | while read -r link; do
    target=$(readlink "$link")
    case "$target" in /usr/*) ln -sfn "$prefix$target" "$link" ;; esac
  done
  prefix_path="$torch_prefix;$prefix/usr"
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
fi

# -- build and test -----------------------------------------------------------------------------
log "building in $build"
cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix_path" -DCONVEYOR_TESTS=ON -DCONVEYOR_BENCHMARKS=ON \
  -DCONVEYOR_CUDA_GRAPHS=ON 2>&1 | tee "$build.cmake.log" >&2
grep -q "CUDA ON" "$build.cmake.log" || die "CMake did not find CUDA in libtorch (see $build.cmake.log)"
cmake --build "$build" -j "$jobs" >&2
log "running the test suite"
tests_status=passed
ctest --test-dir "$build" --output-on-failure -j 2 --timeout 600 >"$build.ctest.log" 2>&1 ||
  tests_status=failed
tests_line=$(grep -E "tests passed|tests failed" "$build.ctest.log" | tail -1)
log "$tests_line"

# -- the model on cpu and cuda:0 ----------------------------------------------------------------
bench="$build/benchmarks/conveyor_model_bench"
for device in cpu cuda:0; do
  log "model benchmark on $device"
  CONVEYOR_DEVICE=$device "$bench" --benchmark_format=json --benchmark_min_time=0.2 \
    >"$build.bench-${device/:/}.json" 2>"$build.bench-${device/:/}.log" ||
    log "the model benchmark failed on $device (see $build.bench-${device/:/}.log)"
done
# A served request on the GPU: the pipeline end to end with one cuda:0 executor.
"$build/apps/conveyor" serve --port 0 --set executors=cuda:0 --set metrics.interval_s=0 \
  2>"$build.serve.log" &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null || true' EXIT
smoke="no answer (see $build.serve.log)"
for _ in $(seq 1 300); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$build.serve.log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && break
  kill -0 $serve_pid 2>/dev/null || break
  sleep 0.1
done
if [ -n "${port:-}" ]; then
  smoke=$(python3 - "$port" <<'EOF2' 2>&1 || true
import json, sys, urllib.request
body = json.dumps({"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/completions", body,
                             {"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["text"].strip())
EOF2
)
fi
kill $serve_pid 2>/dev/null || true

python3 - "$build" "$gpu" "$torch_version" "$tests_status" "$tests_line" "$smoke" <<'EOF'
import json, sys
build, gpu, torch_version, status, tests_line, smoke = sys.argv[1:7]
def load(dev):
    try:
        with open(f"{build}.bench-{dev}.json") as f:
            return {b["name"]: (b["real_time"], b.get("time_unit", "ns"))
                    for b in json.load(f)["benchmarks"]}
    except Exception:
        return {}
cpu, gpu_times = load("cpu"), load("cuda0")
print(f"\nConveyor GPU check: {gpu}, PyTorch {torch_version}")
print(f"tests: {status} ({tests_line.strip()})")
print(f"served on cuda:0: {smoke[:80]}")
print(f"{'benchmark (real time)':40} {'cpu':>14} {'cuda:0':>14} {'speed-up':>9}")
for name in sorted(set(cpu) | set(gpu_times)):
    c, g = cpu.get(name), gpu_times.get(name)
    up = f"{c[0] / g[0]:8.1f}x" if c and g and c[1] == g[1] else "       -"
    fc = f"{c[0]:11.1f} {c[1]:>2}" if c else f"{'-':>14}"
    fg = f"{g[0]:11.1f} {g[1]:>2}" if g else f"{'-':>14}"
    print(f"{name:40} {fc} {fg} {up}")
EOF
[ "$tests_status" = passed ]
