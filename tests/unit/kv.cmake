triad_gtest(kv_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/kv_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/unit/kv_random_test.cpp
  DEPS triad_kv)
