# Builds the Debian package as `make package` does (CPack, from the build's CPackConfig.cmake)
# into a scratch folder and checks what a user of it gets: its files (the plugin component under
# the package's prefix, Debian's copyright, changelog and lintian overrides, the tmpfiles.d file,
# the systemd units, bash and zsh completion, the manual page, nothing else, all owned by root),
# its control fields (Depends on glibc alone) and maintainer scripts (preinst and postrm, which
# divert Flink's own scripts), its systemd-tmpfiles line, the programs run from an unpacked copy,
# that the completion scripts and the manual page are the packaged flink-gpu's, and lintian's
# verdict (no error, no warning; its whole report is printed). The package and its unpacked copy
# stay in WORK_DIR (out/, root/) for the tests that need them (PackageUnits.cmake,
# PackageInstall.cmake). It writes nothing outside WORK_DIR: lintian runs with
# a TMPDIR there, removed at the end (lintian leaves its mldbm-elf-* files behind in its TMPDIR).
#
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DCPACK=... -DPREFIX=... -DBINDIR=... -DPLUGIN_DIR=...
#         -DPACKAGE=... -DVERSION=... -DFIXTURE=<script printing 0,1> -P PackageAndLint.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var BUILD_DIR WORK_DIR CPACK PREFIX BINDIR PLUGIN_DIR PACKAGE VERSION FIXTURE)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()

function(run_checked what out_var)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE exit_code
    OUTPUT_VARIABLE stdout
    ERROR_VARIABLE stderr
    TIMEOUT 240)
  if(NOT exit_code STREQUAL "0")
    list(JOIN ARGN " " shown)
    message(FATAL_ERROR "${what} failed (exit '${exit_code}'):\n  ${shown}\n"
                        "--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}")
  endif()
  if(out_var)
    set(${out_var} "${stdout}" PARENT_SCOPE)
  endif()
endfunction()

foreach(tool dpkg-deb lintian)
  find_program(${tool}_path ${tool})
  if(NOT ${tool}_path)
    message(FATAL_ERROR "${tool} is not installed (scripts/install-deps.sh installs it)")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
run_checked("cpack -G DEB" "" "${CPACK}" -G DEB --config "${BUILD_DIR}/CPackConfig.cmake"
            -B "${WORK_DIR}/out")
file(GLOB debs "${WORK_DIR}/out/*.deb")
list(LENGTH debs count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "cpack made ${count} packages, expected one: ${debs}")
endif()
get_filename_component(deb_name "${debs}" NAME)
if(NOT deb_name MATCHES "^${PACKAGE}_${VERSION}_[a-z0-9]+\\.deb$")
  message(FATAL_ERROR "the package is named ${deb_name}, not ${PACKAGE}_${VERSION}_<arch>.deb")
endif()

