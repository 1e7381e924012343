# Installs the build into a fresh prefix and uses it the way a user would: checks the layout,
# builds examples/consumer against it through find_package(FlinkGpu), runs that program, and runs
# the installed flink-gpu (which must find the installed library and discovery script on its own).
#
# Run by ctest (see CMakeLists.txt here), after the build:
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... [-DCONFIG=...] -DGENERATOR=...
#         -DMAKE_PROGRAM=... -DCXX_COMPILER=... -DCXX_FLAGS=... -DEXE_LINKER_FLAGS=...
#         -DBUILD_TYPE=... -DBINDIR=... -DLIBDIR=... -DINCLUDEDIR=... -DPLUGIN_DIR=...
#         -DFIXTURE=<script printing 0,1> -DVERSION=... -P InstallAndConsume.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER BINDIR LIBDIR INCLUDEDIR
            PLUGIN_DIR FIXTURE VERSION)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()
foreach(dir BINDIR LIBDIR INCLUDEDIR)
  # An absolute install dir would escape the test prefix and write into the host.
  if(IS_ABSOLUTE "${${dir}}")
    message(FATAL_ERROR "CMAKE_INSTALL_${dir} is absolute (${${dir}}); this test needs it "
                        "relative to the prefix")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")
set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

# Runs a command; fails the test with its output unless it exits with `expected_exit`. Puts
# stdout in `out_var` (when given).
function(run_checked what expected_exit out_var)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE exit_code
    OUTPUT_VARIABLE stdout
    ERROR_VARIABLE stderr
    TIMEOUT 240)
  if(NOT exit_code STREQUAL "${expected_exit}")
    list(JOIN ARGN " " shown)
    message(FATAL_ERROR "${what} failed (exit '${exit_code}', expected ${expected_exit}):\n"
                        "  ${shown}\n--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}")
  endif()
  if(out_var)
    set(${out_var} "${stdout}" PARENT_SCOPE)
  endif()
endfunction()

function(expect_output what actual expected)
  if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "${what}: expected\n[${expected}]\ngot\n[${actual}]")
  endif()
endfunction()

# --- install ---------------------------------------------------------------
# A leftover prefix could hide a file the install no longer writes.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
run_checked("cmake --install" 0 "" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}"
            ${config_args})

# --- layout ----------------------------------------------------------------
foreach(path
    "${BINDIR}/flink-gpu"
    "${LIBDIR}/libflink-external-resource-gpu.so"
    "${INCLUDEDIR}/flink/externalresource/gpu/GPUDriverFactory.h"
    "${LIBDIR}/cmake/FlinkGpu/FlinkGpuConfig.cmake"
    "${LIBDIR}/cmake/FlinkGpu/FlinkGpuConfigVersion.cmake"
    "${PLUGIN_DIR}/nvidia-gpu-discovery.sh"
    "${PLUGIN_DIR}/nvidia-gpu-discovery"
    "${PLUGIN_DIR}/gpu-discovery-common.sh")
  if(NOT EXISTS "${prefix}/${path}")
    message(FATAL_ERROR "the install has no ${path} (prefix ${prefix})")
  endif()
endforeach()
file(GLOB versioned_libraries "${prefix}/${LIBDIR}/libflink-external-resource-gpu.so.*")
if(NOT versioned_libraries)
  message(FATAL_ERROR "the install has no versioned ${LIBDIR}/libflink-external-resource-gpu.so.*")
endif()
# CMake 3.25 has no if(IS_EXECUTABLE); test(1) asks the kernel's view (mode and mount).
foreach(program "${BINDIR}/flink-gpu" "${PLUGIN_DIR}/nvidia-gpu-discovery.sh"
                "${PLUGIN_DIR}/nvidia-gpu-discovery")
  execute_process(COMMAND test -x "${prefix}/${program}" RESULT_VARIABLE not_executable)
  if(not_executable)
    message(FATAL_ERROR "the installed ${program} is not executable")
  endif()
