# The Debian package (`make package`, i.e. cpack -G DEB in the build folder): the `plugin`
# install component (bin/flink-gpu, plugins/external-resource-gpu/) under a Flink
# distribution's folder, FLINK_GPU_PACKAGE_PREFIX (/opt/flink, Flink's own default, unless given
# at configure time), plus the files Debian asks of every package (copyright, changelog, and the
# lintian overrides of packaging/debian/, with why each is one), a systemd-tmpfiles line that
# keeps /var/tmp's cleaning away from the coordination file, and what an operator expects of a
# package: systemd units for `watch` and for the metrics (installed disabled), bash and zsh
# completion, the manual page flink-gpu(1), and maintainer scripts that move the Flink
# distribution's own copies of the two scripts it replaces aside (dpkg-divert) and put them back
# on removal. tests/install/ builds it, runs lintian on it, verifies its units and installs it
# into a scratch root.
set(FLINK_GPU_PACKAGE_PREFIX /opt/flink CACHE PATH
  "The Flink distribution folder the Debian package installs the plugin component into")
set(FLINK_GPU_PACKAGE_MAINTAINER
  "flink-gpu maintainers <maintainers@users.noreply.a-seed-2203ad9a.example>" CACHE STRING
  "The Debian package's Maintainer field")
if(NOT IS_ABSOLUTE "${FLINK_GPU_PACKAGE_PREFIX}")
  message(FATAL_ERROR "FLINK_GPU_PACKAGE_PREFIX must be absolute, not '${FLINK_GPU_PACKAGE_PREFIX}'")
endif()
# It is written unquoted into the units' ExecStart and the maintainer scripts' dpkg-divert lines
# (which lintian reads as words): no blank, quote or character a shell or systemd would expand.
if(NOT FLINK_GPU_PACKAGE_PREFIX MATCHES "^/[A-Za-z0-9._/+-]*$")
  message(FATAL_ERROR "FLINK_GPU_PACKAGE_PREFIX may hold letters, digits and ._/+- only, not "
                      "'${FLINK_GPU_PACKAGE_PREFIX}'")
endif()

set(FLINK_GPU_PACKAGE_NAME flink-gpu)
set(FLINK_GPU_PACKAGE_DOC_DIR /usr/share/doc/${FLINK_GPU_PACKAGE_NAME})

# Debian's own files, in a component of their own that only the package asks for
# (EXCLUDE_FROM_ALL): `cmake --install --prefix $FLINK_HOME` must never write to /usr/share.
# Absolute destinations: they belong where Debian looks, whatever the package's prefix.
install(FILES packaging/debian/copyright DESTINATION ${FLINK_GPU_PACKAGE_DOC_DIR}
  COMPONENT debian EXCLUDE_FROM_ALL)
