# Installs the build the ways a user would and uses it: the dev component into a fresh prefix,
# against which it builds examples/consumer through find_package(FlinkGpu) and runs it; the plugin
# component over a stand-in Flink distribution, whose files it must leave alone and where the
# installed flink-gpu must run and find the discovery script on its own (SELF_CONTAINED; else
# from the whole install); and both at once. It checks each layout, that the binaries are
# stripped, and (with READELF) that the programs need no shared library but glibc's.
#
# Run by ctest (see CMakeLists.txt here), after the build:
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... [-DCONFIG=...] -DGENERATOR=...
#         -DMAKE_PROGRAM=... -DCXX_COMPILER=... -DCXX_FLAGS=... -DEXE_LINKER_FLAGS=...
#         -DBUILD_TYPE=... -DBINDIR=... -DLIBDIR=... -DINCLUDEDIR=... -DPLUGIN_DIR=...
#         -DFIXTURE=<script printing 0,1> -DVERSION=... [-DREADELF=...] [-DSELF_CONTAINED=ON]
#         -P InstallAndConsume.cmake
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

# --- install, by component --------------------------------------------------
# A leftover prefix could hide a file the install no longer writes.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# Every regular file and link under `root`, relative to it, sorted.
function(list_files root out_var)
  file(GLOB_RECURSE found LIST_DIRECTORIES false RELATIVE "${root}" "${root}/*")
  list(SORT found)
  set(${out_var} "${found}" PARENT_SCOPE)
endfunction()

# dev: headers, the shared library, the CMake package; nothing to run.
run_checked("cmake --install --component dev" 0 "" "${CMAKE_COMMAND}" --install "${BUILD_DIR}"
            --component dev --prefix "${prefix}" ${config_args})
foreach(path
    "${LIBDIR}/libflink-external-resource-gpu.so"
    "${INCLUDEDIR}/flink/externalresource/gpu/GPUDriverFactory.h"
    "${LIBDIR}/cmake/FlinkGpu/FlinkGpuConfig.cmake"
    "${LIBDIR}/cmake/FlinkGpu/FlinkGpuConfigVersion.cmake"
    "${LIBDIR}/cmake/FlinkGpu/FlinkGpuTargets.cmake")
  if(NOT EXISTS "${prefix}/${path}")
    message(FATAL_ERROR "the dev component has no ${path} (prefix ${prefix})")
  endif()
endforeach()
file(GLOB versioned_libraries "${prefix}/${LIBDIR}/libflink-external-resource-gpu.so.*")
if(NOT versioned_libraries)
  message(FATAL_ERROR "the install has no versioned ${LIBDIR}/libflink-external-resource-gpu.so.*")
endif()
foreach(absent "${BINDIR}" "${PLUGIN_DIR}")
  if(EXISTS "${prefix}/${absent}")
    message(FATAL_ERROR "the dev component installed ${absent}/, which belongs to plugin")
  endif()
endforeach()
list_files("${prefix}" dev_files)

# plugin: laid over a Flink distribution. Only its files may appear there: no headers, no
# CMake files, no library of ours in Flink's lib/. Flink's own two scripts of the plugin folder,
# which ours replace, are named and kept beside as <name>.flink-distribution.
set(flink_home "${WORK_DIR}/flink-home")
foreach(file "bin/flink" "bin/config.sh" "lib/flink-dist.jar" "conf/config.yaml"
             "plugins/README.txt")
  file(WRITE "${flink_home}/${file}" "part of the stand-in Flink distribution\n")
endforeach()
set(flink_scripts "${PLUGIN_DIR}/nvidia-gpu-discovery.sh" "${PLUGIN_DIR}/gpu-discovery-common.sh")
foreach(script IN LISTS flink_scripts)
  file(WRITE "${flink_home}/${script}" "Flink's own ${script}\n")
endforeach()
list_files("${flink_home}" flink_before)
run_checked("cmake --install --component plugin" 0 install_out "${CMAKE_COMMAND}" --install
            "${BUILD_DIR}" --component plugin --prefix "${flink_home}" ${config_args})
list_files("${flink_home}" flink_after)
foreach(script IN LISTS flink_scripts)
  set(line "-- Replacing ${flink_home}/${script} (Flink's own copy moved to "
           "${flink_home}/${script}.flink-distribution)\n")
  string(CONCAT line ${line})
  string(FIND "${install_out}" "${line}" position)
  if(position EQUAL -1)
    message(FATAL_ERROR "installing over Flink's own ${script} did not say [${line}]:\n"
                        "${install_out}")
  endif()
  file(READ "${flink_home}/${script}.flink-distribution" kept)
  expect_output("Flink's own ${script}, kept" "${kept}" "Flink's own ${script}\n")
  list(APPEND flink_before "${script}.flink-distribution")
  list(REMOVE_ITEM flink_before "${script}")
endforeach()
# Installed again over our own copies: nothing to say.
run_checked("cmake --install --component plugin, again" 0 install_out "${CMAKE_COMMAND}"
            --install "${BUILD_DIR}" --component plugin --prefix "${flink_home}" ${config_args})
