# Weight dequantization (bit-exact against PyPI gguf.quants) and the memory-bandwidth probe.
#
# dequant_vectors_gen is a ctest fixture step: it runs gen_dequant_vectors.py into
# ${CMAKE_CURRENT_BINARY_DIR}/dequant_vectors; dequant_test reads them from there (passed as
# TRIAD_DEQUANT_VECTORS). Without the gguf package the generator writes a SKIPPED note and the
# vector tests skip with its message.
set(TRIAD_DEQUANT_VECTORS_DIR ${CMAKE_CURRENT_BINARY_DIR}/dequant_vectors)
add_test(NAME dequant_vectors_gen
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/kernels/gen_dequant_vectors.py
          ${TRIAD_DEQUANT_VECTORS_DIR})
set_tests_properties(dequant_vectors_gen PROPERTIES FIXTURES_SETUP dequant_vectors)

triad_gtest(dequant_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/kernels/dequant_test.cpp
  DEPS triad_kernels)
set_property(TEST dequant_test APPEND PROPERTY ENVIRONMENT
  "TRIAD_DEQUANT_VECTORS=${TRIAD_DEQUANT_VECTORS_DIR}")
set_tests_properties(dequant_test PROPERTIES FIXTURES_REQUIRED dequant_vectors)

triad_gtest(membw_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/kernels/membw_test.cpp
  DEPS triad_kernels)
