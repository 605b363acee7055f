#!/usr/bin/env bash
# One command for a GPU machine: configure and build the CUDA tests and bench/attention, run the
# GPU tests with SINKLAB_REQUIRE_GPU=1 (a missing or broken device fails them), then time the
# attention kernels (bench/attention --device cuda) and print its markdown tables.
#
#   scripts/gpu-check.sh [options] [-- bench/attention flags]
#
#   --build DIR    build folder, made or reused (default build-gpu in the source tree)
#   --deps DIR     a folder of the header-only dependencies (doctest, nlohmann-json, xsimd, Eigen;
#                  made on a Debian/Ubuntu machine by scripts/gpu-deps.sh DIR) for a machine that
#                  lacks them: its CMake package files and headers are used, not the system's
#   --log FILE     where everything printed also goes (default <build>/gpu-check.log)
#   --jobs N       parallel compile jobs (default: all cores, nproc)
#   --arch LIST    CMAKE_CUDA_ARCHITECTURES (default: the GPU's, from nvidia-smi; else 80;90)
#   --tests REGEX  which CTest entries run (default cuda: the GPU tests, test_cuda_mma, the
#                  test_cuda_attention* and the other emulator tests named test_cuda_*)
#   --python PATH  the Python whose torch gives bench/attention its PyTorch columns (default python3)
#   --no-tests     build, but skip the tests
#   --no-bench     skip bench/attention
#   --help         this text
#
# Flags after -- go to bench/attention (its --help lists them; e.g. -- --simt, -- --quick).
# The bench's numbers are also written to <build>/attention-cuda.json.
# Exit status: 0 all passed; 1 a step failed (the message says which; details in the log);
# 2 a bad flag; 3 no usable GPU (the tests failed for that reason and the bench could not run).
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$repo/build-gpu"
log=""
deps=""
jobs=""
arch=""
tests_regex="cuda"
python=""
run_tests=1
run_bench=1
bench_args=()

