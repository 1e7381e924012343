# `systemd-analyze verify` on the package's systemd units, as installed in the package unpacked
# by PackageAndLint.cmake (WORK_DIR/root): their syntax, the programs they run (the packaged
# flink-gpu, /bin/sh), the units they name, and the manual page their Documentation= names (the
# packaged one, through MANPATH). The scratch root is the package's files over the host's
# systemd units (*.target, *.slice: what every unit is ordered against) and /bin/sh, the parts
# of a Debian system the package expects; nothing outside WORK_DIR is written. Any line
# systemd-analyze prints about a unit of ours fails the test (an unknown key is only a warning to
# it). Where systemd-analyze, or its --root, is missing, the test says so and ctest counts it
# skipped (the SKIP_REGULAR_EXPRESSION of tests/install/CMakeLists.txt).
#
#   cmake -DWORK_DIR=<PackageAndLint's> -DPACKAGE=... -P PackageUnits.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var WORK_DIR PACKAGE)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()

find_program(systemd_analyze systemd-analyze)
if(NOT systemd_analyze)
  message(STATUS "SKIPPED: systemd-analyze is not installed (Debian's systemd package has it); "
                 "the units were not verified")
  return()
endif()
execute_process(COMMAND "${systemd_analyze}" --help OUTPUT_VARIABLE help ERROR_QUIET)
if(NOT help MATCHES "--root=")
  message(STATUS "SKIPPED: this systemd-analyze has no --root (systemd 250 or later has it); "
                 "the units were not verified")
  return()
endif()

set(packaged "${WORK_DIR}/root")
set(units
  /usr/lib/systemd/system/${PACKAGE}-watch.service
  /usr/lib/systemd/system/${PACKAGE}-metrics.service
  /usr/lib/systemd/system/${PACKAGE}-metrics.timer)
foreach(unit IN LISTS units)
  if(NOT EXISTS "${packaged}${unit}")
    message(FATAL_ERROR "the unpacked package has no ${unit} (run the debian_package test first)")
  endif()
endforeach()

set(root "${WORK_DIR}/units-root")
file(REMOVE_RECURSE "${root}")
file(COPY "${packaged}/" DESTINATION "${root}")
foreach(host_units /usr/lib/systemd/system /lib/systemd/system)
  file(GLOB host_files LIST_DIRECTORIES false "${host_units}/*.target" "${host_units}/*.slice")
  foreach(file IN LISTS host_files)
    get_filename_component(name "${file}" NAME)
    # A unit name with an escape (system-systemd\x2dcryptsetup.slice) is not one of those ours
    # name, and file(COPY) would read its backslash as a folder separator.
    if(name MATCHES "\\\\")
      continue()
    endif()
    if(NOT EXISTS "${root}/usr/lib/systemd/system/${name}")
      file(COPY "${file}" DESTINATION "${root}/usr/lib/systemd/system")
    endif()
  endforeach()
endforeach()
file(COPY /bin/sh DESTINATION "${root}/bin" FOLLOW_SYMLINK_CHAIN)

execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "MANPATH=${root}/usr/share/man" SYSTEMD_LOG_COLOR=0
          "${systemd_analyze}" verify "--root=${root}" ${units}
  RESULT_VARIABLE exit_code
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  TIMEOUT 120)
message(STATUS "systemd-analyze verify (exit ${exit_code}):\n${out}${err}")
string(REGEX MATCHALL "[^\n]*${PACKAGE}-[^\n]*" about_ours "${out}${err}")
if(NOT exit_code STREQUAL "0" OR about_ours)
  message(FATAL_ERROR "systemd-analyze verify found problems in the package's units:\n${out}${err}")
endif()
file(REMOVE_RECURSE "${root}")
message(STATUS "the package's units pass systemd-analyze verify")
