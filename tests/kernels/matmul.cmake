# Matmul kernels: every ISA level the CPU supports vs matmul_ref, and matmul_ref vs the exact
# product of the dequantized weights (tests/kernels/matmul_test.cpp).
triad_gtest(matmul_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/kernels/matmul_test.cpp
  DEPS triad_kernels)
