#!/usr/bin/env bash
# One data-parallel test case on 2 MPI ranks (tests/dist.cmake).
#   dist_mpi.sh CASE DIST_TRAIN HAVE_MPI MPIEXEC
set -uo pipefail
case_name=$1 prog=$2 have_mpi=$3 mpiexec=${4:-}
if [[ "$have_mpi" != "ON" ]]; then
  echo "SKIP: built without MPI (install libopenmpi-dev openmpi-bin and configure with SINKLAB_MPI=AUTO or ON)"
  exit 77
fi
if [[ -z "$mpiexec" || ! -x "$mpiexec" ]]; then
  mpiexec=$(command -v mpirun || true)
fi
if [[ -z "$mpiexec" ]]; then
  echo "SKIP: no mpirun on PATH (Debian: openmpi-bin)"
  exit 77
fi
# OpenMPI refuses to start as root without these (CI runs as root); two ranks on any core count.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--batch 8 --seeds 0,1 --steps 20 --threads 1)
mpi2() { timeout --kill-after=10 120 "$mpiexec" -np 2 "$@"; }
fail() { echo "FAIL: $*"; exit 1; }

case "$case_name" in
  data_parallel)
    # 2 ranks x 4 rows per step against 1 process x 8 rows, on the same batches. The ranks add
    # their gradients in another order than one process's longer GEMMs, so equality holds to
    # float rounding carried through 20 AdamW steps, not bit for bit (measured: 2.9e-5 of a
    # tensor's largest value, the final loss to 1.3e-7).
    "$prog" --out "$tmp/one" "${common[@]}" || fail "one process"
    mpi2 "$prog" --out "$tmp/data" "${common[@]}" --distribute data || fail "mpirun --distribute data"
    "$prog" --compare "$tmp/one" "$tmp/data" --tolerance 2e-4 || fail "data-parallel differs from one process"
    ;;
  run_matrix)
    # Whole seeds on each rank: the same computation as the sequential matrix, bit for bit.
    "$prog" --out "$tmp/one" "${common[@]}" || fail "one process"
    mpi2 "$prog" --out "$tmp/runs" "${common[@]}" --distribute runs | tee "$tmp/log" || fail "mpirun --distribute runs"
    grep -q "seed i runs on rank i mod 2" "$tmp/log" || fail "no banner naming the distribution"
    "$prog" --compare "$tmp/one" "$tmp/runs" --tolerance 0 || fail "the spread matrix differs from the sequential one"
    ;;
  resume)
    # A stop that reaches rank 1 alone at step 7: the ranks agree to stop, rank 0 checkpoints,
    # both exit 130; --resume restores both ranks and ends bit-identical to an unstopped run.
    mpi2 "$prog" --out "$tmp/ref" "${common[@]}" --distribute data || fail "reference run"
    mpi2 "$prog" --out "$tmp/cut" "${common[@]}" --distribute data --fail-rank 1 --fail-at 7 --fail-how stop
    rc=$?
    [[ $rc -ne 0 ]] || fail "the stopped run exited 0"
    [[ -f "$tmp/cut/runs/gated/seed0/checkpoint.safetensors" ]] || fail "no checkpoint after the stop"
    mpi2 "$prog" --out "$tmp/cut" "${common[@]}" --distribute data --resume || fail "the resumed run"
    "$prog" --compare "$tmp/ref" "$tmp/cut" --tolerance 0 || fail "the resumed run differs from the unstopped one"
    ;;
  rank_killed | rank_fails)
    how=kill
    [[ $case_name == rank_fails ]] && how=throw
    start=$(date +%s)
    mpi2 "$prog" --out "$tmp/x" "${common[@]}" --distribute data --fail-rank 1 --fail-at 5 --fail-how $how \
      > "$tmp/log" 2>&1
    rc=$?
    cat "$tmp/log"
    took=$(( $(date +%s) - start ))
    echo "exit status $rc after $took s"
    [[ $rc -ne 0 ]] || fail "the job exited 0 although rank 1 failed"
    [[ $rc -ne 124 && $took -lt 100 ]] || fail "the job hung until the timeout"
    if [[ $how == kill ]]; then  # mpirun names the rank that died
      grep -q "process rank 1 .*exited on signal 9" "$tmp/log" || fail "no message names rank 1"
    else                         # the failing rank names itself and its error, then ends every rank
      grep -q "error on rank 1 of 2: dist_train: the failure injected at step 5" "$tmp/log" ||
        fail "no message names rank 1 and its error"
    fi
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
