# Smoke run of examples/compose/ (a few tiny steps of every variant on the built-in text).
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME compose_smoke COMMAND compose --smoke)
  set_tests_properties(compose_smoke PROPERTIES LABELS example TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
