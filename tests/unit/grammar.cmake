# Unit tests for src/grammar (GBNF parsing and checks, the matcher, token masks).
triad_gtest(grammar_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/grammar_test.cpp DEPS triad_grammar triad_tokenizer triad_gguf nlohmann_json::nlohmann_json)
