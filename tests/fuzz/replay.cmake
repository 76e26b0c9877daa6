# Normal (non-fuzz) builds: gguf_fuzz_replay runs the fuzz target over the checked-in seed
# corpus (valid files, malformed files and minimized past crashes) as a ctest regression.
# Included by tests/CMakeLists.txt (which globs tests/*/*.cmake).
add_executable(gguf_fuzz_replay
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/gguf_fuzz.cpp)
target_compile_options(gguf_fuzz_replay PRIVATE ${TRIAD_WARNINGS})
target_link_libraries(gguf_fuzz_replay PRIVATE triad_gguf)
add_test(NAME gguf_fuzz_replay COMMAND gguf_fuzz_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/gguf)
