#!/usr/bin/env bash
# The GPU check: one prepared script for a borrowed NVIDIA machine (an H200 with 16 cores,
# python3 with torch 2.11.0+cu130, CMake, ninja and nvcc, but no Debian -dev packages and no
# network), made to finish within a 10-minute run.
#
#   scripts/gpu-check.sh --prepare   HERE, on a Debian 12 machine with apt: downloads the .deb
#                                    files of every dependency but torch into .gpu-check/debs
#                                    (git-ignored, about 34 MiB) to carry to the GPU machine,
#                                    and fetches xgrammar's source into third_party/xgrammar
#                                    (git-ignored, 2 MiB; carried too)
#   scripts/gpu-check.sh [--skip-bench] [--jobs N]
#                                    THERE: unpacks the .deb files with dpkg -x (nothing is
#                                    installed system-wide), builds against python3's torch with
#                                    CUDA and CUDA graphs on (build-gpu/), runs the GPU tests and
#                                    the rest of the suite, serves requests on cuda:0 (the
#                                    expected story; a prompt found in the prefix cache; regex-
#                                    constrained answers), runs
#                                    conveyor_device_bench and prints the table of
#                                    docs/benchmarks.md. Logs and results go to $OUT when set (the
#                                    device tool's folder), else .gpu-check/out.
#
# With the device tool, from the repository root here:
#   scripts/gpu-check.sh --prepare
#   run(command="scripts/gpu-check.sh", carry=[".gpu-check/debs", "third_party/xgrammar"],
#       timeout_s=600)
# Exit status: 0 when the build, the GPU tests and the served request passed.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
work=$src/.gpu-check
out=${OUT:-$work/out}
build=$src/build-gpu
jobs=$(nproc)
bench=1

# Every dependency but libtorch (PyTorch brings its own), with the runtime libraries behind them.
debs=(libcaf-dev libcaf-core0.17 libcaf-io0.17 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libboost1.74-dev nlohmann-json3-dev libtomlplusplus-dev libtomlplusplus3 libcli11-dev
  libsentencepiece-dev libsentencepiece0 libprotobuf-lite32 libgtest-dev libbenchmark-dev
  libbenchmark1debian libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  libicu-dev libicu72 libutfcpp-dev)

log() { echo "gpu-check: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

prepare=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) prepare=1; shift ;;
    --skip-bench) bench=0; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    -h | --help) sed -n 2,21p "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

if [ $prepare = 1 ]; then
  command -v apt-get >/dev/null || die "--prepare needs apt-get (a Debian 12 machine)"
  rm -rf "$work/debs"
  mkdir -p "$work/debs"
  (cd "$work/debs" && apt-get download "${debs[@]}" 2>&1 | grep -v '^W: Download is performed' >&2)
  count=$(find "$work/debs" -name '*.deb' | wc -l)
  [ "$count" = ${#debs[@]} ] || die "downloaded $count of ${#debs[@]} .deb files"
  log "$count .deb files, $(du -sh "$work/debs" | cut -f1) in $work/debs: carry .gpu-check/debs"
  scripts/fetch-xgrammar.sh
  log "xgrammar's source in third_party/xgrammar: carry it too"
  exit 0
fi

mkdir -p "$out"
started=$(date +%s)
elapsed() { echo "$(($(date +%s) - started)) s"; }

# -- the machine --------------------------------------------------------------------------------
command -v nvidia-smi >/dev/null || die "no nvidia-smi: this machine has no NVIDIA driver"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
[ -n "$gpu" ] || die "nvidia-smi lists no GPU"
log "GPU: $gpu"
for tool in python3 cmake g++ dpkg; do command -v $tool >/dev/null || die "no $tool"; done
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || die "no nvcc (neither on the PATH nor /usr/local/cuda/bin/nvcc)"
cuda_home=$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)
read -r torch_version torch_cuda torch_abi torch_dir < <(python3 - <<'EOF'
import os, torch
print(torch.__version__, torch.cuda.is_available(), torch._C._GLIBCXX_USE_CXX11_ABI,
      os.path.dirname(torch.__file__))
EOF
) || die "python3 cannot import torch"
log "PyTorch $torch_version (CUDA available: $torch_cuda, C++11 ABI: $torch_abi) in $torch_dir"
case "$torch_version" in 2.*) ;; *) die "PyTorch $torch_version: the CUDA build needs 2.x" ;; esac
[ "$torch_cuda" = True ] || die "this PyTorch sees no GPU (torch.cuda.is_available() is False)"
[ "$torch_abi" = True ] || die "this PyTorch uses the pre-C++11 ABI; the Debian libraries (CAF, \
spdlog, ...) use the C++11 one and cannot be linked with it"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

