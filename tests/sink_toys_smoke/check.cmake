# Runs sink_toys --smoke and two tiny real runs, and checks their outputs (cmake -P; see
# ../sink_toys_smoke.cmake).   -DEXE=<program> -DOUT=<scratch folder>
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../smoke_common/harness_checks.cmake)
require_defined(EXE OUT)
file(REMOVE_RECURSE "${OUT}")

# 1. Bad input names what is wrong before anything runs.
foreach(bad "nope" "nop_gamma_2" "nop_p_1" "nop_p_x")
  expect_failure("--variants: '${bad}'" "the variant '${bad}'" ${EXE} --smoke --variants ${bad} --out ${OUT}/bad)
endforeach()
expect_failure("--parts: 'bogus' is not a part" "an unknown part" ${EXE} --smoke --parts bogus --out ${OUT}/bad)
expect_failure("belongs to the part 'slow'" "a variant of a part left out" ${EXE} --smoke --parts nop --variants slow --out ${OUT}/bad)

# 2. The smoke run: every default variant of the three parts, one seed.
set(cmd ${EXE} --smoke --threads 2 --out ${OUT}/run)
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "sink_toys --smoke output:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sink_toys --smoke failed with ${rc}")
endif()
expect_output_has("${out}" "## Claims" "a NOP sink forms" "the G1 gate removes the NOP sink" "a broadcast hub forms on j"
        "registers host the broadcast" "large BOS activation" "the sink is a no-op through its value")
expect_same_batches("${out}")
expect_paired_starts("${out}" 16)

# 3. Run folders: the final metrics of each kind of run and the files the figures read.
set(nop_metrics mse sink sink_key attn0_nop attn0_active vratio kratio qk_sigma1 qk_sigma_ratio srank bos_ratio
    mse_v0_zero mse_v0_restored)
foreach(v nop_gamma_0 nop_gamma_0.5 nop_p_0.1 nop_never nop_gated)
  set(dir "${OUT}/run/nop/runs/${v}/seed0")
  expect_run_files("${dir}")
  file(READ "${dir}/result.json" json)
  set(metrics ${nop_metrics})
  if(v STREQUAL "nop_never")
    list(REMOVE_ITEM metrics attn0_nop)  # no token is ever flagged: there are no NOP queries
  endif()
  expect_final_metrics("${json}" "${dir}/result.json" ${metrics})
  foreach(f attn.dat attn_seq0.dat norms.csv qk_spectrum.csv)
    if(NOT EXISTS "${dir}/${f}")
      message(FATAL_ERROR "missing ${dir}/${f}")
    endif()
  endforeach()
endforeach()
foreach(v slow slow_gated)
  set(dir "${OUT}/run/slow/runs/${v}/seed0")
  expect_run_files("${dir}")
  file(READ "${dir}/result.json" json)
  expect_final_metrics("${json}" "${dir}/result.json" ${nop_metrics})
endforeach()
file(READ "${OUT}/run/slow/runs/slow_gated/seed0/result.json" json)
expect_final_metrics("${json}" "slow_gated" gate)
foreach(v broadcast broadcast_registers)
  set(dir "${OUT}/run/broadcast/runs/${v}/seed0")
  expect_run_files("${dir}")
  file(READ "${dir}/result.json" json)
  expect_final_metrics("${json}" "${dir}/result.json" mse match vratio_hub srank L0_match L1_strength L0_vratio_hub
                       L1_vratio_inflow L0_srank L1_sink hub_seq0)
  foreach(f attn_L0_seq0.dat attn_L1_seq0.dat)
    if(NOT EXISTS "${dir}/${f}")
      message(FATAL_ERROR "missing ${dir}/${f}")
    endif()
  endforeach()
endforeach()
file(READ "${OUT}/run/broadcast/runs/broadcast_registers/seed0/result.json" json)
expect_final_metrics("${json}" "broadcast_registers" L0_inflow_reg L1_reg_mass L0_reg_to_hub)
foreach(f summary.md nop_vs_gamma.csv nop_vs_p.csv nop/dynamics_nop_p_0.1.csv slow/dynamics_slow.csv
        broadcast/dynamics_broadcast.csv nop/run.json)
  if(NOT EXISTS "${OUT}/run/${f}")
    message(FATAL_ERROR "missing ${OUT}/run/${f}")
  endif()
endforeach()

# 4. A second run into the same folder is refused; --resume reads all 16 runs back.
expect_refusal_then_resume(16 ${cmd})

# 5. Tiny real runs (d 16, L 8, about a second each): the signatures must come out.
#    NOP toy, setup a, against the never-NOP baseline: the sink forms on token 0 with a near-zero
#    value and a spike in W_Q W_Kᵀ.
execute_process(
  COMMAND ${EXE} --parts nop --variants nop_gamma_0,nop_never --d 16 --seq-len 8 --nop-batch 64 --nop-steps 300
          --nop-eval-every 100 --eval-batch 64 --seeds 0 --threads 2 --no-plots --out ${OUT}/nop-signature
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the tiny NOP run failed with ${rc}\n${out}\n${err}")
endif()
foreach(claim "a NOP sink forms: queries that need no update attend to token 0 \\(setup a[^|]*\\|[^|]*\\|[^|]*\\| reproduced"
              "the NOP sink's value is [^|]*\\(setup a[^|]*\\|[^|]*\\|[^|]*\\| reproduced"
              "a spike in the singular values[^|]*\\|[^|]*\\|[^|]*\\| reproduced")
  if(NOT out MATCHES "${claim}")
    message(FATAL_ERROR "the tiny NOP run should reproduce '${claim}'\n${out}")
  endif()
endforeach()
#    Broadcast toy: a hub on j* with a value like the other tokens' and a rank-one update.
execute_process(
  COMMAND ${EXE} --parts broadcast --variants broadcast --d 16 --seq-len 8 --bc-batch 64 --bc-steps 600 --bc-lr 3e-3
          --bc-eval-every 200 --eval-batch 64 --seeds 0 --threads 2 --no-plots --out ${OUT}/broadcast-signature
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the tiny broadcast run failed with ${rc}\n${out}\n${err}")
endif()
foreach(claim "a broadcast hub forms on j[^|]*\\|[^|]*\\|[^|]*\\| reproduced"
              "the hub's value norm is like the other tokens'[^|]*\\|[^|]*\\|[^|]*\\| reproduced"
              "the hub layer's update has stable rank[^|]*\\|[^|]*\\|[^|]*\\| reproduced")
  if(NOT out MATCHES "${claim}")
    message(FATAL_ERROR "the tiny broadcast run should reproduce '${claim}'\n${out}")
  endif()
endforeach()
