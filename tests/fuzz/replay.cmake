# Normal (non-fuzz) builds: gguf_fuzz_replay runs the fuzz target over the checked-in seed
# corpus (valid files, malformed files and minimized past crashes) as a ctest regression.
# Included by tests/CMakeLists.txt (which globs tests/*/*.cmake).
add_executable(gguf_fuzz_replay
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/gguf_fuzz.cpp)
target_compile_options(gguf_fuzz_replay PRIVATE ${TRIAD_WARNINGS})
target_link_libraries(gguf_fuzz_replay PRIVATE triad_gguf)
add_test(NAME gguf_fuzz_replay COMMAND gguf_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/gguf)

# The tokenizers over GGUF vocabularies (tokenizer seeds, and the GGUF seeds too).
add_executable(tokenizer_fuzz_replay
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/tokenizer_fuzz.cpp)
target_compile_options(tokenizer_fuzz_replay PRIVATE ${TRIAD_WARNINGS})
target_link_libraries(tokenizer_fuzz_replay PRIVATE triad_tokenizer triad_gguf)
add_test(NAME tokenizer_fuzz_replay COMMAND tokenizer_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/tokenizer
         ${CMAKE_CURRENT_LIST_DIR}/corpus/gguf)
set_tests_properties(tokenizer_fuzz_replay PROPERTIES LABELS cpp)  # also under the sanitizers (scripts/test.sh)

# The template engine's corpus, plus the real chat templates of the shared test data when they
# are there (read in place, never copied into the repository).
add_executable(template_fuzz_replay
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/template_fuzz.cpp)
target_compile_options(template_fuzz_replay PRIVATE ${TRIAD_WARNINGS})
target_link_libraries(template_fuzz_replay PRIVATE triad_template)
set(TRIAD_TEMPLATE_REPLAY_INPUTS ${CMAKE_CURRENT_LIST_DIR}/corpus/template)
if(IS_DIRECTORY "${TRIAD_TESTDATA}/templates")
  list(APPEND TRIAD_TEMPLATE_REPLAY_INPUTS "${TRIAD_TESTDATA}/templates")
endif()
add_test(NAME template_fuzz_replay COMMAND template_fuzz_replay ${TRIAD_TEMPLATE_REPLAY_INPUTS})
set_tests_properties(template_fuzz_replay PROPERTIES LABELS cpp)

# The server's request parsing.
add_executable(request_fuzz_replay
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/request_fuzz.cpp)
target_compile_options(request_fuzz_replay PRIVATE ${TRIAD_WARNINGS})
target_link_libraries(request_fuzz_replay PRIVATE triad_server)
add_test(NAME request_fuzz_replay COMMAND request_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/request)
set_tests_properties(request_fuzz_replay PROPERTIES LABELS cpp)

# Grammars.
add_executable(grammar_fuzz_replay
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/grammar_fuzz.cpp)
target_compile_options(grammar_fuzz_replay PRIVATE ${TRIAD_WARNINGS})
target_link_libraries(grammar_fuzz_replay PRIVATE triad_grammar)
add_test(NAME grammar_fuzz_replay COMMAND grammar_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/grammar)
set_tests_properties(grammar_fuzz_replay PROPERTIES LABELS cpp)

# JSON Schemas and tool-call outputs.
add_executable(schema_fuzz_replay
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/schema_fuzz.cpp)
target_compile_options(schema_fuzz_replay PRIVATE ${TRIAD_WARNINGS})
target_link_libraries(schema_fuzz_replay PRIVATE triad_grammar)
add_test(NAME schema_fuzz_replay COMMAND schema_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/schema)
set_tests_properties(schema_fuzz_replay PROPERTIES LABELS cpp)

add_executable(tool_fuzz_replay
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/tool_fuzz.cpp)
target_compile_options(tool_fuzz_replay PRIVATE ${TRIAD_WARNINGS})
target_link_libraries(tool_fuzz_replay PRIVATE triad_server)
add_test(NAME tool_fuzz_replay COMMAND tool_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/tool)
set_tests_properties(tool_fuzz_replay PROPERTIES LABELS cpp)

# imatrix files.
add_executable(imatrix_fuzz_replay
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/imatrix_fuzz.cpp)
target_compile_options(imatrix_fuzz_replay PRIVATE ${TRIAD_WARNINGS})
target_link_libraries(imatrix_fuzz_replay PRIVATE triad_quant)
add_test(NAME imatrix_fuzz_replay COMMAND imatrix_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/imatrix)
set_tests_properties(imatrix_fuzz_replay PROPERTIES LABELS cpp)

# The safetensors reader.
add_executable(safetensors_fuzz_replay
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/safetensors_fuzz.cpp)
target_compile_options(safetensors_fuzz_replay PRIVATE ${TRIAD_WARNINGS})
target_link_libraries(safetensors_fuzz_replay PRIVATE triad_safetensors)
add_test(NAME safetensors_fuzz_replay COMMAND safetensors_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/safetensors)
set_tests_properties(safetensors_fuzz_replay PROPERTIES LABELS cpp)
