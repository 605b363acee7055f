# Smoke test of examples/sink_toys: the --smoke preset (every variant of the three parts for a few
# steps), then a tiny but real run of each toy whose signatures must come out (a NOP sink with a
# near-zero value and a W_Q W_Kᵀ spike; a broadcast hub with a normal value and a rank-one update),
# all checked by tests/sink_toys_smoke/check.cmake. Seconds in all.
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME sink_toys_smoke
    COMMAND ${CMAKE_COMMAND}
      -DEXE=$<TARGET_FILE:sink_toys>
      -DOUT=${CMAKE_CURRENT_BINARY_DIR}/sink_toys_smoke
      -P ${CMAKE_CURRENT_SOURCE_DIR}/sink_toys_smoke/check.cmake)
  set_tests_properties(sink_toys_smoke PROPERTIES LABELS example TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
