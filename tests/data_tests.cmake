# test_data_fashion_mnist also reads Debian's gzipped Fashion-MNIST directly when zlib is present.
if(TARGET test_data_fashion_mnist)
  find_package(ZLIB QUIET)
  if(ZLIB_FOUND)
    target_link_libraries(test_data_fashion_mnist PRIVATE ZLIB::ZLIB)
    target_compile_definitions(test_data_fashion_mnist PRIVATE SINKLAB_WITH_ZLIB=1)
  endif()
endif()
