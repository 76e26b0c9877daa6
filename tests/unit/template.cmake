# Template engine unit tests: limits and hostile input (also under ASan/UBSan).
triad_gtest(template_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/template_test.cpp DEPS triad_template)
