"""No ISA object file defines weak (link-once) code.

The kernels' *_avx2.cpp and *_avx512.cpp files are compiled with ISA flags that the running CPU
may lack; run-time dispatch only calls into them where the CPU has those instructions. A weak
function they define (an inline function or template instantiation: triad::fail, Error's
destructor, a std::string member) is one the linker may keep as the only copy in the program, and
baseline code calling it on a CPU without that ISA would crash with SIGILL. kernels/isa_error.h
says how those files report errors instead.

Usage (from ctest): isa_objects_test.py OBJECT...   (the objects of triad_kernels; files not
named *_avx2.cpp.o / *_avx512.cpp.o are ignored)
"""
import re
import shutil
import subprocess
import sys

ISA_OBJECT = re.compile(r"_(avx2|avx512)\.cpp\.o(bj)?$")


def weak_code(obj):
    """Names of the weak function symbols that obj defines."""
    out = subprocess.run(["nm", "--defined-only", "-C", obj], check=True,
                         capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        # "W": a weak symbol that is not an object, i.e. code. Weak data ("V", "u": vtables,
        # typeinfo, constexpr tables) holds no instructions; a vtable pointing at weak code is
        # caught through that code.
        if len(parts) == 3 and parts[1] == "W":
            found.append(parts[2])
    return found


def main(argv):
    if shutil.which("nm") is None:
        print("isa_objects_test: nm (binutils) not found", file=sys.stderr)
        return 1
    # ctest passes $<TARGET_OBJECTS:...> as one ';'-separated argument.
    objects = [o for a in argv for o in a.split(";") if ISA_OBJECT.search(o)]
    if not objects:
        print("isa_objects_test: no *_avx2/*_avx512 objects among the arguments", file=sys.stderr)
        return 1
    bad = 0
    for obj in objects:
        for name in weak_code(obj):
            print(f"{obj}: defines weak code {name}")
            bad += 1
    if bad:
        print(f"{bad} weak function(s) in ISA objects: see src/kernels/isa_error.h", file=sys.stderr)
        return 1
    print(f"{len(objects)} ISA objects define no weak code")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
