# The safetensors reader: files written by PyPI `safetensors` (the checked-in fuzz corpus),
# malformed files, shards and FP8 block scales.
triad_gtest(safetensors_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/safetensors_test.cpp DEPS triad_safetensors)
target_compile_definitions(safetensors_test PRIVATE TRIAD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
