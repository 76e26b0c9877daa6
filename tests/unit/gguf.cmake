# GGUF reader, writer and inspect tests (tests/unit/gguf_*.cpp).
triad_gtest(gguf_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/gguf_test.cpp ${CMAKE_CURRENT_LIST_DIR}/gguf_malformed_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/gguf_value_test.cpp
  DEPS triad_gguf)
# Separate binary: it replaces the global operator new to count allocated bytes.
triad_gtest(gguf_memory_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/gguf_memory_test.cpp
  DEPS triad_gguf)
