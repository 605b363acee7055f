# Every example refuses bad input with a message and a non-zero exit: missing, empty and
# one-character text files, bad flag values, a head count that does not divide the width
# (tests/scripts/examples_bad_input.sh).
if(SINKLAB_BUILD_EXAMPLES)
  add_test(NAME examples_bad_input
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/examples_bad_input.sh ${CMAKE_BINARY_DIR}/examples)
  set_tests_properties(examples_bad_input PROPERTIES LABELS example TIMEOUT 900 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
