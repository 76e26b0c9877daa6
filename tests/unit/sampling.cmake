# Unit tests for src/sampling (SamplingParams validation, Rng, Sampler pipeline and statistics).
triad_gtest(sampling_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sampling_test.cpp DEPS triad_sampling)
