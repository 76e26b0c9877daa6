# Server pieces that need no model (the HTTP behaviour is tested end to end in tests/server).
triad_gtest(stop_matcher_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/stop_matcher_test.cpp DEPS triad_server)

triad_gtest(tool_calls_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/tool_calls_test.cpp DEPS triad_server triad_grammar)
triad_gtest(reasoning_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/reasoning_test.cpp DEPS triad_server)
triad_gtest(metrics_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics_test.cpp DEPS triad_server)
