# Runs sink_atlas --smoke and checks its outputs (cmake -P; see ../sink_atlas_smoke.cmake).
#   -DEXE=<program> -DOUT=<scratch folder>
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../smoke_common/harness_checks.cmake)
require_defined(EXE OUT)
file(REMOVE_RECURSE "${OUT}")

# 1. Without a corpus (and without --smoke) the program must stop and say how to get one.
expect_corpus_hint(${EXE} ${OUT}/no-corpus)

# 2. Bad input: an unknown variant (named, with the known ones), heads that do not divide the width.
expect_failure("--variants: 'nope' is not a variant; known: baseline, sink_logit" "an unknown variant"
               ${EXE} --smoke --variants baseline,nope --out ${OUT}/bad)
expect_failure("--heads 3 does not divide --d-model 16" "heads 3 with d 16" ${EXE} --smoke --heads 3 --out ${OUT}/bad)
expect_sink_preset(${EXE} ${OUT}/preset run.json --variants baseline)
expect_failure("'g1' is listed twice" "a variant listed twice" ${EXE} --smoke --variants g1,vga,g1 --out ${OUT}/bad)
expect_failure("retrofit_vga continues the baseline run of seed 0, but '.*baseline/seed0/final.safetensors' does not exist and baseline is not listed before it"
               "a retrofit without its baseline" ${EXE} --smoke --variants retrofit_vga,baseline --out ${OUT}/no-baseline)

# 3. The smoke run: every variant, one seed.
set(cmd ${EXE} --smoke --threads 2 --out ${OUT}/run)
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "sink_atlas --smoke output:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sink_atlas --smoke failed with ${rc}")
endif()
set(variants baseline sink_logit registers sink_token g1 g1_head iga vga vga_out preaffine_g1 gatednorm_g1 dyt vscale
    resformer nuresformer exoformer exoformer_dyn sigmoid relu clipped finetune retrofit_vga)
list(LENGTH variants n)
expect_output_has("${out}" "built-in smoke-test sentences" "### The sink, the activations" "### Loss, post-training"
        "### Each variant against the baseline" "### Findings" "### The variants" "### The studies' claims that needed a sink"
        "\\| V-scale keeps the sink \\|" "\\| sink: exoformer_dyn ≪ baseline \\|" "\\| exoformer_dyn \\|" "\\| clipped \\|"
        "\\| retrofitting VGA lowers Max inf-norm and Avg kurtosis against plain fine-tuning \\|"
        "\\| plain fine-tuning does not lower Max inf-norm" "the baseline's final weights, trained --retrofit-fraction more"
        "\\[finetune s0\\] init: [0-9]+/[0-9]+ shared tensors identical to the reference \\(the baseline's final weights")
# The retrofit starts from the trained function (VGA at W_g = 0 with W_O doubled): its first
# evaluation matches the baseline's final one.
string(REGEX MATCH "largest \\|Δ\\| ([0-9.e+-]+) nats over 1 seed" _ "${out}")
if(NOT CMAKE_MATCH_1 OR CMAKE_MATCH_1 GREATER 1e-4)
  message(FATAL_ERROR "the retrofit's first evaluation differs from the baseline's final one: '${CMAKE_MATCH_1}'")
endif()
# The fine-tuned runs train --retrofit-fraction (10%) of --steps, two steps at least (6 here: two),
# evaluated at their start and end.
file(STRINGS "${OUT}/run/runs/finetune/seed0/metrics.jsonl" ft_rows)
list(GET ft_rows 0 first)
list(GET ft_rows -1 last)
string(JSON s0 GET "${first}" step)
string(JSON s1 GET "${last}" step)
if(NOT s0 EQUAL 0 OR NOT s1 EQUAL 2)
  message(FATAL_ERROR "finetune should be evaluated at steps 0 and 2 (10% of 6, at least 2), got ${s0} .. ${s1}")
endif()
expect_paired_starts("${out}" ${n})
expect_same_batches("${out}")

