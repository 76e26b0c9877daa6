# Unit tests for src/sched (scheduler with a fake paged-K/V model; randomized stress included).
triad_gtest(sched_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sched_test.cpp DEPS triad_sched)
