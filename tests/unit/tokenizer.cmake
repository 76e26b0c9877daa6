# Tokenizer tests: llama.cpp's tokenizer vectors for every vocabulary in the test data, plus unit
# tests of the SPM / BPE / WordPiece details, special tokens, decoding and malformed metadata.
triad_gtest(tokenizer_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/tokenizer_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/tokenizer_unit_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/tokenizer_model_test.cpp
  DEPS triad_tokenizer triad_grammar triad_gguf Threads::Threads)
