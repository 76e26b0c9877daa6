# Element-wise ops and attention: every ISA level the CPU supports vs the scalar references.
triad_gtest(ops_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/ops_test.cpp DEPS triad_kernels)
