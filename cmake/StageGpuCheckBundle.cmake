# Stages the GPU host check bundle (target gpu-check-bundle, tools/CMakeLists.txt): the folder to
# copy to a GPU host and run there with glibc, libnvidia-ml.so.1, nvidia-smi and a POSIX shell
# alone (docs/gpu-host-check.md):
#
#   gpu-machine-check.sh                     scripts/gpu-machine-check.sh, run with --bundle
#   bin/flink-gpu
#   plugins/external-resource-gpu/           nvidia-gpu-discovery.sh, nvidia-gpu-discovery,
#                                            gpu-discovery-common.sh
#   tools/nvml-vs-nvidia-smi, tools/cuda-mps-client
#   MANIFEST                                 version, commit, the glibc the programs need, files
#
# The programs are stripped copies of the main build's (the build tree keeps its debug info).
# The folder is staged beside BUNDLE_DIR and put in its place only when it is complete and no
# larger than MAX_MIB; otherwise the script fails and leaves no bundle at all, so that no stale
# or oversized one is copied by mistake.
#
#   cmake -DBUNDLE_DIR=… -DMAX_MIB=64 -DFLINK_GPU=… -DDISCOVERY=… -DNVML_VS_NVIDIA_SMI=…
#         -DCUDA_MPS_CLIENT=… -DPLUGIN_SOURCE_DIR=… -DCHECK_SCRIPT=… -DSTRIP=… [-DOBJCOPY=…]
#         [-DREADELF=…] -DVERSION=… [-DSOURCE_DIR=…] -P StageGpuCheckBundle.cmake
#   cmake -DBUNDLE_DIR=… -DSOURCE_DIR=… -DCOMMIT_ONLY=ON -P StageGpuCheckBundle.cmake
#         only the MANIFEST's commit line, made current (the target runs it every time, since a
#         commit that changes none of the bundle's files does not stage it again)
cmake_minimum_required(VERSION 3.25)

# The commit of SOURCE_DIR: `git rev-parse HEAD`, with -dirty when tracked files have changes;
# "unknown" without git or a checkout.
function(source_commit result)
  set(commit "unknown")
  if(SOURCE_DIR)
    find_program(GIT git)
    if(GIT)
      execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse HEAD
                      OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE
                      RESULT_VARIABLE failed ERROR_QUIET)
      if(NOT failed AND NOT head STREQUAL "")
        set(commit "${head}")
        execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" status --porcelain
                                --untracked-files=no
                        OUTPUT_VARIABLE changes RESULT_VARIABLE failed ERROR_QUIET)
        if(NOT failed AND NOT changes STREQUAL "")
          string(APPEND commit "-dirty")
        endif()
      endif()
    endif()
  endif()
  set(${result} "${commit}" PARENT_SCOPE)
endfunction()

if(COMMIT_ONLY)
  set(manifest "${BUNDLE_DIR}/MANIFEST")
  if(NOT EXISTS "${manifest}")
    message(FATAL_ERROR "no ${manifest} to bring up to date")
  endif()
  source_commit(commit)
  file(READ "${manifest}" text)
  string(REGEX REPLACE "\ncommit: [^\n]*\n" "\ncommit: ${commit}\n" updated "${text}")
  # Written only when it changed: MANIFEST is what tells make whether the bundle is up to date.
  if(NOT updated STREQUAL text)
    file(WRITE "${manifest}" "${updated}")
  endif()
  return()
endif()

foreach(required BUNDLE_DIR MAX_MIB FLINK_GPU DISCOVERY NVML_VS_NVIDIA_SMI CUDA_MPS_CLIENT
                 PLUGIN_SOURCE_DIR CHECK_SCRIPT VERSION)
  if(NOT DEFINED ${required} OR "${${required}}" STREQUAL "")
    message(FATAL_ERROR "StageGpuCheckBundle.cmake: ${required} is not set")
  endif()
endforeach()
if(NOT MAX_MIB MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "the bundle's size limit must be a whole number of MiB, not '${MAX_MIB}'")
endif()
if(NOT STRIP)
  message(FATAL_ERROR "no strip program (CMAKE_STRIP): the bundle's programs must be stripped")
endif()

set(staging "${BUNDLE_DIR}.staging")
file(REMOVE_RECURSE "${BUNDLE_DIR}" "${staging}")

set(executable_mode OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
  WORLD_EXECUTE)
