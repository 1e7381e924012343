# README.md's stand-in NVML example builds flink-gpu-fake-nvml-full in build/, which `make run`
# configures without the tests: configure a tree as `make run` does (the Makefile's CONFIGURE
# with -DBUILD_TESTING=OFF -DFLINK_GPU_BENCH=OFF) and check that the tree has that target.
#
# cmake -DSOURCE_DIR=… -DWORK_DIR=… -DGENERATOR=… [-DMAKE_PROGRAM=…] -DCXX_COMPILER=…
#       -P StandInInRunTree.cmake
foreach(variable SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "StandInInRunTree.cmake: -D${variable}=… is missing")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
set(make_program)
if(MAKE_PROGRAM)
  set(make_program "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}" ${make_program}
          "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
          -DFLINK_GPU_WERROR=ON -DBUILD_TESTING=OFF -DFLINK_GPU_BENCH=OFF
  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "configuring a tree as `make run` does failed (${status}):\n${output}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}" --target help
  RESULT_VARIABLE status OUTPUT_VARIABLE targets ERROR_VARIABLE targets)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --build ${WORK_DIR} --target help failed (${status}):\n${targets}")
endif()
foreach(target flink-gpu nvidia-gpu-discovery flink-gpu-fake-nvml-full)
  if(NOT targets MATCHES "(^|[ \n])${target}([ \n:]|$)")
    message(FATAL_ERROR "a tree configured as `make run` configures build/ has no target ${target}, "
                        "which README.md tells to build there:\n${targets}")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
message(STATUS "a tree configured as `make run` does has flink-gpu-fake-nvml-full")