die_usage() {
  echo "gpu-check.sh: $*" >&2
  echo "gpu-check.sh: see scripts/gpu-check.sh --help" >&2
  exit 2
}
absolute() { [[ "$1" == /* ]] && echo "$1" || echo "$PWD/$1"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --help | -h) usage; exit 0 ;;
    --build | --deps | --log | --jobs | --arch | --tests | --python)
      [[ $# -ge 2 && -n "$2" ]] || die_usage "$1 needs a value"
      case "$1" in
        --build) build="$(absolute "$2")" ;;
        --deps) deps="$(absolute "$2")" ;;
        --log) log="$(absolute "$2")" ;;
        --jobs) jobs="$2" ;;
        --arch) arch="$2" ;;
        --tests) tests_regex="$2" ;;
        --python) python="$2" ;;
      esac
      shift 2 ;;
    --no-tests) run_tests=0; shift ;;
    --no-bench) run_bench=0; shift ;;
    --) shift; bench_args=("$@"); break ;;
    *) die_usage "unknown flag '$1'" ;;
  esac
done
[[ -z "$jobs" ]] && jobs="$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 4)"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die_usage "--jobs: expected a positive integer, got '$jobs'"
[[ -z "$log" ]] && log="$build/gpu-check.log"
if [[ -n "$deps" && ! -d "$deps" ]]; then
  die_usage "--deps: '$deps' is not a folder (make one with scripts/gpu-deps.sh DIR on a Debian/Ubuntu machine)"
fi

fail() {  # a step failed: the message, where the details are, exit 1
  echo
  echo "gpu-check: FAILED: $*"
  echo "gpu-check: the full log is $log"
  exit 1
}
step() { echo; echo "== $* ($(date -u +%H:%M:%S), ${SECONDS}s)"; }
# "3.31.6" >= "3.20"?
version_at_least() {
  local IFS=.
  local -a a=($1) b=($2)
  (( a[0] > b[0] || (a[0] == b[0] && a[1] >= b[1]) ))
}

main() {
  echo "gpu-check: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n) ($(uname -m)); source $repo; build $build; log $log"
  if git -C "$repo" rev-parse --short HEAD >/dev/null 2>&1; then
    echo "source: commit $(git -C "$repo" rev-parse --short HEAD), $(git -C "$repo" status --porcelain 2>/dev/null | wc -l | tr -d ' ') files changed or new"
  fi

  step "tools"
  command -v cmake >/dev/null 2>&1 || fail "cmake not found on PATH (CMake >= 3.20 is needed; 'pip install cmake' gives one)"
  local cmake_version
  cmake_version="$(cmake --version | sed -n '1s/[^0-9]*\([0-9][0-9.]*\).*/\1/p')"
  version_at_least "$cmake_version" 3.20 || fail "cmake $cmake_version is older than 3.20"
  echo "cmake $cmake_version ($(command -v cmake))"
  command -v ctest >/dev/null 2>&1 || fail "ctest not found next to cmake"

  local -a cuda_flags=()
  local nvcc
  nvcc="$(command -v nvcc 2>/dev/null || true)"
  if [[ -z "$nvcc" ]]; then
    local root
    for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
      if [[ -n "$root" && -x "$root/bin/nvcc" ]]; then
        nvcc="$root/bin/nvcc"
        cuda_flags=("-DCMAKE_CUDA_COMPILER=$nvcc" "-DCUDAToolkit_ROOT=$root")
        break
      fi
    done
  fi
  [[ -n "$nvcc" ]] || fail "nvcc not found: put the CUDA Toolkit's bin/ on PATH or set CUDA_HOME"
  echo "nvcc: $("$nvcc" --version | tail -n 1) ($nvcc)"
  local cxx="${CXX:-}"
  [[ -z "$cxx" ]] && cxx="$(command -v c++ 2>/dev/null || command -v g++ 2>/dev/null || true)"
  [[ -n "$cxx" ]] || fail "no C++ compiler found (c++ or g++ on PATH, or CXX); GCC >= 12 is needed"
  echo "host compiler: $("$cxx" --version | head -n 1) ($cxx)"

  local gpu_line=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    gpu_line="$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1)"
    echo "nvidia-smi: ${gpu_line:-no output}"
  else
    echo "nvidia-smi: not found"
  fi
  local arch_fallback=0
  if [[ -z "$arch" ]]; then
    arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | grep -E '^[0-9]+$' | sort -u | paste -sd';' - || true)"
    if [[ -n "$arch" ]]; then
      echo "CUDA architectures: $arch (the GPU's)"
    else
      arch="80;90"
      arch_fallback=1
      echo "CUDA architectures: $arch, the project's default (nvidia-smi reports no GPU; --arch sets them)"
    fi
  else
    echo "CUDA architectures: $arch (--arch)"
  fi
  local py="${python:-python3}"
  if command -v "$py" >/dev/null 2>&1; then
    echo "python: $("$py" -c 'import sys; print(sys.version.split()[0])' 2>&1);" \
      "torch: $("$py" -c 'import torch; print(torch.__version__, "(cuda available)" if torch.cuda.is_available() else "(no CUDA device)")' 2>/dev/null || echo "not importable: bench/attention runs without PyTorch's columns")"
  else
    echo "python: '$py' not found: bench/attention runs without PyTorch's columns"
  fi

  local -a dep_flags=()
  if [[ -n "$deps" ]]; then
    step "dependencies from $deps"
    [[ -f "$deps/sinklab-deps.txt" ]] && grep -v '^#' "$deps/sinklab-deps.txt" | sed 's/^/  /'
    local prefix="$deps"
    [[ -d "$deps/usr/include" ]] && prefix="$deps/usr"
    dep_flags+=("-DCMAKE_PREFIX_PATH=$prefix")
    local pkg config
    for pkg in Eigen3 doctest nlohmann_json; do  # (CLI11 serves only the examples, not built here)
      config="$(find "$deps" -name "${pkg}Config.cmake" -print 2>/dev/null | head -n 1)"
      [[ -n "$config" ]] || fail "--deps: no ${pkg}Config.cmake under $deps (was it made by scripts/gpu-deps.sh?)"
      dep_flags+=("-D${pkg}_DIR:PATH=$(dirname "$config")")
      echo "  ${pkg}_DIR=$(dirname "$config")"
    done
    local xsimd
    xsimd="$(find "$deps" -path '*/xsimd/xsimd.hpp' -print 2>/dev/null | head -n 1)"
    [[ -n "$xsimd" ]] || fail "--deps: no xsimd/xsimd.hpp under $deps"
    dep_flags+=("-DSINKLAB_XSIMD_INCLUDE_DIR:PATH=${xsimd%/xsimd/xsimd.hpp}")
    echo "  SINKLAB_XSIMD_INCLUDE_DIR=${xsimd%/xsimd/xsimd.hpp}"
  fi

  step "configure"
  local -a config_flags=(-DSINKLAB_CUDA=ON -DSINKLAB_BUILD_TESTS=ON -DSINKLAB_BUILD_BENCH=ON)
  if [[ -f "$build/CMakeCache.txt" ]]; then
    echo "reusing $build (its generator and settings; the CUDA backend, tests and benchmarks switched on)"
    (( arch_fallback )) || config_flags+=("-DCMAKE_CUDA_ARCHITECTURES=$arch")
  else
    local -a generator=()
    if command -v ninja >/dev/null 2>&1; then
      generator=(-G Ninja)
    elif ! command -v make >/dev/null 2>&1; then
      fail "neither ninja nor make found on PATH: CMake needs one of them to build"
    fi
    config_flags+=(${generator[@]+"${generator[@]}"} -DCMAKE_BUILD_TYPE=Release -DSINKLAB_BUILD_EXAMPLES=OFF -DSINKLAB_MPI=OFF
      "-DCMAKE_CUDA_ARCHITECTURES=$arch")
  fi
  local t0=$SECONDS
  config_flags+=(${cuda_flags[@]+"${cuda_flags[@]}"} ${dep_flags[@]+"${dep_flags[@]}"})
  echo "+ cmake -S $repo -B $build ${config_flags[*]}"
  if ! cmake -S "$repo" -B "$build" "${config_flags[@]}"; then
    if [[ -z "$deps" ]]; then
      echo
      echo "gpu-check: if CMake could not find doctest, nlohmann_json, Eigen3 or xsimd (above): make a folder of them"
      echo "gpu-check: on a Debian/Ubuntu machine with 'scripts/gpu-deps.sh DIR', copy it here and pass --deps DIR"
    fi
    fail "configure (cmake) failed; its message is above"
  fi
  echo "as configured:"
  grep -E '^(Eigen3_DIR|doctest_DIR|nlohmann_json_DIR|SINKLAB_XSIMD_INCLUDE_DIR|CMAKE_CUDA_ARCHITECTURES|CMAKE_BUILD_TYPE|CMAKE_GENERATOR):' \
    "$build/CMakeCache.txt" | sed 's/^/  /'
  local configure_s=$((SECONDS - t0))

  step "build: the tests that ctest -R cuda runs and bench/attention (target gpu_check, $jobs jobs)"
  t0=$SECONDS
  if ! cmake --build "$build" --target gpu_check -j "$jobs"; then
    fail "build failed; the compiler's messages are above"
  fi
  local build_s=$((SECONDS - t0))
  echo "built in ${build_s}s"

  local no_gpu=0 reason="" tests_status="not run" tests_s=0 test_out="$build/gpu-check-ctest.txt"
  if (( run_tests )); then
    step "tests: SINKLAB_REQUIRE_GPU=1 ctest -R '$tests_regex'"
    t0=$SECONDS
    local ctest_jobs=$((jobs < 8 ? jobs : 8))
    SINKLAB_REQUIRE_GPU=1 ctest --test-dir "$build" -R "$tests_regex" --output-on-failure --timeout 600 -j "$ctest_jobs" \
      2>&1 | tee "$test_out"
    local ctest_rc=${PIPESTATUS[0]}
    tests_s=$((SECONDS - t0))
    if grep -q "No tests were found" "$test_out"; then
      fail "no CTest entry matches '$tests_regex'"
    fi
    reason="$(grep -o 'no CUDA device is usable ([^)]*)' "$test_out" | head -n 1 | sed 's/^no CUDA device is usable //')"
    if [[ -n "$reason" ]]; then
      no_gpu=1
      tests_status="failed: no usable GPU $reason"
    elif (( ctest_rc != 0 )); then
      tests_status="FAILED: $(grep -E '[0-9]+% tests passed' "$test_out" | tail -n 1)"
    else
      tests_status="passed: $(grep -E '[0-9]+% tests passed' "$test_out" | tail -n 1)"
    fi
    echo "tests ${tests_status} (${tests_s}s)"
  fi

  local bench_status="not run" bench_s=0 json="$build/attention-cuda.json"
  if (( run_bench )); then
    step "bench/attention --device cuda"
    local -a cmd=("$build/bench/attention" --device cuda --json "$json")
    [[ -n "$python" ]] && cmd+=(--python "$python")
    cmd+=(${bench_args[@]+"${bench_args[@]}"})
    local -a limit=()
    command -v timeout >/dev/null 2>&1 && limit=(timeout 900)
    echo "+ ${cmd[*]}"
    t0=$SECONDS
    ${limit[@]+"${limit[@]}"} "${cmd[@]}"
    local bench_rc=$?
    bench_s=$((SECONDS - t0))
    case $bench_rc in
      0) bench_status="done; numbers in $json" ;;
      77) no_gpu=1; bench_status="not run: no usable GPU" ;;
      124) bench_status="FAILED: stopped after 900 s" ;;
      *) bench_status="FAILED (exit $bench_rc)" ;;
    esac
    echo "bench ${bench_status} (${bench_s}s)"
  fi

  echo
  echo "== summary (${SECONDS}s in all)"
  echo "configure ${configure_s}s, build ${build_s}s"
  echo "tests: ${tests_status}"
  echo "bench: ${bench_status}"
  echo "log: $log"
  if (( no_gpu )); then
    echo
    echo "gpu-check: FAILED: no usable CUDA device${reason:+ $reason}; with SINKLAB_REQUIRE_GPU=1 the GPU tests fail"
    echo "gpu-check: without one (nvidia-smi: ${gpu_line:-not found})"
    exit 3
  fi
  [[ "$tests_status" == FAILED* || "$bench_status" == FAILED* ]] && exit 1
  exit 0
}

mkdir -p "$build" "$(dirname "$log")" || { echo "gpu-check.sh: cannot create $build or the log's folder" >&2; exit 1; }
: > "$log" || { echo "gpu-check.sh: cannot write the log $log" >&2; exit 1; }
main 2>&1 | tee -a "$log"
exit "${PIPESTATUS[0]}"