set(plain_mode OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
set(plugin_dir plugins/external-resource-gpu)

# stage(<source> <folder in the bundle> <mode list variable>)
function(stage source folder mode)
  if(NOT EXISTS "${source}")
    message(FATAL_ERROR "the bundle needs ${source}, which is not there")
  endif()
  file(MAKE_DIRECTORY "${staging}/${folder}")
  file(COPY "${source}" DESTINATION "${staging}/${folder}" FILE_PERMISSIONS ${${mode}})
endfunction()

stage("${CHECK_SCRIPT}" . executable_mode)
stage("${FLINK_GPU}" bin executable_mode)
stage("${DISCOVERY}" ${plugin_dir} executable_mode)
stage("${PLUGIN_SOURCE_DIR}/nvidia-gpu-discovery.sh" ${plugin_dir} executable_mode)
stage("${PLUGIN_SOURCE_DIR}/gpu-discovery-common.sh" ${plugin_dir} plain_mode)  # sourced
stage("${NVML_VS_NVIDIA_SMI}" tools executable_mode)
stage("${CUDA_MPS_CLIENT}" tools executable_mode)

get_filename_component(flink_gpu_name "${FLINK_GPU}" NAME)
get_filename_component(discovery_name "${DISCOVERY}" NAME)
get_filename_component(tool_name "${NVML_VS_NVIDIA_SMI}" NAME)
get_filename_component(client_name "${CUDA_MPS_CLIENT}" NAME)
set(programs bin/${flink_gpu_name} ${plugin_dir}/${discovery_name} tools/${tool_name}
  tools/${client_name})

# Stripped as `cmake --install --strip` strips, and without .comment (the compilers' version
# strings), as the installed programs are (cmake/FlinkGpuInstall.cmake).
set(glibc_needed "")
foreach(program IN LISTS programs)
  execute_process(COMMAND "${STRIP}" --strip-all "${staging}/${program}" RESULT_VARIABLE failed)
  if(failed)
    message(FATAL_ERROR "${STRIP} could not strip ${program}")
  endif()
  if(OBJCOPY)
    execute_process(COMMAND "${OBJCOPY}" --remove-section=.comment "${staging}/${program}"
                    RESULT_VARIABLE failed)
    if(failed)
      message(FATAL_ERROR "${OBJCOPY} could not drop .comment from ${program}")
    endif()
  endif()
  # The newest glibc symbol version any program needs: the oldest glibc the bundle runs on.
  if(READELF)
    execute_process(COMMAND "${READELF}" --version-info --wide "${staging}/${program}"
                    OUTPUT_VARIABLE versions RESULT_VARIABLE failed)
    if(NOT failed)
      string(REGEX MATCHALL "GLIBC_[0-9]+\\.[0-9]+(\\.[0-9]+)?" names "${versions}")
      foreach(name IN LISTS names)
        string(REPLACE "GLIBC_" "" number "${name}")
        if(glibc_needed STREQUAL "" OR number VERSION_GREATER glibc_needed)
          set(glibc_needed "${number}")
        endif()
      endforeach()
    endif()
  endif()
endforeach()

# The size limit, over every file.
file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${staging}" "${staging}/*")
list(SORT files)
set(total 0)
set(listing "")
foreach(file IN LISTS files)
  file(SIZE "${staging}/${file}" size)
  math(EXPR total "${total} + ${size}")
  string(APPEND listing "${size}\t${file}\n")
endforeach()
math(EXPR limit "${MAX_MIB} * 1048576")
if(total GREATER limit)
  file(REMOVE_RECURSE "${staging}")
  message(FATAL_ERROR "the GPU host check bundle is ${total} bytes, over the limit of ${MAX_MIB} "
                      "MiB (${limit} bytes); no bundle was made. Its files:\n${listing}")
endif()

source_commit(commit)
string(TIMESTAMP built "%Y-%m-%dT%H:%M:%SZ" UTC)
cmake_host_system_information(RESULT host QUERY HOSTNAME OS_NAME OS_PLATFORM)
list(GET host 0 host_name)
list(GET host 1 os_name)
list(GET host 2 os_platform)
if(glibc_needed STREQUAL "")
  set(glibc_line "glibc (its version could not be read)")
else()
  set(glibc_line "glibc ${glibc_needed} or later")
endif()
file(WRITE "${staging}/MANIFEST"
  "flink-gpu GPU host check bundle (docs/gpu-host-check.md)\n"
  "version: ${VERSION}\n"
  "commit: ${commit}\n"
  "built: ${built} on ${host_name} (${os_name} ${os_platform})\n"
  "needs: ${glibc_line}; libnvidia-ml.so.1 (loaded at run time), nvidia-smi, a POSIX shell, "
  "coreutils (timeout)\n"
  "run: gpu-machine-check.sh --bundle <this folder> --report <file>\n"
  "size: ${total} bytes (limit ${MAX_MIB} MiB)\n"
  "files (bytes, path):\n${listing}")
file(RENAME "${staging}" "${BUNDLE_DIR}")
message(STATUS "GPU host check bundle: ${BUNDLE_DIR} (${total} bytes, ${glibc_line})")
