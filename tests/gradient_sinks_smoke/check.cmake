# Runs gradient_sinks --smoke and checks its outputs (cmake -P; see ../gradient_sinks_smoke.cmake).
#   -DEXE=<program> -DOUT=<scratch folder>
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../smoke_common/harness_checks.cmake)
require_defined(EXE OUT)
file(REMOVE_RECURSE "${OUT}")

# 1. Without a corpus (and without --smoke) the program must stop and say how to get one.
expect_corpus_hint(${EXE} ${OUT}/no-corpus)

# 2. Bad input: an unknown variant, heads that do not divide the width.
expect_failure("--variants: 'nope' is not a variant" "an unknown variant" ${EXE} --smoke --variants vanilla,nope --out ${OUT}/bad)
expect_failure("--heads 3 does not divide --d-model" "--heads 3 with d 16" ${EXE} --smoke --heads 3 --out ${OUT}/bad)

# 3. The smoke run: the four variants, one seed.
set(variants vanilla vscale gated sink)
set(cmd ${EXE} --smoke --threads 2 --out ${OUT}/run)
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "gradient_sinks --smoke output:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gradient_sinks --smoke failed with ${rc}")
endif()
expect_output_has("${out}" "built-in smoke-test sentences" "### Claims" "the vanilla model forms an attention sink"
        "concentrates on the sink token" "RMSNorm attenuates" "V-scale keeps the sink rate" "Backward flow of vanilla"
        "V-scale: C = ")
expect_same_batches("${out}")
expect_paired_starts("${out}" 4)

# 4. Run folders: the gradient, flow and norm measures per layer and averaged, the per-token
#    reports of every evaluation, the final profile, and V-scale's constants (vscale only).
set(metrics val_loss sink_rate mass0 attn0 gq0 gk_early gv0 gv_early attn_bloat0 attn_compress_early attn_change0
    ffn_bloat_early ffn_compress0 ffn_change_early res0 res_early attn_out0 ffn_out_early max_act L0_gv0 L1_ffn_compress0
    attn_compress_slope ffn_compress_r2 ffn_compress_slope_pooled attn_compress_intercept_pooled parameters)
foreach(v IN LISTS variants)
  set(dir "${OUT}/run/runs/${v}/seed0")
  expect_run_files("${dir}")
  foreach(f reports.jsonl profile.csv flow_scatter.csv)
    if(NOT EXISTS "${dir}/${f}")
      message(FATAL_ERROR "missing ${dir}/${f}")
    endif()
  endforeach()
  file(READ "${dir}/result.json" json)
  set(extra)
  if(v STREQUAL "vscale")
    set(extra L0_h0_C L1_h1_phi0 L1_h0_phi_early)
  endif()
  expect_final_metrics("${json}" "${dir}/result.json" ${metrics} ${extra})
endforeach()
file(READ "${OUT}/run/runs/vanilla/seed0/result.json" json)
string(JSON found ERROR_VARIABLE missing GET "${json}" final L0_h0_C)
if(NOT missing)
  message(FATAL_ERROR "vanilla records V-scale's L0_h0_C = ${found}, which it should not have")
endif()
# V-scale's C starts at (d_head·0.02)² (θ = 0): with d_head 8, 0.0256; a few steps move θ little.
file(READ "${OUT}/run/runs/vscale/seed0/result.json" json)
string(JSON c GET "${json}" final L0_h0_C)
if(c LESS 0.02 OR c GREATER 0.032)
  message(FATAL_ERROR "vscale's L0_h0_C = ${c}, expected about 0.0256 after a few steps")
endif()
file(STRINGS "${OUT}/run/runs/vanilla/seed0/profile.csv" profile)
list(LENGTH profile rows)
if(NOT rows EQUAL 13)  # header + T = 12 positions
  message(FATAL_ERROR "profile.csv has ${rows} rows, expected a header and 12 positions")
endif()
# Compress against the branch input's norm: 2 branches x 2 layers x tokens 0..11 (T = 12).
file(STRINGS "${OUT}/run/runs/vanilla/seed0/flow_scatter.csv" scatter)
list(LENGTH scatter rows)
if(NOT rows EQUAL 49)
  message(FATAL_ERROR "flow_scatter.csv has ${rows} rows, expected a header and 2 x 2 x 12 points")
endif()
foreach(file summary.md run.json dynamics_vanilla.csv flow_by_layer.csv vscale_C.csv)
  if(NOT EXISTS "${OUT}/run/${file}")
    message(FATAL_ERROR "missing ${OUT}/run/${file}")
  endif()
endforeach()

# 5. A second run into the same folder is refused; --resume reads every run back.
expect_refusal_then_resume(4 ${cmd})

# 6. --preset sink: the sink-forming setting, with the command line and --smoke winning.
expect_sink_preset(${EXE} ${OUT}/preset run.json --variants vanilla)
