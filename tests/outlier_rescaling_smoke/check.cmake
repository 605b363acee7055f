# Runs outlier_rescaling --smoke and checks its outputs (cmake -P; see ../outlier_rescaling_smoke.cmake).
#   -DEXE=<program> -DOUT=<scratch folder>
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../smoke_common/harness_checks.cmake)
require_defined(EXE OUT)
file(REMOVE_RECURSE "${OUT}")

# 1. Without a corpus (and without --smoke) the program must stop and say how to get one.
expect_corpus_hint(${EXE} ${OUT}/no-corpus)

# 2. Bad input: an unknown architecture, a malformed variant, heads that do not divide the width.
foreach(bad "nope" "g1@fast" "clip")
  expect_failure("--variants" "the variant '${bad}'" ${EXE} --smoke --variants baseline,${bad} --out ${OUT}/bad)
endforeach()
expect_failure("--heads 3 does not divide --d-model" "--heads 3 with d 16" ${EXE} --smoke --heads 3 --out ${OUT}/bad)

# 3. The smoke run: every default variant, plus one that explodes (a learning rate of 0.9) and
#    must be recorded as diverged while the matrix goes on.
set(variants baseline g1 g1_preaffine g1_gatednorm dyt dyt@0.0015 gated_dyt gated_dyt@0.0015 clip10 clip100
    clip1000 glu glu_g1 dyt_g1 g1_clip1000 g1_preaffine_glu g1_gatednorm_glu linear g1_clip10@0.9)
string(REPLACE ";" "," variant_list "${variants}")
set(cmd ${EXE} --smoke --threads 2 --out ${OUT}/run --variants ${variant_list})
execute_process(COMMAND ${cmd} --steps 12 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "outlier_rescaling --smoke output:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "outlier_rescaling --smoke failed with ${rc}")
endif()
expect_output_has("${out}" "built-in smoke-test sentences" "### Claims" "max activation: baseline" "W4A4 loss degradation"
        "DyT with G1 trains at the baseline's rate" "with G1, residual clipping at 1000"
        "G1 \\+ GatedNorm: GLU is no worse" "attention without a normaliser"
        "Rescaling by intervention" "GatedNorm's gates kept in float" "the residual sink's channel has a small norm gain"
        "the residual sink rescales through the norm" "with GatedNorm the largest channel no longer rescales"
        "g1_clip10@0.9 s0\\] diverged")  # last: an element with ']' joins the ones after it
expect_same_batches("${out}")
list(LENGTH variants n_variants)
expect_paired_starts("${out}" ${n_variants})

# 4. Run directories: finite final metrics and PTQ figures for every run that did not diverge.
set(metrics val_loss max_act sink sink_dims L0_resid_max L1_ffn_max L1_top_dim_ratio ptq_w8a8_dloss
    ptq_w8a8_sq_dloss ptq_w4a4_int4_dloss ptq_w4a4_fp4_dloss ptq_w4a4_fp4_sq_dloss rescale_dim rescale_lambda_ratio
    rescale_dloss_shrink rescale_gain rescale_dloss_flip rescale_dloss_control)
foreach(v IN LISTS variants)
  set(dir "${OUT}/run/runs/${v}/seed0")
  expect_run_files("${dir}")
  file(READ "${dir}/result.json" json)
  string(JSON diverged GET "${json}" diverged)
  if(v STREQUAL "g1_clip10@0.9")
    if(NOT diverged)
      message(FATAL_ERROR "${v} should have diverged")
    endif()
    continue()
  endif()
  if(diverged)
    message(FATAL_ERROR "${v} diverged in the smoke run")
  endif()
  expect_final_metrics("${json}" "${dir}/result.json" ${metrics})
  # The interventions reach the model: reversing a channel at every stream point moves the loss.
  foreach(m rescale_dloss_flip rescale_dloss_control)
    string(JSON x GET "${json}" final ${m})
    if(x MATCHES "^-?0(\\.0*)?([eE][-+]?0+)?$")
      message(FATAL_ERROR "${v}: ${m} is ${x}: the stream edit did not change the loss (${dir}/result.json)")
    endif()
  endforeach()
endforeach()
# GatedNorm's variants also quantize with its gates in float; the others have no gates to keep.
file(READ "${OUT}/run/runs/g1_gatednorm/seed0/result.json" json)
expect_final_metrics("${json}" "g1_gatednorm/seed0/result.json" ptq_w4a4_int4_gatefloat_dloss ptq_w4a4_fp4_gatefloat_dloss)
file(READ "${OUT}/run/runs/g1/seed0/result.json" json)
string(JSON has_gatefloat ERROR_VARIABLE missing GET "${json}" final ptq_w4a4_fp4_gatefloat_dloss)
if(NOT missing)
  message(FATAL_ERROR "g1 has no GatedNorm, yet its result.json has ptq_w4a4_fp4_gatefloat_dloss")
endif()
foreach(file summary.md run.json max_activation_by_layer.csv w4a4_fp4_bars.csv maps/baseline_seed0.dat
        maps/g1_gatednorm_seed0.dat dynamics_baseline.csv)
  if(NOT EXISTS "${OUT}/run/${file}")
    message(FATAL_ERROR "missing ${OUT}/run/${file}")
  endif()
endforeach()
# The activation map is tokens x channels: 12 rows of 16 numbers.
file(STRINGS "${OUT}/run/maps/baseline_seed0.dat" rows)
list(LENGTH rows n_rows)
list(GET rows 0 first)
string(REGEX MATCHALL "[^ ]+" cols "${first}")
list(LENGTH cols n_cols)
if(NOT n_rows EQUAL 12 OR NOT n_cols EQUAL 16)
  message(FATAL_ERROR "maps/baseline_seed0.dat is ${n_rows} x ${n_cols}, expected 12 x 16")
endif()

# 5. A second run into the same folder is refused; --resume reads every run back.
expect_refusal_then_resume(${n_variants} ${cmd} --steps 12)

# 6. --preset sink: the sink-forming setting, with the command line and --smoke winning.
expect_sink_preset(${EXE} ${OUT}/preset run.json --variants baseline)
