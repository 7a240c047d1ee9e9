# The files `cmake --install` (and CPack) write with the paths of the layout
# being installed: the systemd unit, the tmpfiles.d snippet, the reference
# configuration, the manual page and cairn.pc. Their sources name the Debian
# package's paths (/usr/bin/cairn, /usr/lib/cairn/plugins, /etc/cairn,
# /usr/share/doc/cairn), so they read and work as they are; at install time
# those paths are rewritten for the prefix actually installed to (--prefix,
# or CPack's /usr), so `cmake --install --prefix /opt/cairn` gets a unit that
# starts /opt/cairn/bin/cairn with /etc/opt/cairn/cairn.yaml.
#
# Included at configure time (for cairn_absolute_dir) and by the install
# code the top-level CMakeLists.txt generates, which sets CAIRN_LAYOUT_*.
include_guard(GLOBAL)

# cairn_absolute_dir(<out> <prefix> <kind> <dir>): <dir> (a GNUInstallDirs
# value, relative or absolute) made absolute under <prefix> the way
# GNUInstallDirs does for its CMAKE_INSTALL_FULL_* values: sysconfdir and
# localstatedir of /usr are /etc and /var, of /opt/<name> /etc/opt/<name> and
# /var/opt/<name>. GNUInstallDirs decides at configure time; this decides for
# the prefix of the install that runs.
function(cairn_absolute_dir out prefix kind dir)
  if(IS_ABSOLUTE "${dir}")
    set(result "${dir}")
  elseif(kind STREQUAL "SYSCONFDIR" OR kind STREQUAL "LOCALSTATEDIR")
    if(prefix STREQUAL "/usr" OR prefix STREQUAL "/")
      set(result "/${dir}")
    elseif(prefix MATCHES "^/opt/(.+)$")
      set(result "/${dir}/opt/${CMAKE_MATCH_1}")
    else()
      set(result "${prefix}/${dir}")
    endif()
  elseif(prefix STREQUAL "/")
    set(result "/${dir}")
  else()
    set(result "${prefix}/${dir}")
  endif()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# Install-time only from here on.

# The rewrites, package path -> installed path, for the prefix being installed.
macro(cairn_layout_paths)
  set(layout_prefix "${CMAKE_INSTALL_PREFIX}")
  cairn_absolute_dir(layout_bindir "${layout_prefix}" BINDIR "${CAIRN_LAYOUT_BINDIR}")
  cairn_absolute_dir(layout_sysconfdir "${layout_prefix}" SYSCONFDIR "${CAIRN_LAYOUT_SYSCONFDIR}")
  cairn_absolute_dir(layout_plugindir "${layout_prefix}" PLUGINDIR "${CAIRN_LAYOUT_PLUGINDIR}")
  cairn_absolute_dir(layout_docdir "${layout_prefix}" DOCDIR "${CAIRN_LAYOUT_DOCDIR}")
  cairn_absolute_dir(layout_mandir "${layout_prefix}" MANDIR "${CAIRN_LAYOUT_MANDIR}")
  cairn_absolute_dir(layout_datadir "${layout_prefix}" DATADIR "${CAIRN_LAYOUT_DATADIR}")
  cairn_absolute_dir(layout_includedir "${layout_prefix}" INCLUDEDIR "${CAIRN_LAYOUT_INCLUDEDIR}")
  # systemd looks for units and snippets under <prefix>/lib (not the
  # multiarch libdir): /usr/lib/systemd/system, /usr/local/lib/sysusers.d...
  set(layout_systemddir "${layout_prefix}/lib")
  if(layout_prefix STREQUAL "/")
    set(layout_systemddir "/usr/lib")
  endif()
  # A scratch folder per install run: installs of one build may run at once.
  string(RANDOM LENGTH 12 layout_random)
  set(layout_scratch "${CAIRN_LAYOUT_BINARY_DIR}/install-layout/${layout_random}")
  file(MAKE_DIRECTORY "${layout_scratch}")
endmacro()

