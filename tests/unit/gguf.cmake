# GGUF reader, writer and inspect tests (tests/unit/gguf_*.cpp).
triad_gtest(gguf_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/gguf_test.cpp ${CMAKE_CURRENT_LIST_DIR}/gguf_malformed_test.cpp
  DEPS triad_gguf)
