# Paged attention and the K/V row stores (kernels/paged_attention.h): every ISA level the CPU
# supports against the scalar reference attention, bitwise batch / thread / chunk invariance, and
# the f16 / bf16 / q8_0 row conversions.
triad_gtest(paged_attention_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/paged_attention_test.cpp
  DEPS triad_kernels)
