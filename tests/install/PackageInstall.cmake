# Installs the package built by PackageAndLint.cmake (WORK_DIR/out/*.deb) for real, with dpkg,
# into a scratch root that holds a stand-in Flink distribution, and removes and purges it again:
# the maintainer scripts must move Flink's own nvidia-gpu-discovery.sh and gpu-discovery-common.sh
# aside (dpkg-divert, to <name>.flink-distribution) and put them back, and enable or start no unit.
#
# Safe for the host: `dpkg --root` takes its database from the scratch root's var/lib/dpkg and
# unpacks there; --force-script-chrootless runs the maintainer scripts on the host with DPKG_ROOT
# and DPKG_ADMINDIR set to the scratch root's, which dpkg-divert honours, so the diversions too are
# the scratch root's (the test checks the host's own list of diversions is unchanged); dpkg's log
# goes to the scratch root. --force-depends: the scratch database has no glibc. dpkg must run as
# root to give the files their owner; as any other user the test says so and ctest counts it
# skipped.
#
#   cmake -DWORK_DIR=<PackageAndLint's> -DPREFIX=... -DPLUGIN_DIR=... -DPACKAGE=...
#         -P PackageInstall.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var WORK_DIR PREFIX PLUGIN_DIR PACKAGE)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()

execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT uid STREQUAL "0")
  message(STATUS "SKIPPED: dpkg installs a package as root only, and this is uid ${uid}; the "
                 "maintainer scripts were not run")
  return()
endif()
foreach(tool dpkg dpkg-divert)
  find_program(${tool}_path ${tool})
  if(NOT ${tool}_path)
    message(FATAL_ERROR "${tool} is not installed")
  endif()
endforeach()
file(GLOB debs "${WORK_DIR}/out/*.deb")
list(LENGTH debs count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "expected one package in ${WORK_DIR}/out (run the debian_package test "
                      "first), found: ${debs}")
endif()

set(root "${WORK_DIR}/install-root")
set(admindir "${root}/var/lib/dpkg")
set(plugins "${root}${PREFIX}/${PLUGIN_DIR}")
set(flink_scripts nvidia-gpu-discovery.sh gpu-discovery-common.sh)

function(run what out_var)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE exit_code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  if(NOT exit_code STREQUAL "0")
    list(JOIN ARGN " " shown)
    message(FATAL_ERROR "${what} failed (exit '${exit_code}'):\n  ${shown}\n"
                        "--- stdout ---\n${out}\n--- stderr ---\n${err}")
  endif()
  if(out_var)
    set(${out_var} "${out}${err}" PARENT_SCOPE)
  endif()
endfunction()

function(dpkg what out_var)
  run("dpkg ${what}" out "${dpkg_path}" "--root=${root}" "--log=${root}/dpkg.log"
      --force-script-chrootless --force-depends --force-not-root ${ARGN})
  if(out MATCHES "systemctl|Created symlink")
    message(FATAL_ERROR "dpkg ${what} enabled or started a unit:\n${out}")
  endif()
  if(out_var)
    set(${out_var} "${out}" PARENT_SCOPE)
  endif()
endfunction()

# The diversions the scratch database holds, one "<from>\t<to>\t<package>" line each.
function(diversions out_var)
  run("dpkg-divert --list" listing "${dpkg-divert_path}" "--admindir=${admindir}" --list)
  set(${out_var} "${listing}" PARENT_SCOPE)
endfunction()

function(expect_file path expected)
  if(NOT EXISTS "${path}")
    message(FATAL_ERROR "${path} is missing")
  endif()
  file(READ "${path}" text)
  if(NOT text STREQUAL expected)
    message(FATAL_ERROR "${path} holds [${text}], expected [${expected}]")
  endif()
endfunction()

# A scratch root with an empty dpkg database and, when `with_flink`, Flink's own two scripts.
function(fresh_root with_flink)
  file(REMOVE_RECURSE "${root}")
  foreach(folder updates info triggers)
    file(MAKE_DIRECTORY "${admindir}/${folder}")
  endforeach()
  file(WRITE "${admindir}/status" "")
  file(WRITE "${admindir}/available" "")
  file(MAKE_DIRECTORY "${plugins}")
  if(with_flink)
    foreach(script IN LISTS flink_scripts)
      file(WRITE "${plugins}/${script}" "Flink's own ${script}\n")
    endforeach()
  endif()
endfunction()

