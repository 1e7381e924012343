# Install rules, in two components:
#
#   plugin  bin/flink-gpu and plugins/external-resource-gpu/ (the discovery program and its
#           scripts): what a Flink distribution needs, laid over it with
#           `cmake --install build --component plugin --prefix $FLINK_HOME`. The programs link
#           everything but glibc into themselves, so nothing else is needed beside them, and
#           nothing of a developer's (headers, CMake files, the shared library) lands in Flink's
#           folders. With the prefix /opt/flink the discovery script lands at Flink's default
#           discovery-script.path. (The programs' own rules are in cli/ and plugins/.)
#   dev     include/flink/, the shared library and lib/cmake/FlinkGpu/ (an exported CMake
#           package): what a C++ worker builds against.
#
# `cmake --install build` without --component installs both. Installed binaries are stripped
# (FLINK_GPU_INSTALL_STRIP, on by default; the build tree keeps its debug info): the whole of
# the debug info is most of their size.
include(CMakePackageConfigHelpers)

install(TARGETS flink-external-resource-gpu
  EXPORT FlinkGpuTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY include/flink DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)

set(FLINK_GPU_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/FlinkGpu)
install(EXPORT FlinkGpuTargets NAMESPACE flink:: DESTINATION ${FLINK_GPU_CMAKE_DIR}
  COMPONENT dev)
configure_package_config_file(cmake/FlinkGpuConfig.cmake.in
  ${PROJECT_BINARY_DIR}/FlinkGpuConfig.cmake
  INSTALL_DESTINATION ${FLINK_GPU_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/FlinkGpuConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/FlinkGpuConfig.cmake
              ${PROJECT_BINARY_DIR}/FlinkGpuConfigVersion.cmake
        DESTINATION ${FLINK_GPU_CMAKE_DIR} COMPONENT dev)

# strip keeps the .comment section (the compilers' version strings, some hundred bytes of each
# object); Debian's dh_strip drops it too. After the programs' own rules (cli/, plugins/), which
# CMake runs first since they were declared first.
if(FLINK_GPU_INSTALL_STRIP AND CMAKE_OBJCOPY)
  install(CODE "
    if(CMAKE_INSTALL_DO_STRIP)
      foreach(program \"${CMAKE_INSTALL_BINDIR}/flink-gpu\"
                      \"${FLINK_GPU_PLUGIN_DIR}/nvidia-gpu-discovery\"
                      \"${FLINK_GPU_PLUGIN_DIR}/amd-gpu-discovery\"
                      \"${FLINK_GPU_PLUGIN_DIR}/intel-gpu-discovery\")
        execute_process(COMMAND \"${CMAKE_OBJCOPY}\" --remove-section=.comment
                                \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/\${program}\"
                        RESULT_VARIABLE failed)
        if(failed)
          message(FATAL_ERROR \"objcopy could not drop .comment from \${program}\")
        endif()
      endforeach()
    endif()" COMPONENT plugin)
endif()
