# Smoke test of examples/gradient_sinks: the --smoke preset (a tiny decoder, a few steps of the
# four variants on built-in sentences: no network, no Brown corpus), then
# tests/gradient_sinks_smoke/check.cmake checks the outputs, the paired starts, the gradient and
# flow measures, V-scale's constants, --resume and the error messages.
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME gradient_sinks_smoke
    COMMAND ${CMAKE_COMMAND}
      -DEXE=$<TARGET_FILE:gradient_sinks>
      -DOUT=${CMAKE_CURRENT_BINARY_DIR}/gradient_sinks_smoke
      -P ${CMAKE_CURRENT_SOURCE_DIR}/gradient_sinks_smoke/check.cmake)
  set_tests_properties(gradient_sinks_smoke PROPERTIES LABELS example TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
