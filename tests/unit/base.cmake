triad_gtest(base_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/base_test.cpp
  DEPS triad_tensor triad_base)
