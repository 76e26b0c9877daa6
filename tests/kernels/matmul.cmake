# Matmul kernels: every ISA level the CPU supports vs matmul_ref, and matmul_ref vs the exact
# product of the dequantized weights (tests/kernels/matmul_test.cpp).
triad_gtest(matmul_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/kernels/matmul_test.cpp
  DEPS triad_kernels)

# The ISA objects define no weak code the linker could keep for baseline callers
# (src/kernels/isa_error.h). Release builds only: what the shipped binary is made of. Sanitizer
# builds (-O2 with instrumentation) leave some inline helpers out of line (store_tile, the lane
# packers): weak, but each defined by one ISA's objects only.
if(NOT TRIAD_SANITIZE)
  add_test(NAME isa_objects_test
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/kernels/isa_objects_test.py
            $<TARGET_OBJECTS:triad_kernels>)
  set_tests_properties(isa_objects_test PROPERTIES LABELS python)
endif()
