# Smoke test of examples/sink_emergence: the --smoke preset (a tiny decoder, a few steps of four
# cells that change every kind of factor, on built-in sentences: no network, no corpus), then
# tests/sink_emergence_smoke/check.cmake checks the outputs, the per-head measures, the cells'
# token budgets, --resume and the error messages.
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME sink_emergence_smoke
    COMMAND ${CMAKE_COMMAND}
      -DEXE=$<TARGET_FILE:sink_emergence>
      -DOUT=${CMAKE_CURRENT_BINARY_DIR}/sink_emergence_smoke
      -P ${CMAKE_CURRENT_SOURCE_DIR}/sink_emergence_smoke/check.cmake)
  set_tests_properties(sink_emergence_smoke PROPERTIES LABELS example TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