run("dpkg-divert --list (the host's)" host_diversions_before "${dpkg-divert_path}" --list)

# --- over a Flink distribution: Flink's scripts moved aside, then put back ----------------------
fresh_root(ON)
dpkg("--install" out --install "${debs}")
message(STATUS "dpkg --install:\n${out}")
diversions(listing)
foreach(script IN LISTS flink_scripts)
  set(path "${PREFIX}/${PLUGIN_DIR}/${script}")
  if(NOT listing MATCHES "diversion of ${path} to ${path}\\.flink-distribution by ${PACKAGE}")
    message(FATAL_ERROR "no diversion of ${path} by ${PACKAGE}:\n${listing}")
  endif()
  expect_file("${plugins}/${script}.flink-distribution" "Flink's own ${script}\n")
  file(STRINGS "${plugins}/${script}" ours REGEX "^# flink-gpu's own copy")
  if(NOT ours)
    message(FATAL_ERROR "${plugins}/${script} is not the package's")
  endif()
endforeach()
if(EXISTS "${root}/etc/systemd/system")
  message(FATAL_ERROR "installing the package enabled a unit: ${root}/etc/systemd/system exists")
endif()
execute_process(COMMAND "${root}${PREFIX}/bin/flink-gpu" --version OUTPUT_VARIABLE version
                RESULT_VARIABLE exit_code)
if(NOT exit_code STREQUAL "0" OR NOT version MATCHES "^flink-gpu ")
  message(FATAL_ERROR "the installed flink-gpu --version: exit ${exit_code}, [${version}]")
endif()

# Installed again (as an upgrade to the same version): Flink's copies stay where they are.
dpkg("--install, again" out --install "${debs}")
foreach(script IN LISTS flink_scripts)
  expect_file("${plugins}/${script}.flink-distribution" "Flink's own ${script}\n")
endforeach()

dpkg("--remove" out --remove "${PACKAGE}")
message(STATUS "dpkg --remove:\n${out}")
foreach(script IN LISTS flink_scripts)
  expect_file("${plugins}/${script}" "Flink's own ${script}\n")
  if(EXISTS "${plugins}/${script}.flink-distribution")
    message(FATAL_ERROR "${plugins}/${script}.flink-distribution is left after removal")
  endif()
endforeach()
diversions(listing)
if(listing MATCHES "${PACKAGE}")
  message(FATAL_ERROR "diversions are left after removal:\n${listing}")
endif()
foreach(ours bin/flink-gpu ${PLUGIN_DIR}/nvidia-gpu-discovery ${PLUGIN_DIR}/amd-gpu-discovery.sh)
  if(EXISTS "${root}${PREFIX}/${ours}")
    message(FATAL_ERROR "${PREFIX}/${ours} is left after removal")
  endif()
endforeach()

# Installed and purged: the same.
dpkg("--install, after removal" out --install "${debs}")
dpkg("--purge" out --purge "${PACKAGE}")
foreach(script IN LISTS flink_scripts)
  expect_file("${plugins}/${script}" "Flink's own ${script}\n")
endforeach()
diversions(listing)
if(listing MATCHES "${PACKAGE}")
  message(FATAL_ERROR "diversions are left after purge:\n${listing}")
endif()

# --- without Flink's scripts: nothing to move, nothing left -------------------------------------
fresh_root(OFF)
dpkg("--install, no Flink" out --install "${debs}")
foreach(script IN LISTS flink_scripts)
  if(EXISTS "${plugins}/${script}.flink-distribution")
    message(FATAL_ERROR "a ${script}.flink-distribution appeared where Flink had none")
  endif()
endforeach()
dpkg("--purge, no Flink" out --purge "${PACKAGE}")
foreach(script IN LISTS flink_scripts)
  if(EXISTS "${plugins}/${script}" OR EXISTS "${plugins}/${script}.flink-distribution")
    message(FATAL_ERROR "${script} is left where Flink had none")
  endif()
endforeach()

run("dpkg-divert --list (the host's)" host_diversions_after "${dpkg-divert_path}" --list)
if(NOT host_diversions_after STREQUAL host_diversions_before)
  message(FATAL_ERROR "the host's diversions changed:\nbefore\n${host_diversions_before}\n"
                      "after\n${host_diversions_after}")
endif()
file(REMOVE_RECURSE "${root}")
message(STATUS "the package installs, diverts Flink's scripts and puts them back")