endforeach()
# The exported package must not point back into the build or source tree, or it would only work
# on the machine that built it.
file(GLOB package_files "${prefix}/${LIBDIR}/cmake/FlinkGpu/*.cmake")
foreach(file IN LISTS package_files)
  file(READ "${file}" text)
  foreach(tree "${BUILD_DIR}" "${SOURCE_DIR}")
    string(FIND "${text}" "${tree}" position)
    if(NOT position EQUAL -1)
      message(FATAL_ERROR "${file} mentions ${tree}")
    endif()
  endforeach()
endforeach()

# --- build a consumer against the install ----------------------------------
# Same compiler and flags as the main build: a sanitized library needs a sanitized program.
set(configure_args
  -S "${SOURCE_DIR}/examples/consumer"
  -B "${consumer_build}"
  -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
  "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  # Only the prefix counts: no package registry may point at some other copy.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(BUILD_TYPE)
  list(APPEND configure_args "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
endif()
run_checked("configuring examples/consumer" 0 "" "${CMAKE_COMMAND}" ${configure_args})

file(STRINGS "${consumer_build}/CMakeCache.txt" found_dir REGEX "^FlinkGpu_DIR:")
string(REGEX REPLACE "^[^=]*=" "" found_dir "${found_dir}")
file(REAL_PATH "${found_dir}" found_dir)
file(REAL_PATH "${prefix}/${LIBDIR}/cmake/FlinkGpu" expected_dir)
if(NOT found_dir STREQUAL expected_dir)
  message(FATAL_ERROR "the consumer found FlinkGpu in ${found_dir}, not in ${expected_dir}")
endif()

run_checked("building examples/consumer" 0 "" "${CMAKE_COMMAND}" --build "${consumer_build}"
            ${config_args})

set(consumer "${consumer_build}/consumer")
if(CONFIG AND EXISTS "${consumer_build}/${CONFIG}/consumer")  # multi-config generators
  set(consumer "${consumer_build}/${CONFIG}/consumer")
endif()
set(two_gpus "GPU Device(0)\nGPU Device(1)\n")
run_checked("running the consumer" 0 output "${consumer}" "${FIXTURE}" 2)
expect_output("consumer output" "${output}" "${two_gpus}")

# --- the installed command-line tool ---------------------------------------
set(flink_gpu "${prefix}/${BINDIR}/flink-gpu")
run_checked("flink-gpu --version" 0 output "${flink_gpu}" --version)
expect_output("flink-gpu --version" "${output}" "flink-gpu ${VERSION}\n")

run_checked("flink-gpu discover" 0 output "${flink_gpu}" discover --discovery-script "${FIXTURE}"
            --amount 2)
expect_output("flink-gpu discover" "${output}" "${two_gpus}")

# Without --discovery-script, flink-gpu runs the nvidia-gpu-discovery.sh installed beside it;
# a stand-in nvidia-smi first on PATH makes the answer known, and an NVML library that does not
# exist keeps a GPU host's real one from answering first.
set(fake_bin "${WORK_DIR}/fake-bin")
file(MAKE_DIRECTORY "${fake_bin}")
file(WRITE "${fake_bin}/nvidia-smi" "#!/bin/sh\nprintf '0\\n1\\n2\\n'\n")
file(CHMOD "${fake_bin}/nvidia-smi" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
run_checked("flink-gpu discover with the installed script" 0 output
            "${CMAKE_COMMAND}" -E env "PATH=${fake_bin}:/usr/bin:/bin"
            "FLINK_GPU_NVML_LIBRARY=${WORK_DIR}/no-nvml/libnvidia-ml.so.1"
            "${flink_gpu}" discover --amount 2)
expect_output("flink-gpu discover with the installed script" "${output}" "${two_gpus}")

message(STATUS "install at ${prefix} checked")
