# flink-gpu-static: the shared library's sources once more, as a static library for the programs
# this project installs (flink-gpu). A program starts once per discovery, so its start-up is what
# a user pays: every shared library it loads costs the loader a file to map and relocations to
# apply, and on a cold VM that is more than the discovery itself (see README, Benchmarks). So
# flink-gpu links our code, spdlog and fmt (header-only), yaml-cpp (Debian's libyaml-cpp.a) and
# libstdc++ into itself, and loads only glibc: glibc stays dynamic because the programs dlopen
# plugins and libnvidia-ml.so.1, which a static glibc cannot do reliably.
#
# The shared library (the `dev` install component) is unchanged: C++ workers link it, and it
# keeps using the system's spdlog, so a host program's spdlog::set_level reaches its loggers.
#
# The twin takes its sources, include folders, compile settings and dependencies from the shared
# target itself (included after add_subdirectory(src)), so a source added there is built here too.
# Dependencies are mapped: spdlog::spdlog → spdlog and fmt header-only, yaml-cpp → libyaml-cpp.a.

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

function(flink_gpu_add_static_twin shared twin)
  get_target_property(source_dir ${shared} SOURCE_DIR)
  get_target_property(sources ${shared} SOURCES)
  set(twin_sources)
  foreach(source IN LISTS sources)
    # $<TARGET_OBJECTS:...> and absolute paths as they are; the rest is relative to src/.
    if(source MATCHES "^\\$<" OR IS_ABSOLUTE "${source}")
      list(APPEND twin_sources "${source}")
    else()
      list(APPEND twin_sources "${source_dir}/${source}")
    endif()
  endforeach()
  add_library(${twin} STATIC ${twin_sources})
  foreach(property INCLUDE_DIRECTORIES INTERFACE_INCLUDE_DIRECTORIES COMPILE_DEFINITIONS
                   INTERFACE_COMPILE_DEFINITIONS COMPILE_OPTIONS COMPILE_FEATURES
                   INTERFACE_COMPILE_FEATURES POSITION_INDEPENDENT_CODE)
    get_target_property(value ${shared} ${property})
    if(value)
      set_property(TARGET ${twin} PROPERTY ${property} "${value}")
    endif()
  endforeach()
  foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(libraries ${shared} ${property})
    if(NOT libraries)
      continue()
    endif()
    list(TRANSFORM libraries REPLACE "^spdlog::spdlog$" flink-gpu-spdlog-header-only)
    list(TRANSFORM libraries REPLACE "^${FLINK_GPU_YAML_CPP}$" ${flink_gpu_static_yaml})
    if(property STREQUAL LINK_LIBRARIES)
      # Private to the archive, yet its users must link them: CMake adds them as link-only.
      target_link_libraries(${twin} PRIVATE ${libraries})
    else()
      target_link_libraries(${twin} INTERFACE ${libraries})
    endif()
  endforeach()
endfunction()

flink_gpu_add_static_twin(flink-external-resource-gpu flink-gpu-static)
