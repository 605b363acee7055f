# Runs exoformer --smoke and checks its outputs (cmake -P; see ../exoformer_smoke.cmake).
#   -DEXE=<program> -DOUT=<scratch folder>
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../smoke_common/harness_checks.cmake)
require_defined(EXE OUT)
file(REMOVE_RECURSE "${OUT}")

# 1. Without a corpus (and without --smoke) the program must stop and say how to get one.
expect_corpus_hint(${EXE} ${OUT}/no-corpus)

# 2. Bad input: an unknown variant, an unknown stream, dynamic mixing at a granularity that is not
#    built, heads that do not divide the width.
foreach(bad "nope" "exoformer_only_x" "exoformer_s_dyn" "resformer_dyn" "gated_raw" "exoformer_l1" "base_steps0")
  expect_failure("--variants" "the variant '${bad}'" ${EXE} --smoke --variants base,${bad} --out ${OUT}/bad)
endforeach()
expect_failure("--heads 3 does not divide --d-model" "--heads 3 with d 16" ${EXE} --smoke --heads 3 --out ${OUT}/bad)

# 3. The smoke run: every default variant plus the other forms (the gated value residual, both
#    granularities of NuResFormer, un-normalised anchors, fewer layers, a shorter schedule), one seed.
set(variants base gated resformer resformer_learn nuresformer exoformer_s exoformer_h exoformer exoformer_dyn
    exoformer_only_q exoformer_only_k exoformer_only_v exoformer_only_g resformer_gated nuresformer_s nuresformer_dyn
    nuresformer_only_vg_raw gated_l2 exoformer_dyn_steps4)
string(REPLACE ";" "," variant_list "${variants}")
set(cmd ${EXE} --smoke --threads 2 --out ${OUT}/run --variants ${variant_list})
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "exoformer --smoke output:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exoformer --smoke failed with ${rc}")
endif()
expect_output_has("${out}" "built-in smoke-test sentences" "### Claims" "ppl: gated &lt; base" "the base model forms an attention sink"
        "Which anchor carries the effect" "Mixing coefficients of exoformer_dyn" "Anchors' norm, depth and schedule length"
        "gated &lt. base with no more parameters \\(2 layers against 3\\)"
        "exoformer_dyn trained on 1.50× fewer tokens \\(4 of 6 steps" "ppl: nuresformer_only_vg_raw &lt. gated")
expect_same_batches("${out}")
# The shorter schedule saw the first 4 of the 6 batches the others saw.
if(NOT out MATCHES "4 batches, identical for 1/1 variants")
  message(FATAL_ERROR "exoformer_dyn_steps4 did not run a 4-step schedule")
endif()
list(LENGTH variants n_variants)
expect_paired_starts("${out}" ${n_variants})

# 4. Run directories: finite final metrics for every run, and the mixing coefficients of the
#    variants that have them (NuResFormer mixes from layer 2 on, ExoFormer from layer 1; the smoke
#    model has 3 layers).
set(metrics val_loss val_ppl sink token_sim emb_cos pca L0_sink L2_token_sim L1_pca parameters)
foreach(v IN LISTS variants)
  set(dir "${OUT}/run/runs/${v}/seed0")
  expect_run_files("${dir}")
  file(READ "${dir}/result.json" json)
  set(extra)
  if(v STREQUAL "exoformer")
    set(extra L0_q_lambda1 L0_g_lambda2 L2_v_lambda1)
  elseif(v STREQUAL "exoformer_dyn")
    set(extra L0_k_gamma1_mean L2_g_gamma2_sd)
  elseif(v STREQUAL "nuresformer")
    set(extra L1_q_lambda1 L2_g_lambda2)
  elseif(v STREQUAL "resformer_learn")
    set(extra L1_v_lambda1 L2_v_lambda2)
  elseif(v STREQUAL "exoformer_only_v")
    set(extra L1_v_lambda1)
  elseif(v STREQUAL "nuresformer_only_vg_raw")
    set(extra L1_v_lambda1 L2_g_lambda2)
  endif()
  set(run_metrics ${metrics})
  if(v STREQUAL "gated_l2")
    list(REMOVE_ITEM run_metrics L2_token_sim)  # two layers
  endif()
  expect_final_metrics("${json}" "${dir}/result.json" ${run_metrics} ${extra})
endforeach()
# NuResFormer has no coefficients in layer 1 (it is the anchor); exoformer_only_v mixes nothing but v;
# the un-normalised NuResFormer mixes no q; the 2-layer model has no third layer.
foreach(pair "nuresformer;L0_q_lambda1" "exoformer_only_v;L0_q_lambda1" "resformer;L1_v_lambda1"
        "nuresformer_only_vg_raw;L1_q_lambda1" "gated_l2;L2_sink")
  list(GET pair 0 v)
  list(GET pair 1 key)
  file(READ "${OUT}/run/runs/${v}/seed0/result.json" json)
  string(JSON found ERROR_VARIABLE missing GET "${json}" final ${key})
  if(NOT missing)
    message(FATAL_ERROR "${v} records ${key} = ${found}, which it should not have")
  endif()
endforeach()
# Fewer layers, fewer parameters; the un-normalised anchors have no anchor norms' gains.
foreach(pair "gated_l2;gated" "nuresformer_only_vg_raw;nuresformer")
  list(GET pair 0 small)
  list(GET pair 1 big)
  file(READ "${OUT}/run/runs/${small}/seed0/result.json" js)
  file(READ "${OUT}/run/runs/${big}/seed0/result.json" jb)
  string(JSON ps GET "${js}" final parameters)
  string(JSON pb GET "${jb}" final parameters)
  if(NOT ps LESS pb)
    message(FATAL_ERROR "${small} has ${ps} parameters, not fewer than ${big}'s ${pb}")
  endif()
endforeach()
foreach(file summary.md run.json by_layer.csv mixing.csv ppl_bars.csv dynamics_base.csv dynamics_exoformer_only_v.csv)
  if(NOT EXISTS "${OUT}/run/${file}")
    message(FATAL_ERROR "missing ${OUT}/run/${file}")
  endif()
endforeach()

# 5. A second run into the same folder is refused; --resume reads every run back.
expect_refusal_then_resume(${n_variants} ${cmd})

# 6. --preset sink: the sink-forming setting, with the command line and --smoke winning.
expect_sink_preset(${EXE} ${OUT}/preset run.json --variants base)
