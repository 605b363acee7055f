# Downstream-consumer tests: a tiny project (tests/downstream/) built against sinklab
# (1) after `cmake --install` of this build tree, through find_package(sinklab CONFIG), and
# (2) through add_subdirectory of the source tree. Each is one CTest test driven by
# tests/downstream/run.cmake; label "downstream" (skip them with `ctest -LE downstream`).
foreach(mode install subdirectory)
  add_test(NAME downstream_${mode}
    COMMAND ${CMAKE_COMMAND}
      -DMODE=${mode}
      -DSINKLAB_SOURCE_DIR=${PROJECT_SOURCE_DIR}
      -DSINKLAB_BINARY_DIR=${PROJECT_BINARY_DIR}
      -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/downstream/${mode}
      -DGENERATOR=${CMAKE_GENERATOR}
      -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
      -DCXX_LAUNCHER=${SINKLAB_CCACHE}
      -P ${CMAKE_CURRENT_SOURCE_DIR}/downstream/run.cmake)
  set_tests_properties(downstream_${mode} PROPERTIES LABELS downstream TIMEOUT 900)
endforeach()