if(install_out MATCHES "Replacing")
  message(FATAL_ERROR "installing over our own scripts said it replaced them:\n${install_out}")
endif()
set(plugin_files
  "${BINDIR}/flink-gpu"
  "${PLUGIN_DIR}/amd-gpu-discovery"
  "${PLUGIN_DIR}/amd-gpu-discovery.sh"
  "${PLUGIN_DIR}/gpu-discovery-common.sh"
  "${PLUGIN_DIR}/intel-gpu-discovery"
  "${PLUGIN_DIR}/intel-gpu-discovery.sh"
  "${PLUGIN_DIR}/nvidia-gpu-discovery"
  "${PLUGIN_DIR}/nvidia-gpu-discovery.sh")
set(expected_after ${flink_before} ${plugin_files})
list(SORT expected_after)
if(NOT flink_after STREQUAL expected_after)
  set(added ${flink_after})
  list(REMOVE_ITEM added ${flink_before})
  message(FATAL_ERROR "the plugin component over a Flink distribution added\n  ${added}\n"
                      "expected exactly\n  ${plugin_files}")
endif()

# Without --component: both, and nothing else.
set(full_prefix "${WORK_DIR}/full")
run_checked("cmake --install" 0 "" "${CMAKE_COMMAND}" --install "${BUILD_DIR}"
            --prefix "${full_prefix}" ${config_args})
list_files("${full_prefix}" full_files)
set(expected_full ${dev_files} ${plugin_files})
list(SORT expected_full)
if(NOT full_files STREQUAL expected_full)
  message(FATAL_ERROR "a whole install is not dev + plugin:\n  ${full_files}\nexpected\n"
                      "  ${expected_full}")
endif()

# CMake 3.25 has no if(IS_EXECUTABLE); test(1) asks the kernel's view (mode and mount).
foreach(program "${BINDIR}/flink-gpu" "${PLUGIN_DIR}/nvidia-gpu-discovery.sh"
                "${PLUGIN_DIR}/nvidia-gpu-discovery" "${PLUGIN_DIR}/amd-gpu-discovery.sh"
                "${PLUGIN_DIR}/amd-gpu-discovery" "${PLUGIN_DIR}/intel-gpu-discovery.sh"
                "${PLUGIN_DIR}/intel-gpu-discovery")
  execute_process(COMMAND test -x "${flink_home}/${program}" RESULT_VARIABLE not_executable)
  if(not_executable)
    message(FATAL_ERROR "the installed ${program} is not executable")
  endif()
endforeach()

# The installed binaries are stripped, and the programs load nothing but glibc (so a Flink
# distribution needs no library of ours, nor a C++ runtime, beside them) and carry no RPATH.
if(READELF)
  foreach(binary "${flink_home}/${BINDIR}/flink-gpu" "${flink_home}/${PLUGIN_DIR}/nvidia-gpu-discovery"
                 "${flink_home}/${PLUGIN_DIR}/amd-gpu-discovery"
                 "${flink_home}/${PLUGIN_DIR}/intel-gpu-discovery" ${versioned_libraries})
    run_checked("readelf -S" 0 sections "${READELF}" -S -W "${binary}")
    foreach(section .debug_info .symtab)
      string(FIND "${sections}" " ${section} " position)
      if(NOT position EQUAL -1)
        message(FATAL_ERROR "the installed ${binary} is not stripped: it has ${section}")
      endif()
    endforeach()
  endforeach()
  foreach(program "${BINDIR}/flink-gpu" "${PLUGIN_DIR}/nvidia-gpu-discovery"
                  "${PLUGIN_DIR}/amd-gpu-discovery" "${PLUGIN_DIR}/intel-gpu-discovery")
    run_checked("readelf -d" 0 dynamic "${READELF}" -d -W "${flink_home}/${program}")
    string(REGEX MATCHALL "\\(NEEDED\\)[^[]*\\[[^]]*\\]" needed "${dynamic}")
    foreach(entry IN LISTS needed)
      string(REGEX REPLACE ".*\\[(.*)\\]" "\\1" library "${entry}")
      if(NOT library MATCHES "^(libc|libm|libdl|libpthread|librt|ld-linux[-a-z0-9_.]*)\\.so\\.[0-9]+$")
        message(FATAL_ERROR "the installed ${program} needs ${library}; it should need glibc alone")
      endif()
    endforeach()
    if(dynamic MATCHES "\\((RPATH|RUNPATH)\\)")
      message(FATAL_ERROR "the installed ${program} has an RPATH or RUNPATH:\n${dynamic}")
    endif()
  endforeach()
endif()

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
# From the Flink distribution the plugin component went into: nothing of the dev component there.
# (Not in the sanitizer builds, whose flink-gpu needs the sanitizers' runtime and the shared spdlog
# and yaml-cpp: from the whole install.)
set(flink_gpu "${flink_home}/${BINDIR}/flink-gpu")
if(NOT SELF_CONTAINED)
  set(flink_gpu "${full_prefix}/${BINDIR}/flink-gpu")
endif()
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
