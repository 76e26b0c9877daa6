triad_gtest(model_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/model_test.cpp
  DEPS triad_model triad_gguf)
