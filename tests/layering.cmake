# The include graph obeys the layering (scripts/check-layering.sh), and the check itself fails
# on a header that breaks it (a policy header including nn/, written to a scratch tree).
add_test(NAME layering COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layering.sh ${PROJECT_SOURCE_DIR})

set(_bad ${CMAKE_CURRENT_BINARY_DIR}/layering_violation)
file(WRITE ${_bad}/include/sinklab/policy/bad.hpp "#include \"sinklab/nn/attention.hpp\"\n")
add_test(NAME layering_catches_violation COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check-layering.sh ${_bad})
set_tests_properties(layering_catches_violation PROPERTIES WILL_FAIL TRUE)
