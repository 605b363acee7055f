# Runs vit_sinks --smoke and checks its outputs (cmake -P; see ../vit_sinks_smoke.cmake).
#   -DEXE=<program> -DOUT=<scratch folder>
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../smoke_common/harness_checks.cmake)
require_defined(EXE OUT)
file(REMOVE_RECURSE "${OUT}")

# 1. Without Fashion-MNIST (and without --smoke) the program must stop and say how to get it:
#    SINKLAB_DATA and --data-dir both point at an empty folder, so neither the cache nor Debian's
#    package is found.
file(MAKE_DIRECTORY ${OUT}/no-data)
expect_failure("apt-get install dataset-fashion-mnist.*scripts/fetch-data.sh fashion-mnist" "without the data set"
  ${CMAKE_COMMAND} -E env SINKLAB_DATA=${OUT}/no-data ${EXE} --steps 1 --data-dir ${OUT}/no-data --out ${OUT}/no-data-run)

# 2. Bad input: an unknown variant, heads that do not divide the width.
expect_failure("the variant|'nope' is not a variant" "an unknown variant" ${EXE} --smoke --variants vanilla,nope --out ${OUT}/bad)
expect_failure("--heads 3 does not divide --d-model" "--heads 3 with d 16" ${EXE} --smoke --heads 3 --out ${OUT}/bad)

# 3. The smoke run: all four variants, one seed.
set(variants vanilla gated registers gated_registers)
string(REPLACE ";" "," variant_list "${variants}")
set(cmd ${EXE} --smoke --threads 2 --out ${OUT}/run --variants ${variant_list})
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "vit_sinks --smoke output:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "vit_sinks --smoke failed with ${rc}")
endif()
expect_output_has("${out}" "built-in synthetic images" "### Claims" "gating removes NOP sinks" "registers host the broadcast"
  "gating \\+ registers gives the best dense features" "classification accuracy roughly unchanged" "dense probe: patch accuracy"
  "sink heads fall into two phenotypes" "CLS is the sink in early layers")
expect_same_batches("${out}")
list(LENGTH variants n_variants)
expect_paired_starts("${out}" ${n_variants})

# 4. Run directories: finite final metrics for every run (the gate only where there is one, the
#    register measures everywhere), and the attention maps of the final model.
set(metrics test_acc test_loss dense_acc dense_miou sink inflow inflow_cls inflow_patch inflow_reg cls_mass reg_mass
    vratio srank L0_sink L0_vratio L1_srank L1_inflow parameters L0_h0_sink L0_h1_vratio L1_h0_srank L1_h1_srank)
foreach(v IN LISTS variants)
  set(dir "${OUT}/run/runs/${v}/seed0")
  expect_run_files("${dir}")
  file(READ "${dir}/result.json" json)
  set(extra)
  if(v MATCHES "gated")
    set(extra gate L0_gate L1_gate)
  endif()
  expect_final_metrics("${json}" "${dir}/result.json" ${metrics} ${extra})
  if(NOT v MATCHES "gated")
    string(JSON found ERROR_VARIABLE missing GET "${json}" final gate)
    if(NOT missing)
      message(FATAL_ERROR "${v} records a gate (${found}) but has none")
    endif()
  endif()
  foreach(file attn_L0.dat attn_L1.dat cls_L0.dat cls_L1.dat image0.dat)
    if(NOT EXISTS "${dir}/${file}")
      message(FATAL_ERROR "missing ${dir}/${file}")
    endif()
  endforeach()
endforeach()
# The register variants' attention maps have 1 + 16 + 2 columns (CLS, 4×4 patches, 2 registers);
# the CLS map is the 4×4 patch grid.
file(STRINGS "${OUT}/run/runs/registers/seed0/attn_L1.dat" rows)
list(LENGTH rows n_rows)
list(GET rows 0 first)
string(REGEX MATCHALL "[^ ]+" cols "${first}")
list(LENGTH cols n_cols)
if(NOT n_rows EQUAL 19 OR NOT n_cols EQUAL 19)
  message(FATAL_ERROR "registers attn_L1.dat is ${n_rows}x${n_cols}, expected 19x19")
endif()
file(STRINGS "${OUT}/run/runs/vanilla/seed0/cls_L0.dat" rows)
list(LENGTH rows n_rows)
if(NOT n_rows EQUAL 4)
  message(FATAL_ERROR "vanilla cls_L0.dat has ${n_rows} rows, expected 4")
endif()
# Every head of every run on the phenotype axes: 4 variants x 2 layers x 2 heads, and a header.
file(STRINGS "${OUT}/run/heads.csv" rows)
list(LENGTH rows n_rows)
if(NOT n_rows EQUAL 17)
  message(FATAL_ERROR "heads.csv has ${n_rows} lines, expected 17 (a header and 16 heads)")
endif()
foreach(file summary.md run.json by_layer.csv miou_bars.csv plots.gp heads.csv dynamics_vanilla.csv dynamics_gated_registers.csv)
  if(NOT EXISTS "${OUT}/run/${file}")
    message(FATAL_ERROR "missing ${OUT}/run/${file}")
  endif()
endforeach()

# 5. A second run into the same folder is refused; --resume reads every run back.
expect_refusal_then_resume(${n_variants} ${cmd})
