# Warnings for the project's own targets, and the sanitizer builds.

function(flink_gpu_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-qual -Wformat=2)
  if(FLINK_GPU_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(FLINK_GPU_SANITIZE)
  # -O1, as AddressSanitizer's documentation advises: the tests ran twice as fast as at -O0 (with
  # everything at -O1, the simulation's longest case took 11 s instead of 71 s), and the reports'
  # stacks stay usable. The tests' own code is compiled at -O0 (flink_gpu_test_code,
  # tests/CMakeLists.txt).
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -O1)
  add_link_options(-fsanitize=address,undefined)
endif()
if(FLINK_GPU_TSAN)
  if(FLINK_GPU_SANITIZE)
    message(FATAL_ERROR "FLINK_GPU_TSAN and FLINK_GPU_SANITIZE exclude each other: ThreadSanitizer "
                        "cannot run beside AddressSanitizer; use two build folders")
  endif()
  # -O1, as ThreadSanitizer's documentation advises: much faster than -O0, stacks still usable.
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -O1)
  add_link_options(-fsanitize=thread)
endif()
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