# 4. Every run's diagnostics: per head, per layer and over the model, quantization and cost.
set(metrics val_loss val_ppl tokens alpha_max alpha_max_layer alpha_max_head attn0_max vratio_sink dlogit_sink sink03
    sink08 region_max region03 attn0_mean max_act ffn0 ffn_early token_cos pca massive massive_layer massive_channel max_inf_norm avg_kurtosis stable_rank gv0 gv_early gv_ratio res0
    L0_h0_alpha L1_h1_attn0 L1_h0_vratio L0_h1_dlogit L1_stable_rank L0_massive ptq_w8a8_dloss ptq_w8a8_sq_dloss
    ptq_w4a4_int4_dloss ptq_w4a4_int4_sq_dloss ptq_w4a4_fp4_dloss ptq_w4a4_fp4_sq_dloss ms_per_step parameters)
foreach(v IN LISTS variants)
  set(dir "${OUT}/run/runs/${v}/seed0")
  expect_run_files("${dir}")
  if(NOT EXISTS "${dir}/reports.jsonl")
    message(FATAL_ERROR "missing ${dir}/reports.jsonl")
  endif()
  file(READ "${dir}/result.json" json)
  expect_final_metrics("${json}" "${dir}/result.json" ${metrics})
endforeach()
# What a variant adds gets attention: the prepended tokens and the sink logit log it, the
# baseline does not; a sink logit's share lies in [0, 1].
foreach(v registers sink_token sink_logit)
  file(READ "${OUT}/run/runs/${v}/seed0/result.json" json)
  expect_final_metrics("${json}" "${v}" added L1_h0_added L1_h0_region)
  string(JSON a GET "${json}" final added)
  if(a LESS 0 OR a GREATER 1)
    message(FATAL_ERROR "${v}: attention to what it adds is ${a}, outside [0, 1]")
  endif()
endforeach()
file(READ "${OUT}/run/runs/baseline/seed0/result.json" json)
string(JSON a ERROR_VARIABLE missing GET "${json}" final added)
if(NOT missing)
  message(FATAL_ERROR "the baseline logs attention to added tokens (${a}); it adds none")
endif()
# With nothing added the sink region is key 0 alone: its α is α₀, to the last digit.
string(JSON region GET "${json}" final region_max)
string(JSON alpha GET "${json}" final alpha_max)
if(NOT region STREQUAL alpha)
  message(FATAL_ERROR "the baseline's sink-region α (${region}) differs from its α₀ (${alpha})")
endif()
foreach(file summary.md dynamics.md run.json dynamics_baseline.csv sinkmap_vga.dat atlas_heatmap.dat)
  if(NOT EXISTS "${OUT}/run/${file}")
    message(FATAL_ERROR "missing ${OUT}/run/${file}")
  endif()
endforeach()
# dynamics.md: every run over training, from step 0 (here the baseline's and the retrofit's first rows).
file(READ "${OUT}/run/dynamics.md" dynamics)
foreach(row "| baseline s0 | 0 | 0.0 |" "| retrofit_vga s0 | 0 |" "| α sink region |" "| attn → added |")
  string(FIND "${dynamics}" "${row}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "dynamics.md lacks the row '${row}':\n${dynamics}")
  endif()
endforeach()
# The attention to the sink logit is a number in its rows; the baseline, which adds nothing, has none.
if(NOT dynamics MATCHES "\\| sink_logit s0 \\| 0 \\|[^\n]*\\| 0\\.[0-9][0-9][0-9] \\| 0\\.[0-9][0-9][0-9] \\|"
   OR NOT dynamics MATCHES "\\| baseline s0 \\| 0 \\|[^\n]*\\| 0\\.[0-9][0-9][0-9] \\| — \\|")
  message(FATAL_ERROR "dynamics.md: attn → added should be a number for sink_logit and '—' for the baseline:\n${dynamics}")
endif()

# 5. A second run into the same folder is refused; --resume reads every run back.
expect_refusal_then_resume(${n} ${cmd})

# 6. --summarize reads the finished runs back and names the listed ones that are not there.
expect_summarize(${OUT}/run ${n} ${cmd})