# Debian wants the changelog compressed with gzip -9n (no name, no time stamp: reproducible), as
# changelog.gz: a version without a Debian revision is a native package's. Its date is the
# configure time, or $SOURCE_DATE_EPOCH where set (string(TIMESTAMP) honours it).
string(TIMESTAMP FLINK_GPU_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(FLINK_GPU_CHANGELOG_GZ ${PROJECT_BINARY_DIR}/packaging/changelog.gz)
configure_file(packaging/debian/changelog.in ${PROJECT_BINARY_DIR}/packaging/changelog.Debian
  @ONLY)
add_custom_command(OUTPUT ${FLINK_GPU_CHANGELOG_GZ}
  COMMAND gzip -9nc ${PROJECT_BINARY_DIR}/packaging/changelog.Debian > ${FLINK_GPU_CHANGELOG_GZ}
  DEPENDS ${PROJECT_BINARY_DIR}/packaging/changelog.Debian
  COMMENT "Compressing the Debian changelog")
add_custom_target(flink-gpu-debian-changelog ALL DEPENDS ${FLINK_GPU_CHANGELOG_GZ})
install(FILES ${FLINK_GPU_CHANGELOG_GZ} DESTINATION ${FLINK_GPU_PACKAGE_DOC_DIR}
  COMPONENT debian EXCLUDE_FROM_ALL)
# The overrides name the prefix; the one about the folder only where the prefix is under /opt or
# /srv, the folders lintian keeps Debian's own packages out of and where Flink distributions live
# (an override that matches nothing is itself reported).
string(REGEX REPLACE "^/" "" FLINK_GPU_PACKAGE_PREFIX_RELATIVE "${FLINK_GPU_PACKAGE_PREFIX}")
if(FLINK_GPU_PACKAGE_PREFIX MATCHES "^/(opt|srv)(/|$)")
  set(FLINK_GPU_LINTIAN_FOLDER_OVERRIDE "${FLINK_GPU_PACKAGE_NAME}: dir-or-file-in-${CMAKE_MATCH_1} [${FLINK_GPU_PACKAGE_PREFIX_RELATIVE}/*]")
else()
  set(FLINK_GPU_LINTIAN_FOLDER_OVERRIDE "# (the prefix is not under /opt or /srv: nothing here)")
endif()
# systemd-tmpfiles ages /var/tmp files after 30 days; the coordination file and what lies beside
# it must outlive that (the file says why). /usr/lib/tmpfiles.d is the packages' folder (a local
# administrator's is /etc/tmpfiles.d, see docs/installing.md).
install(FILES packaging/debian/tmpfiles.conf DESTINATION /usr/lib/tmpfiles.d
  RENAME ${FLINK_GPU_PACKAGE_NAME}.conf COMPONENT debian EXCLUDE_FROM_ALL)
configure_file(packaging/debian/lintian-overrides.in
  ${PROJECT_BINARY_DIR}/packaging/lintian-overrides @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/packaging/lintian-overrides
  DESTINATION /usr/share/lintian/overrides RENAME ${FLINK_GPU_PACKAGE_NAME}
  COMPONENT debian EXCLUDE_FROM_ALL)

# --- systemd units, installed disabled -------------------------------------------------------
# flink-gpu-watch.service runs `flink-gpu watch` (Type=notify); flink-gpu-metrics.timer runs
# flink-gpu-metrics.service every minute, which writes the metrics for node_exporter's textfile
# collector. Nothing enables or starts them (no maintainer script calls systemctl): the operator
# does, see docs/operating.md. /usr/lib/systemd/system, the packages' folder, as tmpfiles.d above
# (systemd reads /lib/systemd/system too, which is the same folder on a merged /usr).
set(FLINK_GPU_SYSTEMD_UNIT_DIR /usr/lib/systemd/system)
foreach(unit flink-gpu-watch.service flink-gpu-metrics.service)
  configure_file(packaging/debian/${unit}.in ${PROJECT_BINARY_DIR}/packaging/${unit} @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/packaging/${unit} DESTINATION ${FLINK_GPU_SYSTEMD_UNIT_DIR}
    COMPONENT debian EXCLUDE_FROM_ALL)
endforeach()
install(FILES packaging/debian/flink-gpu-metrics.timer DESTINATION ${FLINK_GPU_SYSTEMD_UNIT_DIR}
  COMPONENT debian EXCLUDE_FROM_ALL)

# --- completion and the manual page, made from the built flink-gpu -------------------------
# Not in the sanitizer builds, whose programs are never packaged (and whose runtimes may report
# at exit what a build step would take for a failure).
if(NOT FLINK_GPU_ANY_SANITIZER)
  set(FLINK_GPU_COMPLETION_DIR ${PROJECT_BINARY_DIR}/packaging/completion)
  add_custom_command(
    OUTPUT ${FLINK_GPU_COMPLETION_DIR}/flink-gpu ${FLINK_GPU_COMPLETION_DIR}/_flink-gpu
    COMMAND ${CMAKE_COMMAND} -E make_directory ${FLINK_GPU_COMPLETION_DIR}
    COMMAND flink-gpu completion bash > ${FLINK_GPU_COMPLETION_DIR}/flink-gpu
    COMMAND flink-gpu completion zsh > ${FLINK_GPU_COMPLETION_DIR}/_flink-gpu
    DEPENDS flink-gpu
    COMMENT "Writing flink-gpu's bash and zsh completion")
  add_custom_target(flink-gpu-completion ALL
    DEPENDS ${FLINK_GPU_COMPLETION_DIR}/flink-gpu ${FLINK_GPU_COMPLETION_DIR}/_flink-gpu)
  # Where bash-completion loads a command's completion on demand, and Debian's zsh folder of
  # $fpath for packages.
  install(FILES ${FLINK_GPU_COMPLETION_DIR}/flink-gpu
    DESTINATION /usr/share/bash-completion/completions COMPONENT debian EXCLUDE_FROM_ALL)
  install(FILES ${FLINK_GPU_COMPLETION_DIR}/_flink-gpu
    DESTINATION /usr/share/zsh/vendor-completions COMPONENT debian EXCLUDE_FROM_ALL)

  # flink-gpu(1) with Debian's help2man (cmake/FlinkGpuManPage.cmake), gzip -9n'd. help2man is a
  # package the tests install (scripts/install-deps.sh); a build without it builds everything but
  # the page, and only making the package then fails, saying why.
  find_program(FLINK_GPU_HELP2MAN help2man)
  set(FLINK_GPU_MAN_PAGE ${PROJECT_BINARY_DIR}/packaging/man/flink-gpu.1.gz)
  add_custom_command(OUTPUT ${FLINK_GPU_MAN_PAGE}
    COMMAND ${CMAKE_COMMAND} -DFLINK_GPU=$<TARGET_FILE:flink-gpu>
            -DHELP2MAN=${FLINK_GPU_HELP2MAN} -DWORK_DIR=${PROJECT_BINARY_DIR}/packaging/man
            -DOUTPUT=${FLINK_GPU_MAN_PAGE}
            -DCOORDINATION_FILE=/var/tmp/flink-gpu-coordination
            -DPREFIX=${FLINK_GPU_PACKAGE_PREFIX}
            -P ${PROJECT_SOURCE_DIR}/cmake/FlinkGpuManPage.cmake
    DEPENDS flink-gpu ${PROJECT_SOURCE_DIR}/cmake/FlinkGpuManPage.cmake
    COMMENT "Writing the manual page flink-gpu(1) with help2man")
  if(FLINK_GPU_HELP2MAN)
    add_custom_target(flink-gpu-man-page ALL DEPENDS ${FLINK_GPU_MAN_PAGE})
  else()
    add_custom_target(flink-gpu-man-page DEPENDS ${FLINK_GPU_MAN_PAGE})
    install(CODE "message(FATAL_ERROR \"help2man is not installed: the package's manual page is \"
                  \"made with it (scripts/install-deps.sh installs it; then build again)\")"
      COMPONENT debian EXCLUDE_FROM_ALL)
  endif()
  install(FILES ${FLINK_GPU_MAN_PAGE} DESTINATION /usr/share/man/man1
    COMPONENT debian EXCLUDE_FROM_ALL)
endif()

# --- maintainer scripts: Flink's own scripts moved aside, and back ------------------------------
# Of the files the package installs under the prefix, a Flink distribution has two of its own,
# in plugins/external-resource-gpu/: nvidia-gpu-discovery.sh and gpu-discovery-common.sh (the
# rest, bin/flink-gpu, the programs and the AMD and Intel scripts, are ours alone). preinst diverts
# them to <name>.flink-distribution; postrm puts them back. FLINK_GPU_FIRST_DIVERTING_VERSION:
# the first version whose package does so (postrm's abort-upgrade undoes the diversions only
# when going back to an older one).
set(FLINK_GPU_PLUGIN_PATH ${FLINK_GPU_PACKAGE_PREFIX}/${FLINK_GPU_PLUGIN_DIR})
set(FLINK_GPU_FIRST_DIVERTING_VERSION 0.1.0)
foreach(script preinst postrm)
  configure_file(packaging/debian/${script}.in ${PROJECT_BINARY_DIR}/packaging/control/${script}
    @ONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                           WORLD_READ WORLD_EXECUTE)
endforeach()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_BINARY_DIR}/packaging/control/preinst ${PROJECT_BINARY_DIR}/packaging/control/postrm)
# 0755 for the scripts, 0644 for the other control files, whatever the umask.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ${FLINK_GPU_PACKAGE_NAME})
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${FLINK_GPU_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${FLINK_GPU_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU external-resource driver for Apache Flink")
# The extended description; CPack puts CPACK_PACKAGE_DESCRIPTION_SUMMARY before it as the
# synopsis line.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "The default GPU discovery of Apache Flink's external-resource framework as a\n\
native program, laid over a Flink distribution in ${FLINK_GPU_PACKAGE_PREFIX}: the\n\
discovery script at Flink's default discovery-script.path, a discovery\n\
program that asks NVML (else nvidia-smi) and coordinates GPUs between the\n\
workers of a host, AMD and Intel discoveries that read sysfs as ROCm and\n\
Level Zero do, and the flink-gpu command-line tool: discover, config,\n\
status, release, exec, which, topology, drain, undrain, share, unshare,\n\
check, watch and completion. It ships systemd units for watch and for\n\
node_exporter's textfile metrics (disabled until enabled), bash and zsh\n\
completion and a manual page, and moves the Flink distribution's own\n\
discovery scripts aside while it is installed.")
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # flink-gpu_<version>_<arch>.deb
# Depends from the programs' needs (dpkg-shlibdeps): glibc alone, since everything else is
# linked in.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# nvidia-smi or NVML come with NVIDIA's driver, which Debian packages in non-free.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "nvidia-smi")
set(CPACK_PACKAGING_INSTALL_PREFIX ${FLINK_GPU_PACKAGE_PREFIX})
set(CPACK_STRIP_FILES ON)
# Debian's modes for folders, whatever the umask of whoever builds the package.
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
  OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
# One package of the plugin component and Debian's files; not the dev component.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL plugin debian)
include(CPack)
