# Runs sink_emergence --smoke and checks its outputs (cmake -P; see ../sink_emergence_smoke.cmake).
#   -DEXE=<program> -DOUT=<scratch folder>
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../smoke_common/harness_checks.cmake)
require_defined(EXE OUT)
file(REMOVE_RECURSE "${OUT}")

# 1. Without a corpus (and without --smoke) the program must stop and say how to get one.
expect_corpus_hint(${EXE} ${OUT}/no-corpus)

# 2. Bad input: an unknown factor, a number it cannot read, 'base' inside a combination, heads
#    that do not divide the width, an unknown text.
expect_failure("cell 'T64\\+nope': unknown factor 'nope'" "an unknown factor" ${EXE} --smoke --variants base,T64+nope --out ${OUT}/bad)
expect_failure("cannot read a number in 'lrx'" "an unreadable number" ${EXE} --smoke --variants lrx --out ${OUT}/bad)
expect_failure("'base' stands alone" "base in a combination" ${EXE} --smoke --variants base+T64 --out ${OUT}/bad)
expect_failure("5 heads do not divide d 16" "heads5 with d 16" ${EXE} --smoke --variants heads5 --out ${OUT}/bad)
expect_failure("nope not in" "an unknown --corpus" ${CMAKE_COMMAND} -E env SINKLAB_DATA=${OUT}/no-data ${EXE}
               --corpus brown,nope --out ${OUT}/bad)

# 3. The smoke run: four cells, one seed.
set(cells base T8+nobos cosine+wd0.5+init-gu repeat500+depth3)
set(cmd ${EXE} --smoke --threads 2 --out ${OUT}/run)
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "sink_emergence --smoke output:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sink_emergence --smoke failed with ${rc}")
endif()
expect_output_has("${out}" "built-in smoke-test sentences" "### Outcome" "### Every cell at the end of training"
        "### Where" "### Each cell against the base" "| T8+nobos |" "| repeat500+depth3 |")
expect_paired_starts("${out}" 4)

# 4. Run folders: the per-head and per-layer measures, every evaluation's report, and the same
#    token budget for every cell (T 12 × 6 steps = T 8 × 9 steps).
set(metrics val_loss tokens epochs alpha_max alpha_uniform window attn0_max vratio_min sink03 sink08 massive massive_top
    massive_layer massive_token massive_channel massive_token_share max_inf_norm avg_kurtosis L0_h0_alpha L1_h1_alpha
    L0_h1_attn0 L1_h0_vratio L1_h1_kratio L1_massive parameters unique_tokens steps)
foreach(v IN LISTS cells)
  set(dir "${OUT}/run/runs/${v}/seed0")
  expect_run_files("${dir}")
  if(NOT EXISTS "${dir}/reports.jsonl")
    message(FATAL_ERROR "missing ${dir}/reports.jsonl")
  endif()
  file(READ "${dir}/result.json" json)
  expect_final_metrics("${json}" "${dir}/result.json" ${metrics})
  string(JSON tokens GET "${json}" final tokens)
  if(NOT tokens EQUAL 288)
    message(FATAL_ERROR "${v} trained on ${tokens} tokens, expected the base cell's 6 x 4 x 12 = 288")
  endif()
endforeach()
file(READ "${OUT}/run/runs/repeat500+depth3/seed0/result.json" json)
string(JSON unique GET "${json}" final unique_tokens)
string(JSON layer GET "${json}" final L2_h0_alpha)
if(NOT unique EQUAL 500)
  message(FATAL_ERROR "repeat500 trained on ${unique} unique tokens, expected 500")
endif()
# Without BOS and at T = 8 the α₀ window is 8 queries; a sink at T < 64 is judged on α₀ alone.
file(READ "${OUT}/run/runs/T8+nobos/seed0/result.json" json)
string(JSON window GET "${json}" final window)
if(NOT window EQUAL 8)
  message(FATAL_ERROR "T8's α₀ window is ${window}, expected 8")
endif()
file(READ "${OUT}/run/summary.md" summary)
if(summary MATCHES "in every seed: \\*\\*[^*]*T8\\+nobos")
  message(FATAL_ERROR "T8+nobos counted as a sink from Sink^0.3 at T = 8, where uniform attention alone gives α₀ 0.34")
endif()
foreach(file summary.md run.json dynamics_base.csv dynamics_T8+nobos.csv)
  if(NOT EXISTS "${OUT}/run/${file}")
    message(FATAL_ERROR "missing ${OUT}/run/${file}")
  endif()
endforeach()
file(READ "${OUT}/run/runs/base/seed0/reports.jsonl" reports)
foreach(key "\"seq_len\":12" "\"massive.ratio\"" "\"key_norm_ratio.h1\"" "\"sink_rate_high\"")
  string(FIND "${reports}" "${key}" at)
  if(at LESS 0)
    message(FATAL_ERROR "reports.jsonl lacks ${key}")
  endif()
endforeach()

# 5. A second run into the same folder is refused; --resume reads every run back.
expect_refusal_then_resume(4 ${cmd})
