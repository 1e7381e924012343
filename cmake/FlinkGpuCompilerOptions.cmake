# Warnings for the project's own targets, and the sanitizer builds.

function(flink_gpu_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-qual -Wformat=2)
  if(FLINK_GPU_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# The sanitizer trees compile for build time: -O0, where a tree's code costs two to three times
# as long to compile at -O1. Only the code their tests spend their time in is optimised, under
# ASan+UBSan alone (flink_gpu_hot_code): the programs the tests start run for milliseconds a
# process, and the TSan suite's tests wait for the processes and time-outs they test. Measured on
# a 2-core VM, each tree built alone (docs/benchmarks.md#make-test): the ASan+UBSan tree with its
# programs, tools and stand-in NVML at -O0 took 350 CPU-seconds to build instead of 411 and its
# tests 145 instead of 137; the TSan tree at -O0, 127 instead of 179, its tests 7 instead of 6.
if(FLINK_GPU_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -O0)
  add_link_options(-fsanitize=address,undefined)
endif()
if(FLINK_GPU_TSAN)
  if(FLINK_GPU_SANITIZE)
    message(FATAL_ERROR "FLINK_GPU_TSAN and FLINK_GPU_SANITIZE exclude each other: ThreadSanitizer "
                        "cannot run beside AddressSanitizer; use two build folders")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -O0)
  add_link_options(-fsanitize=thread)
endif()

# flink_gpu_hot_code(<target>): code the tests spend seconds in (flink-gpu-core: the records, the
# files beside them, liveness; the simulation; the fuzzers, whose runs count executions), compiled
# at -O1 under ASan+UBSan, as AddressSanitizer's documentation advises for speed, where the rest
# of that tree is at -O0: with all of the library at -O0 the tree's tests took 238 CPU-seconds
# instead of 145 (the simulation's longest case 45 s instead of 8), for 85 build-seconds saved.
# The rest of the library (flink-gpu-core-cold, flink-gpu-flink), which a test runs about once a
# process, compiles in 32-35 CPU-seconds at -O0 against 84-92 at -O1, for 4-23 more in the tests
# (median 16; docs/benchmarks.md#make-test). Elsewhere it changes nothing.
function(flink_gpu_hot_code target)
  if(FLINK_GPU_SANITIZE)
    target_compile_options(${target} PRIVATE -O1)
  endif()
endfunction()
# A sanitizer's report names files and lines, which line tables alone give: the full debug
# information (types, variables) of the Debug build type's -g only cost compile time.
if(FLINK_GPU_SANITIZE OR FLINK_GPU_TSAN)
  add_compile_options($<$<COMPILE_LANG_AND_ID:CXX,Clang>:-gline-tables-only>)
endif()
# The sanitizers need the usual dynamic C++ runtime: programs that link libstdc++ statically
# (cli/, plugins/) do so only without them.
if(FLINK_GPU_SANITIZE OR FLINK_GPU_TSAN)
  set(FLINK_GPU_ANY_SANITIZER ON)
else()
  set(FLINK_GPU_ANY_SANITIZER OFF)
endif()