# Writes <source> with the package's paths rewritten to <scratch>/<name>.
function(cairn_layout_rewrite source name)
  file(READ "${source}" text)
  string(REPLACE "/usr/bin/cairn" "${layout_bindir}/cairn" text "${text}")
  string(REPLACE "/usr/lib/cairn/plugins" "${layout_plugindir}" text "${text}")
  string(REPLACE "/usr/share/doc/cairn" "${layout_docdir}" text "${text}")
  string(REPLACE "/etc/cairn" "${layout_sysconfdir}/cairn" text "${text}")
  file(WRITE "${layout_scratch}/${name}" "${text}")
endfunction()

function(cairn_install_runtime_layout)
  cairn_layout_paths()
  set(src "${CAIRN_LAYOUT_SOURCE_DIR}")
  set(data OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

  cairn_layout_rewrite("${src}/systemd/cairn.service" cairn.service)
  file(INSTALL "${layout_scratch}/cairn.service" PERMISSIONS ${data}
    DESTINATION "${layout_systemddir}/systemd/system")
  cairn_layout_rewrite("${src}/systemd/cairn-console.service" cairn-console.service)
  file(INSTALL "${layout_scratch}/cairn-console.service" PERMISSIONS ${data}
    DESTINATION "${layout_systemddir}/systemd/system")
  cairn_layout_rewrite("${src}/systemd/cairn.tmpfiles" cairn.conf)
  file(INSTALL "${layout_scratch}/cairn.conf" PERMISSIONS ${data}
    DESTINATION "${layout_systemddir}/tmpfiles.d")
  file(INSTALL "${src}/systemd/cairn.sysusers" PERMISSIONS ${data} RENAME cairn.conf
    DESTINATION "${layout_systemddir}/sysusers.d")

  # The reference configuration: a copy operators may edit (a conffile in
  # the package), and an untouched one to compare it with after upgrades.
  cairn_layout_rewrite("${src}/config/cairn.yaml" cairn.yaml)
  file(INSTALL "${layout_scratch}/cairn.yaml" PERMISSIONS ${data}
    DESTINATION "${layout_docdir}/examples")
  set(config "${layout_sysconfdir}/cairn/cairn.yaml")
  if(EXISTS "$ENV{DESTDIR}${config}")
    # `cmake --install` over an earlier install: never overwrite what an
    # operator may have edited (a package manager asks instead).
    message(STATUS "Keeping: $ENV{DESTDIR}${config} (the new reference: "
                   "${layout_docdir}/examples/cairn.yaml)")
  else()
    file(INSTALL "${layout_scratch}/cairn.yaml" PERMISSIONS ${data}
      DESTINATION "${layout_sysconfdir}/cairn")
  endif()
  # Workflow definitions go here; the database URL credential goes in a
  # folder only root reads (systemd loads it for the service).
  file(MAKE_DIRECTORY "${layout_scratch}/workflows" "${layout_scratch}/credentials")
  file(INSTALL "${layout_scratch}/workflows" DESTINATION "${layout_sysconfdir}/cairn"
    DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                          WORLD_READ WORLD_EXECUTE)
  file(INSTALL "${layout_scratch}/credentials" DESTINATION "${layout_sysconfdir}/cairn"
    DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)

  # cairn(1), built by `cairn help --man`, compressed as Debian wants it.
  cairn_layout_rewrite("${CAIRN_LAYOUT_MANUAL}" cairn.1)
  execute_process(COMMAND gzip -9n "${layout_scratch}/cairn.1" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip of the manual page failed (${rc})")
  endif()
  file(INSTALL "${layout_scratch}/cairn.1.gz" PERMISSIONS ${data}
    DESTINATION "${layout_mandir}/man1")
  file(REMOVE_RECURSE "${layout_scratch}")
endfunction()

function(cairn_install_development_layout)
  cairn_layout_paths()
  configure_file("${CAIRN_LAYOUT_SOURCE_DIR}/cmake/cairn.pc.in" "${layout_scratch}/cairn.pc" @ONLY)
  file(INSTALL "${layout_scratch}/cairn.pc" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
    DESTINATION "${layout_datadir}/pkgconfig")
  file(REMOVE_RECURSE "${layout_scratch}")
endfunction()