# -- dependencies: the system's, else the carried .deb files ------------------------------------
prefix_path="$torch_dir"
missing=()
for header in caf/all.hpp spdlog/spdlog.h fmt/core.h boost/version.hpp nlohmann/json.hpp \
  toml++/toml.h CLI/CLI.hpp sentencepiece_processor.h gtest/gtest.h benchmark/benchmark.h \
  utf8cpp/utf8.h unicode/unorm2.h pcre2.h; do
  [ -e "/usr/include/$header" ] || missing+=("$header")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "not on this machine: ${missing[*]}; unpacking .gpu-check/debs"
  ls "$work"/debs/*.deb >/dev/null 2>&1 || die "no .deb files in $work/debs: run \
scripts/gpu-check.sh --prepare on a Debian 12 machine and carry .gpu-check/debs"
  # Outside the checkout: the install test checks that no path of the checkout is in the binary,
  # and these headers' file names would be.
  prefix=${TMPDIR:-/tmp}/conveyor-gpu-check-prefix
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
  # Debian's -dev symlinks are absolute (/usr/lib/...): point them into the prefix.
  find "$prefix" -type l | while read -r link; do
    target=$(readlink "$link")
    case "$target" in /usr/*) ln -sfn "$prefix$target" "$link" ;; esac
  done
  prefix_path="$torch_dir;$prefix/usr"
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# -- build ----------------------------------------------------------------------------------------
log "configuring and building $build with $jobs jobs ($(elapsed))"
# CAF 0.17.6's headers use uint64_t without <cstdint>, which newer GCCs (the GPU machine's) no
# longer bring in through other headers: include it first in every file.
cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="-include cstdint" \
  -DCMAKE_PREFIX_PATH="$prefix_path" -DCONVEYOR_TESTS=ON -DCONVEYOR_BENCHMARKS=ON \
  -DCONVEYOR_REQUIRE_CUDA=ON -DCONVEYOR_CUDA_GRAPHS=ON -DCONVEYOR_WERROR=OFF \
  -DCUDAToolkit_ROOT="$cuda_home" \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DTORCH_CUDA_ARCH_LIST=9.0 >"$out/cmake.log" 2>&1 ||
  { tail -30 "$out/cmake.log" >&2; die "cmake failed (above; $out/cmake.log)"; }
cmake --build "$build" -j "$jobs" >"$out/build.log" 2>&1 ||
  { grep -E "error|Error" "$out/build.log" | head -30 >&2; die "the build failed ($out/build.log)"; }
log "built ($(elapsed))"

# -- the GPU tests, then the rest of the suite ---------------------------------------------------
# The GPU tests: the expected output on cuda:0 alone and batched, with and without graphs; a
# graph replay equals the eager step; bf16 within its tolerance; a prompt from shared KV-cache
# blocks agreeing with one computed whole, with and without graphs; two executors on one GPU;
# device discovery naming the device.
gpu_filter='llama_gpu\.|gpus_test\.two_executors_on_one_real_gpu|devices\.the_cuda_build_on_a_gpu'
gpu_status=passed
ctest --test-dir "$build" -R "$gpu_filter" --output-on-failure --timeout 300 \
  >"$out/ctest-gpu.log" 2>&1 || gpu_status=failed
gpu_line=$(grep -E "tests passed|tests failed" "$out/ctest-gpu.log" | tail -1 || true)
skipped=$(grep -c "(Skipped)" "$out/ctest-gpu.log" || true)
[ "$skipped" = 0 ] || { gpu_status=failed; gpu_line="$gpu_line; $skipped skipped (no GPU seen?)"; }
log "GPU tests: $gpu_status: $gpu_line ($(elapsed))"
# The whole suite on this machine but the tests that run tools/venv's python (the openai package,
# the tokenizers library), which has no network to be made here.
suite_status=passed
ctest --test-dir "$build" -E 'openai_python|tokenizers_library' --output-on-failure -j 8 \
  --timeout 300 \
  >"$out/ctest-all.log" 2>&1 || suite_status=failed
suite_line=$(grep -E "tests passed|tests failed" "$out/ctest-all.log" | tail -1 || true)
log "whole suite: $suite_status: $suite_line ($(elapsed))"

# -- one request served on cuda:0 ----------------------------------------------------------------
"$build/apps/conveyor" serve --port 0 --set executors=cuda:0 --set metrics.interval_s=0 \
  >"$out/serve.log" 2>&1 &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 600); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$out/serve.log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && break
  kill -0 $serve_pid 2>/dev/null || break
  sleep 0.1
done
served=failed
if [ -n "$port" ]; then
  python3 - "$port" >"$out/served.txt" 2>&1 <<'EOF' && served=passed
import json, sys, urllib.request
body = json.dumps({"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/completions", body,
                             {"Content-Type": "application/json"})
text = json.load(urllib.request.urlopen(req, timeout=120))["choices"][0]["text"]
expected = open("models/stories260K/expected/greedy_once_upon_a_time_n64.txt").read()
expected = expected[len("Once upon a time"):].rstrip("\n")
print(text)
# The prefix cache on the GPU: a long prompt sent twice finds its blocks the second time, and
# gives the same greedy text.
def complete(prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": 32, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=120))
long_prompt = expected[:400]
first, second = complete(long_prompt), complete(long_prompt)
cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
print(f"prefix cache: {second['usage']['prompt_tokens']} prompt tokens, {cached} cached "
      f"the second time; same text: {first['choices'][0]['text'] == second['choices'][0]['text']}")
# Structured outputs on the GPU executor, whose masks are computed while the model runs: a regex
# at temperature 1 over several seeds, every answer matching it and ending with "stop".
import re
pattern = r"(Tom|Lily) (is|was) [0-9]{1,2} years old\."
formatted = []
for seed in range(8):
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 40, "temperature": 1,
                       "seed": seed, "structured_outputs": {"regex": pattern}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    choice = json.load(urllib.request.urlopen(req, timeout=120))["choices"][0]
    formatted.append(bool(re.fullmatch(pattern, choice["text"])) and
                     choice["finish_reason"] == "stop")
print(f"structured outputs: {sum(formatted)} of {len(formatted)} answers match the regex")
sys.exit(0 if text == expected and cached > 0 and all(formatted) and
         first["choices"][0]["text"] == second["choices"][0]["text"] else 1)
EOF
fi
kill $serve_pid 2>/dev/null || true
log "served on cuda:0: $served ($(elapsed))"

# -- the decode step table ---------------------------------------------------------------------
if [ $bench = 1 ]; then
  log "conveyor_device_bench on cuda:0"
  CONVEYOR_DEVICE=cuda:0 "$build/benchmarks/conveyor_device_bench" --benchmark_format=json \
    --benchmark_min_time=0.3 >"$out/device-bench.json" 2>"$out/device-bench.log" ||
    log "conveyor_device_bench failed (see $out/device-bench.log)"
  log "benchmarked ($(elapsed))"
fi

python3 - "$out" "$gpu" "$torch_version" <<'EOF' | tee "$out/table.md"
import json, os, sys
out, gpu, torch_version = sys.argv[1:4]
print(f"GPU: {gpu}; PyTorch {torch_version}\n")
try:
    runs = json.load(open(os.path.join(out, "device-bench.json")))["benchmarks"]
except Exception as e:
    print(f"(no benchmark results: {e})")
    sys.exit(0)
print("| model | dtype | CUDA graphs | batch | decode step (ms) | tokens/s | device memory (MiB) |")
print("|---|---|---|---:|---:|---:|---:|")
for r in runs:
    if r.get("error_occurred"):
        print(f"| {r['name']} | error: {r.get('error_message')} | | | | | |")
        continue
    model, dtype, graphs = r["label"].split()
    batch = r["name"].split("batch:")[1].split("/")[0]
    step_ms = r["real_time"] * {"ms": 1, "us": 1e-3, "ns": 1e-6}[r["time_unit"]]
    print(f"| {model} | {dtype} | {'on' if graphs == 'graphs' else 'off'} | {batch} | "
          f"{step_ms:.3f} | {r['tokens/s']:.0f} | {r['device_MiB']:.0f} |")
EOF

log "GPU tests $gpu_status, whole suite $suite_status, served $served; $(elapsed) in all"
log "logs in $out"
[ "$gpu_status" = passed ] && [ "$served" = passed ]