# --- contents ---------------------------------------------------------------
run_checked("dpkg-deb --contents" listing "${dpkg-deb_path}" --contents "${debs}")
string(REGEX REPLACE "\n$" "" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(files)
foreach(line IN LISTS lines)
  # "-rwxr-xr-x root/root  12345 2026-12-01 09:00 ./opt/flink/bin/flink-gpu"
  if(NOT line MATCHES "^([-dl])[-rwxst]+ ([^ ]+) +[0-9]+ [-0-9]+ [:0-9]+ \\.(/.*)$")
    message(FATAL_ERROR "unexpected line in the package's listing: ${line}")
  endif()
  set(type "${CMAKE_MATCH_1}")
  set(owner "${CMAKE_MATCH_2}")
  set(path "${CMAKE_MATCH_3}")
  if(NOT owner STREQUAL "root/root")
    message(FATAL_ERROR "${path} in the package belongs to ${owner}, not root/root")
  endif()
  if(NOT type STREQUAL "d")
    list(APPEND files "${path}")
  endif()
endforeach()
list(SORT files)
set(expected
  "${PREFIX}/${BINDIR}/flink-gpu"
  "${PREFIX}/${PLUGIN_DIR}/amd-gpu-discovery"
  "${PREFIX}/${PLUGIN_DIR}/amd-gpu-discovery.sh"
  "${PREFIX}/${PLUGIN_DIR}/gpu-discovery-common.sh"
  "${PREFIX}/${PLUGIN_DIR}/intel-gpu-discovery"
  "${PREFIX}/${PLUGIN_DIR}/intel-gpu-discovery.sh"
  "${PREFIX}/${PLUGIN_DIR}/nvidia-gpu-discovery"
  "${PREFIX}/${PLUGIN_DIR}/nvidia-gpu-discovery.sh"
  "/usr/lib/systemd/system/${PACKAGE}-metrics.service"
  "/usr/lib/systemd/system/${PACKAGE}-metrics.timer"
  "/usr/lib/systemd/system/${PACKAGE}-watch.service"
  "/usr/lib/tmpfiles.d/${PACKAGE}.conf"
  "/usr/share/bash-completion/completions/${PACKAGE}"
  "/usr/share/doc/${PACKAGE}/changelog.gz"
  "/usr/share/doc/${PACKAGE}/copyright"
  "/usr/share/lintian/overrides/${PACKAGE}"
  "/usr/share/man/man1/${PACKAGE}.1.gz"
  "/usr/share/zsh/vendor-completions/_${PACKAGE}")
list(SORT expected)
if(NOT files STREQUAL expected)
  list(JOIN files "\n  " got)
  list(JOIN expected "\n  " want)
  message(FATAL_ERROR "the package holds\n  ${got}\nexpected\n  ${want}")
endif()

run_checked("dpkg-deb --field" depends "${dpkg-deb_path}" --field "${debs}" Depends)
string(STRIP "${depends}" depends)
if(NOT depends MATCHES "^libc6 \\(>= [0-9.]+\\)$")
  message(FATAL_ERROR "the package depends on '${depends}', expected glibc (libc6) alone")
endif()

# The maintainer scripts: preinst and postrm, executable, and nothing that starts a service.
run_checked("dpkg-deb --info" info "${dpkg-deb_path}" --info "${debs}")
foreach(script preinst postrm)
  if(NOT info MATCHES "[0-9]+ bytes, +[0-9]+ lines +\\* +${script} +#!/bin/sh\n")
    message(FATAL_ERROR "the package has no executable ${script} starting #!/bin/sh:\n${info}")
  endif()
endforeach()
file(MAKE_DIRECTORY "${WORK_DIR}/control")
run_checked("dpkg-deb --control" "" "${dpkg-deb_path}" --control "${debs}" "${WORK_DIR}/control")
foreach(script preinst postrm)
  file(READ "${WORK_DIR}/control/${script}" text)
  if(text MATCHES "systemctl|deb-systemd")
    message(FATAL_ERROR "the ${script} enables or starts a unit; the units are installed disabled")
  endif()
  foreach(name nvidia-gpu-discovery.sh gpu-discovery-common.sh)
    if(NOT text MATCHES "--divert ${PREFIX}/${PLUGIN_DIR}/${name}\\.flink-distribution")
      message(FATAL_ERROR "the ${script} does not divert ${name}:\n${text}")
    endif()
  endforeach()
endforeach()

# --- the programs, unpacked ---------------------------------------------------
set(root "${WORK_DIR}/root")
run_checked("dpkg-deb --extract" "" "${dpkg-deb_path}" --extract "${debs}" "${root}")
set(flink_gpu "${root}${PREFIX}/${BINDIR}/flink-gpu")
run_checked("flink-gpu --version" output "${flink_gpu}" --version)
if(NOT output STREQUAL "flink-gpu ${VERSION}\n")
  message(FATAL_ERROR "the packaged flink-gpu --version says [${output}]")
endif()
# The package's description names every subcommand that the packaged flink-gpu has.
run_checked("flink-gpu --help" help "${flink_gpu}" --help)
string(REGEX REPLACE "^.*\nSubcommands:\n" "" subcommands "${help}")
string(REGEX MATCHALL "(^|\n)  [a-z]+" subcommands "${subcommands}")
list(TRANSFORM subcommands STRIP)
list(LENGTH subcommands subcommand_count)
if(subcommand_count LESS 5)
  message(FATAL_ERROR "flink-gpu --help lists too few subcommands [${subcommands}]:\n${help}")
endif()
run_checked("dpkg-deb --field" description "${dpkg-deb_path}" --field "${debs}" Description)
foreach(subcommand IN LISTS subcommands)
  if(NOT description MATCHES "[ ,]${subcommand}[ ,.]")
    message(FATAL_ERROR "the package's description does not name the subcommand "
                        "'${subcommand}':\n${description}")
  endif()
endforeach()

run_checked("flink-gpu discover" output "${flink_gpu}" discover --discovery-script "${FIXTURE}"
            --amount 2)
if(NOT output STREQUAL "GPU Device(0)\nGPU Device(1)\n")
  message(FATAL_ERROR "the packaged flink-gpu discover says [${output}]")
endif()

# --- systemd-tmpfiles: the coordination file and its neighbours are never aged ---------------
file(STRINGS "${root}/usr/lib/tmpfiles.d/${PACKAGE}.conf" tmpfiles_lines REGEX "^[^#]")
if(NOT tmpfiles_lines STREQUAL "x /var/tmp/flink-gpu-coordination*")
  message(FATAL_ERROR "the package's tmpfiles.d lines are [${tmpfiles_lines}], expected one: "
                      "x /var/tmp/flink-gpu-coordination*")
endif()

# --- systemd units, completion, manual page -------------------------------------------------
# The units run the packaged flink-gpu (systemd-analyze verifies them: PackageUnits.cmake).
set(unit_dir "${root}/usr/lib/systemd/system")
file(STRINGS "${unit_dir}/${PACKAGE}-watch.service" exec_start REGEX "^ExecStart=")
if(NOT exec_start STREQUAL "ExecStart=${PREFIX}/${BINDIR}/flink-gpu watch")
  message(FATAL_ERROR "the watch unit runs [${exec_start}], not ${PREFIX}/${BINDIR}/flink-gpu watch")
endif()
file(STRINGS "${unit_dir}/${PACKAGE}-watch.service" type REGEX "^Type=")
if(NOT type STREQUAL "Type=notify")
  message(FATAL_ERROR "the watch unit is [${type}], not Type=notify (watch sends READY=1)")
endif()
file(READ "${unit_dir}/${PACKAGE}-metrics.service" metrics_unit)
if(NOT metrics_unit MATCHES "${PREFIX}/${BINDIR}/flink-gpu status --format prometheus > ([^ ]+) && exec mv -f ([^ ]+) ([^ ']+)'")
  message(FATAL_ERROR "the metrics unit does not write the metrics whole and rename them:\n"
                      "${metrics_unit}")
endif()
get_filename_component(temporary_dir "${CMAKE_MATCH_1}" DIRECTORY)
get_filename_component(final_dir "${CMAKE_MATCH_3}" DIRECTORY)
if(NOT CMAKE_MATCH_1 STREQUAL CMAKE_MATCH_2 OR NOT temporary_dir STREQUAL final_dir
   OR CMAKE_MATCH_1 MATCHES "\\.prom$")
  message(FATAL_ERROR "the metrics unit must write a file the collector does not read (not "
                      "*.prom) in the folder of the final one, then rename it: ${CMAKE_MATCH_0}")
endif()

# The completion scripts are what the packaged flink-gpu prints.
foreach(shell bash zsh)
  run_checked("flink-gpu completion ${shell}" script "${flink_gpu}" completion ${shell})
  if(shell STREQUAL "bash")
    file(READ "${root}/usr/share/bash-completion/completions/${PACKAGE}" packaged)
  else()
    file(READ "${root}/usr/share/zsh/vendor-completions/_${PACKAGE}" packaged)
  endif()
  if(NOT packaged STREQUAL script)
    message(FATAL_ERROR "the packaged ${shell} completion is not flink-gpu completion ${shell}")
  endif()
endforeach()

# The manual page: a section per subcommand, with its options; lintian reads it with man.
run_checked("gzip -dc" manual gzip -dc "${root}/usr/share/man/man1/${PACKAGE}.1.gz")
foreach(subcommand IN LISTS subcommands)
  if(NOT manual MATCHES "\n\\.SS \"${subcommand}\"\n\\.B flink\\\\-gpu ${subcommand}")
    message(FATAL_ERROR "the manual page has no section for the subcommand ${subcommand}")
  endif()
endforeach()
foreach(option coordination\\-file critical\\-xids placement)
  string(FIND "${manual}" "\\fB\\-\\-${option}\\fR" position)
  if(position EQUAL -1)
    message(FATAL_ERROR "the manual page does not name the option --${option}")
  endif()
endforeach()

# --- lintian ----------------------------------------------------------------
# --fail-on error,warning: lintian exits non-zero for those; info tags (--display-info) are shown
# but do not fail. The overridden tags (packaging/debian/lintian-overrides.in) are listed by a
# second run with --show-overrides, only for the record: with it, lintian fails on them too.
# A TMPDIR of its own: lintian leaves files there (mldbm-elf-*), which would pile up in /tmp.
set(lintian_tmp "${WORK_DIR}/lintian-tmp")
file(MAKE_DIRECTORY "${lintian_tmp}")
set(lintian_env "${CMAKE_COMMAND}" -E env "TMPDIR=${lintian_tmp}")
execute_process(COMMAND ${lintian_env} "${lintian_path}" --fail-on error,warning --display-info
                        "${debs}"
  RESULT_VARIABLE lintian_exit
  OUTPUT_VARIABLE lintian_out
  ERROR_VARIABLE lintian_err
  TIMEOUT 240)
execute_process(COMMAND ${lintian_env} "${lintian_path}" --show-overrides --no-tag-display-limit
                        "${debs}"
  OUTPUT_VARIABLE overridden
  ERROR_QUIET
  TIMEOUT 240)
file(REMOVE_RECURSE "${lintian_tmp}")
string(REGEX MATCHALL "(^|\n)O: [^\n]*" overridden "${overridden}")
string(REPLACE ";" "" overridden "${overridden}")
message(STATUS "lintian on ${deb_name} (exit ${lintian_exit}):\n${lintian_out}${lintian_err}"
               "overridden:${overridden}")
if(NOT lintian_exit STREQUAL "0")
  message(FATAL_ERROR "lintian found errors or warnings in ${deb_name}:\n${lintian_out}")
endif()
message(STATUS "package ${deb_name} checked")
