# Weight quantizers, mix rules, imatrix files and whole-file quantization (src/quant).
triad_gtest(quant_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/quant_test.cpp
  DEPS triad_quant triad_gguf triad_kernels)
