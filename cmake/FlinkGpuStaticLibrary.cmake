# flink-gpu-static: the library as a static archive, for the programs this project installs
# (flink-gpu). A program starts once per discovery, so its start-up is what a user pays: every
# shared library it loads costs the loader a file to map and relocations to apply, and on a cold
# VM that is more than the discovery itself (docs/benchmarks.md). So flink-gpu links our code,
# spdlog and fmt (header-only), yaml-cpp (Debian's libyaml-cpp.a) and libstdc++ into itself, and
# loads only glibc: glibc stays dynamic because the programs dlopen plugins and libnvidia-ml.so.1,
# which a static glibc cannot do reliably.
#
# The archive takes the shared library's objects (src/CMakeLists.txt), so nothing compiles twice,
# except the logging facade: here it is built over spdlog and fmt header-only.

# spdlog header-only over fmt header-only. Debian's spdlog::spdlog_header_only would link the
# shared libfmt (its interface names fmt::fmt), so it is put together here.
find_package(fmt REQUIRED)  # spdlog's package found it already; this makes it explicit
add_library(flink-gpu-spdlog-header-only INTERFACE)
get_target_property(flink_gpu_spdlog_includes spdlog::spdlog_header_only
  INTERFACE_INCLUDE_DIRECTORIES)
target_include_directories(flink-gpu-spdlog-header-only SYSTEM INTERFACE
  ${flink_gpu_spdlog_includes})
# SPDLOG_FMT_EXTERNAL: Debian's spdlog has no bundled fmt; without SPDLOG_COMPILED_LIB spdlog is
# header-only, and FMT_HEADER_ONLY (from fmt::fmt-header-only) makes fmt so too.
target_compile_definitions(flink-gpu-spdlog-header-only INTERFACE SPDLOG_FMT_EXTERNAL)
target_link_libraries(flink-gpu-spdlog-header-only INTERFACE fmt::fmt-header-only Threads::Threads)

add_library(flink-gpu-logging-header-only OBJECT ${PROJECT_SOURCE_DIR}/src/util/Logging.cpp)
target_include_directories(flink-gpu-logging-header-only PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(flink-gpu-logging-header-only PRIVATE flink-gpu-spdlog-header-only)
flink_gpu_warnings(flink-gpu-logging-header-only)

# yaml-cpp's archive, where the distribution ships one (Debian does; its CMake package only
# describes the shared library). Without it, the shared library is used and said so.
find_library(FLINK_GPU_YAML_CPP_ARCHIVE NAMES libyaml-cpp.a
  DOC "yaml-cpp as a static archive, linked into flink-gpu")
if(FLINK_GPU_YAML_CPP_ARCHIVE)
  add_library(flink-gpu-yaml-cpp-static STATIC IMPORTED)
  get_target_property(flink_gpu_yaml_includes ${FLINK_GPU_YAML_CPP} INTERFACE_INCLUDE_DIRECTORIES)
  set_target_properties(flink-gpu-yaml-cpp-static PROPERTIES
    IMPORTED_LOCATION "${FLINK_GPU_YAML_CPP_ARCHIVE}"
    INTERFACE_INCLUDE_DIRECTORIES "${flink_gpu_yaml_includes}")
  set(flink_gpu_static_yaml flink-gpu-yaml-cpp-static)
else()
  message(STATUS "libyaml-cpp.a not found: flink-gpu links the shared yaml-cpp")
  set(flink_gpu_static_yaml ${FLINK_GPU_YAML_CPP})
endif()

add_library(flink-gpu-static STATIC
  $<TARGET_OBJECTS:flink-gpu-core>
  $<TARGET_OBJECTS:flink-gpu-core-cold>
  $<TARGET_OBJECTS:flink-gpu-flink>
  $<TARGET_OBJECTS:flink-gpu-logging-header-only>)
target_include_directories(flink-gpu-static PUBLIC
  ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
target_compile_features(flink-gpu-static PUBLIC cxx_std_20)
target_link_libraries(flink-gpu-static PUBLIC
  ${flink_gpu_static_yaml} ${CMAKE_DL_LIBS} Threads::Threads)
