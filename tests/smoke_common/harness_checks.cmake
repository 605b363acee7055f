# Checks every reproduction's smoke test makes of what the experiment harness promises
# (include()d by tests/<example>_smoke/check.cmake, run with cmake -P).

# Without the Brown corpus (and without --smoke) the program stops and says how to fetch it.
function(expect_corpus_hint exe out_dir)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env SINKLAB_DATA=${out_dir}/no-data ${exe} --steps 1 --out ${out_dir}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "fetch-data.sh brown")
    message(FATAL_ERROR "without the Brown corpus expected a failure naming scripts/fetch-data.sh, got rc=${rc}\n${out}\n${err}")
  endif()
endfunction()

# `output` holds one "init: N/N shared tensors identical" line per run, `count` in all, each
# with every shared tensor copied from the reference (N/N, N > 0).
function(expect_paired_starts output count)
  string(REGEX MATCHALL "init: [0-9]+/[0-9]+ shared tensors identical" shared "${output}")
  list(LENGTH shared n)
  if(NOT n EQUAL count)
    message(FATAL_ERROR "expected ${count} 'init: N/N shared tensors identical' lines (one per run), found ${n}")
  endif()
  foreach(line IN LISTS shared)
    string(REGEX MATCH "([0-9]+)/([0-9]+)" _ "${line}")
    if(NOT CMAKE_MATCH_1 EQUAL CMAKE_MATCH_2 OR CMAKE_MATCH_1 EQUAL 0)
      message(FATAL_ERROR "a run did not start from all the reference weights: ${line}")
    endif()
  endforeach()
endfunction()

# After a finished matrix, the command (ARGN) again is refused; with --resume it reads all
# `count` runs back instead of training them.
function(expect_refusal_then_resume count)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "is not empty; pass --resume")
    message(FATAL_ERROR "a second run into a full --out must refuse, got rc=${rc}\n${out}\n${err}")
  endif()
  execute_process(COMMAND ${ARGN} --resume --no-plots RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX MATCHALL "finished earlier" skipped "${out}")
  list(LENGTH skipped n)
  if(NOT rc EQUAL 0 OR NOT n EQUAL count)
    message(FATAL_ERROR "--resume of a finished matrix should read back ${count} runs, read ${n} (rc=${rc})\n${out}\n${err}")
  endif()
endfunction()

# --summarize over a finished matrix in `dir` (the command, ARGN, writes there): it reads back the
# `count` runs of seed 0, names the runs of seed 99 as not finished, trains nothing and leaves
# run.json as it was.
function(expect_summarize dir count)
  file(READ "${dir}/run.json" before)
  execute_process(COMMAND ${ARGN} --summarize --no-plots --seeds 0,99 RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  string(REGEX MATCHALL "finished earlier" read_back "${out}")
  # (the match leaves out "[variant s99]": a bracket in a list item would join the items)
  string(REGEX MATCHALL "not finished in [^\n]*: left out of the summaries" left_out "${out}")
  list(LENGTH read_back n)
  list(LENGTH left_out m)
  file(READ "${dir}/run.json" after)
  file(GLOB started "${dir}/runs/*/seed99")
  if(NOT rc EQUAL 0 OR NOT n EQUAL count OR NOT m EQUAL count OR NOT before STREQUAL after OR started)
    message(FATAL_ERROR "--summarize should read back ${count} runs (read ${n}), name ${count} unfinished ones (named "
                        "${m}), start none (started: ${started}) and leave run.json as it was; rc=${rc}\n${out}\n${err}")
  endif()
endfunction()

# Stops unless every named variable was passed with -D<name>=...
function(require_defined)
  foreach(v IN LISTS ARGN)
    if(NOT DEFINED ${v})
      message(FATAL_ERROR "check.cmake: pass -D${v}=...")
    endif()
  endforeach()
endfunction()

# The command (ARGN) must fail with a message on stderr matching `pattern`; `what` says why.
function(expect_failure pattern what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: expected a failure matching '${pattern}', got rc=${rc}\n${out}\n${err}")
  endif()
endfunction()

# The matrix's check after each seed found no variant that saw other batches.
function(expect_same_batches output)
  if(output MATCHES "WARNING")
    message(FATAL_ERROR "the variants of a seed did not see the same batches")
  endif()
endfunction()

# Every named metric of `json` (a result.json's text, read from `file`) is a finite number in "final".
function(expect_final_metrics json file)
  foreach(m IN LISTS ARGN)
    string(JSON x ERROR_VARIABLE jerr GET "${json}" final ${m})
    if(jerr OR NOT x MATCHES "^-?[0-9]")
      message(FATAL_ERROR "${file}: final ${m} is '${x}' ${jerr}")
    endif()
  endforeach()
endfunction()

# A finished run directory holds its result, its metrics (CSV and JSONL) and the final weights.
function(expect_run_files dir)
  foreach(file result.json metrics.csv metrics.jsonl final.safetensors)
    if(NOT EXISTS "${dir}/${file}")
      message(FATAL_ERROR "missing ${dir}/${file}")
    endif()
  endforeach()
endfunction()

# The program's output names each of the given patterns (regular expressions).
function(expect_output_has output)
  foreach(pattern IN LISTS ARGN)
    if(NOT output MATCHES "${pattern}")
      message(FATAL_ERROR "the output lacks '${pattern}'")
    endif()
  endforeach()
endfunction()

# --preset sink (examples/common/sink_preset.hpp) sets the sink-forming setting where the command
# line did not: under --smoke the run is still tiny, but run.json records Gu's init and the flag
# given (--min-lr-ratio 0.5) instead of the preset's constant rate; an unknown preset is refused.
# `run_json`: its place under the run's --out; ARGN: flags that keep the run short (a cheap variant).
function(expect_sink_preset exe out_dir run_json)
  expect_failure("--preset: nope not in \\{sink\\}" "an unknown preset" ${exe} --smoke --preset nope --out ${out_dir}/bad)
  execute_process(COMMAND ${exe} --smoke --preset sink --min-lr-ratio 0.5 --steps 2 --no-plots --out ${out_dir}/run ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "preset sink: ")
    message(FATAL_ERROR "--preset sink --smoke failed (rc=${rc}) or did not say it applied the preset\n${out}\n${err}")
  endif()
  file(READ "${out_dir}/run/${run_json}" json)
  string(JSON init GET "${json}" settings init)
  string(JSON ratio GET "${json}" settings min_lr_ratio)
  if(NOT init STREQUAL "gu" OR NOT ratio STREQUAL "0.5")
    message(FATAL_ERROR "--preset sink --min-lr-ratio 0.5: expected init gu and min_lr_ratio 0.5 in run.json, got "
                        "init ${init}, min_lr_ratio ${ratio}")
  endif()
endfunction()
