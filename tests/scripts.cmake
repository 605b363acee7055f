# The data and setup scripts fail loudly and leave nothing half-done behind.
add_test(NAME fetch_data_failures COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/fetch_data_failures.sh ${PROJECT_SOURCE_DIR})
