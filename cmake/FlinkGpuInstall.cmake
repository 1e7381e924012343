# Install layout: bin/, lib/, include/flink/, lib/cmake/FlinkGpu/ (an exported CMake package)
# and plugins/external-resource-gpu/. With CMAKE_INSTALL_PREFIX=/opt/flink the discovery script
# lands at Flink's default discovery-script.path.
include(CMakePackageConfigHelpers)

install(TARGETS flink-external-resource-gpu flink-gpu
  EXPORT FlinkGpuTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/flink DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(FLINK_GPU_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/FlinkGpu)
install(EXPORT FlinkGpuTargets NAMESPACE flink:: DESTINATION ${FLINK_GPU_CMAKE_DIR})
configure_package_config_file(cmake/FlinkGpuConfig.cmake.in
  ${PROJECT_BINARY_DIR}/FlinkGpuConfig.cmake
  INSTALL_DESTINATION ${FLINK_GPU_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/FlinkGpuConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/FlinkGpuConfig.cmake
              ${PROJECT_BINARY_DIR}/FlinkGpuConfigVersion.cmake
        DESTINATION ${FLINK_GPU_CMAKE_DIR})
