# Runs vga_lm --smoke and checks its outputs (cmake -P; see ../vga_lm_smoke.cmake).
#   -DEXE=<program> -DOUT=<scratch folder>
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../smoke_common/harness_checks.cmake)
require_defined(EXE OUT)
file(REMOVE_RECURSE "${OUT}")
set(families encoder decoder)
set(pretrain vanilla register sink iga vga iga_output vga_output)
set(retrofit finetune retrofit_vga)

# 1. Without a corpus (and without --smoke) the program must stop and say how to get one.
expect_corpus_hint(${EXE} ${OUT}/no-corpus)

# 2. Bad flags: exit code 2 and the flag named; a bad combination: a clear message.
execute_process(COMMAND ${EXE} --smoke --variants vanilla,nope --out ${OUT}/bad
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--variants")
  message(FATAL_ERROR "an unknown variant must fail with rc 2 naming --variants, got rc=${rc}\n${out}\n${err}")
endif()
expect_failure("--heads 3 does not divide --d-model" "--heads 3 with d 16" ${EXE} --smoke --heads 3 --out ${OUT}/bad)
expect_failure("--block post is the encoder's layout" "--block post with both families" ${EXE} --smoke --block post
  --out ${OUT}/bad)

# 3. The smoke run.
execute_process(COMMAND ${EXE} --smoke --threads 2 --out ${OUT}/run
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "vga_lm --smoke output:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "vga_lm --smoke failed with ${rc}")
endif()
expect_output_has("${out}" "built-in smoke-test sentences" "estimate for the whole matrix" "summary \\(mean")
expect_same_batches("${out}")
# Every run starts from the vanilla init of its seed (or the vanilla final): all shared tensors copied.
expect_paired_starts("${out}" 18)  # 9 variants x 2 families

# 4. Run directories: result.json with finite final metrics, metrics.csv with one row per evaluation.
set(metrics val_ppl max_inf_norm avg_kurtosis attn_first w8a8_ppl w8a8_delta_ppl w8a8_proj_delta_ppl)
foreach(f IN LISTS families)
  foreach(v IN LISTS pretrain retrofit)
    set(dir "${OUT}/run/${f}/runs/${v}/seed0")
    foreach(file result.json metrics.csv metrics.jsonl final.safetensors)
      if(NOT EXISTS "${dir}/${file}")
        message(FATAL_ERROR "missing ${dir}/${file}")
      endif()
    endforeach()
    file(READ "${dir}/result.json" json)
    expect_final_metrics("${json}" "${dir}/result.json" ${metrics})
    file(STRINGS "${dir}/metrics.csv" lines)
    list(LENGTH lines n)
    if(v IN_LIST pretrain)
      set(want 4)  # header + steps 0, 3, 6
    else()
      set(want 5)  # header + steps 0..3
    endif()
    if(NOT n EQUAL want)
      message(FATAL_ERROR "${dir}/metrics.csv: ${n} lines, expected ${want}")
    endif()
  endforeach()
  foreach(v IN LISTS pretrain retrofit)
    if(NOT EXISTS "${OUT}/run/${f}/dynamics_${v}.csv")
      message(FATAL_ERROR "missing ${OUT}/run/${f}/dynamics_${v}.csv")
    endif()
  endforeach()
endforeach()

# 5. summary.md: both families, the retrofit table, the claims; the retrofit starts exactly at
#    the vanilla model (W_O doubled for the gate's 0.5).
file(READ "${OUT}/run/summary.md" md)
foreach(pattern "## Encoder" "## Decoder" "### Retrofit" "### Claims" "reproduced|partly")
  if(NOT md MATCHES "${pattern}")
    message(FATAL_ERROR "summary.md lacks '${pattern}'")
  endif()
endforeach()
string(REGEX MATCHALL "step-0 perplexity [0-9.]+ vs the vanilla final [0-9.]+" checks "${md}")
list(LENGTH checks n_checks)
if(NOT n_checks EQUAL 2)
  message(FATAL_ERROR "summary.md: expected 2 retrofit start checks, found ${n_checks}")
endif()
foreach(c IN LISTS checks)
  string(REGEX MATCH "perplexity ([0-9.]+) vs the vanilla final ([0-9.]+)" _ "${c}")
  if(NOT CMAKE_MATCH_1 STREQUAL CMAKE_MATCH_2)
    message(FATAL_ERROR "the retrofit does not start at the vanilla model: ${c}")
  endif()
endforeach()

# 6. The same command again is refused; --resume reads every finished run back.
expect_refusal_then_resume(18 ${EXE} --smoke --threads 2 --out ${OUT}/run)

# 7. --preset sink: the sink-forming setting, with the command line and --smoke winning.
expect_sink_preset(${EXE} ${OUT}/preset decoder/run.json --family decoder --variants vanilla)

# 8. BERT's layout: the post-LN encoder with a [SEP] after every sentence. The checkpoint says
#    post-norm; the runs report the [SEP] attention and where the largest activations sit.
execute_process(COMMAND ${EXE} --smoke --threads 2 --family encoder --block post --sep --variants vanilla,vga
  --out ${OUT}/post RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "vga_lm --block post --sep failed with ${rc}:\n${out}${err}")
endif()
expect_paired_starts("${out}" 2)
foreach(v vanilla vga)
  set(dir "${OUT}/post/encoder/runs/${v}/seed0")
  file(READ "${dir}/result.json" json)
  expect_final_metrics("${json}" "${dir}/result.json" attn_sep sep_share max_abs_first max_abs_sep max_abs_word)
  file(STRINGS "${dir}/final.safetensors" block REGEX "post_norm" LIMIT_COUNT 1)
  if(NOT block)
    message(FATAL_ERROR "${dir}/final.safetensors does not describe a post-norm model")
  endif()
endforeach()
file(READ "${OUT}/post/summary.md" md)
foreach(pattern "Post-LN \\(BERT's layout\\)" "a \\[SEP\\] after every sentence" "attn→\\[SEP\\] \\(uniform\\)"
        "largest activations sit on \\[SEP\\]")
  if(NOT md MATCHES "${pattern}")
    message(FATAL_ERROR "summary.md of the post-LN run lacks '${pattern}'")
  endif()
endforeach()
message(STATUS "vga_lm smoke test passed")
