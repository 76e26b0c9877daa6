# The serving engine on real models (stories260K from the shared test data, and the synthetic
# gemma3 with a sliding window written by the `synthetic_models` fixture): batching, chunked
# prefill, prefix caching and preemption equivalence, cancel/finish/drain, randomized stress.
set(TRIAD_SYNTHETIC_DIR ${CMAKE_BINARY_DIR}/synthetic-models)
add_test(NAME synthetic_models
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/reference/make_synthetic.py
          ${TRIAD_SYNTHETIC_DIR})
set_tests_properties(synthetic_models PROPERTIES FIXTURES_SETUP synthetic_models LABELS cpp)

triad_gtest(engine_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_test.cpp
  DEPS triad_engine triad_model triad_grammar triad_tokenizer)
target_compile_definitions(engine_test PRIVATE TRIAD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
set_tests_properties(engine_test PROPERTIES FIXTURES_REQUIRED synthetic_models TIMEOUT 1200)
set_property(TEST engine_test APPEND PROPERTY ENVIRONMENT "TRIAD_SYNTHETIC_DIR=${TRIAD_SYNTHETIC_DIR}")
