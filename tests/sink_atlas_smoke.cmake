# Smoke test of examples/sink_atlas: the --smoke preset (a tiny decoder, a few steps of every one
# of the 20 variants, on built-in sentences: no network, no corpus), then
# tests/sink_atlas_smoke/check.cmake checks the outputs, every diagnostic of the atlas, the
# paired starts, --resume and the error messages.
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME sink_atlas_smoke
    COMMAND ${CMAKE_COMMAND}
      -DEXE=$<TARGET_FILE:sink_atlas>
      -DOUT=${CMAKE_CURRENT_BINARY_DIR}/sink_atlas_smoke
      -P ${CMAKE_CURRENT_SOURCE_DIR}/sink_atlas_smoke/check.cmake)
  set_tests_properties(sink_atlas_smoke PROPERTIES LABELS example TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
# scripts/keep-runs.sh, which keeps the atlas' finished runs in the repository: two parts kept in
# one folder and summarised from it by --resume (tests/scripts/keep_runs.sh).
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME keep_runs COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/keep_runs.sh ${PROJECT_SOURCE_DIR}
                                  $<TARGET_FILE:sink_atlas>)
  set_tests_properties(keep_runs PROPERTIES LABELS example TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
